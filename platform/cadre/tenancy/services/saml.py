"""SAML 2.0 sign-in (pysaml2, signatures checked by xmlsec1): the IdP's metadata (read, and
refreshed from its URL), Cadre's SP key pair and metadata, the signed AuthnRequest
(HTTP-Redirect), the checks on the Response (HTTP-POST, assertions possibly encrypted to the SP
key) and single logout both ways (HTTP-Redirect and HTTP-POST). Matching, roles, JIT and audit
are the OIDC flow's (services/oidc.py).

An IdP POSTs the Response cross-site, where the browser withholds the (SameSite=Lax) session
cookie: the assertion consumer keeps the raw Response for a few minutes under a one-time key
and sends the browser on to the sign-in callback (a top-level GET, which carries the cookie),
where the sign-in started in this browser is found by RelayState and the Response checked."""

from __future__ import annotations

import calendar
import datetime
import logging
import os
import re
import secrets
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID
from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from saml2 import BINDING_HTTP_POST, BINDING_HTTP_REDIRECT, samlp
from saml2.client import Saml2Client
from saml2.config import SPConfig
from saml2.mdstore import InMemoryMetaData
from saml2.metadata import create_metadata_string
from saml2.request import LogoutRequest
from saml2.response import IncorrectlySigned, StatusError
from saml2.s_utils import UnknownSystemEntity, UnsupportedBinding
from saml2.saml import NAMEID_FORMAT_EMAILADDRESS, NameID
from saml2.sigver import RSACrypto, SignatureError, SigverError, verify_redirect_signature
from saml2.time_util import str_to_time
from saml2.validate import ResponseLifetimeExceed, ToEarly
from saml2.xmldsig import DIGEST_SHA256, SIG_RSA_SHA256

from cadre import outbound
from cadre.errors import InvalidInput
from cadre.governance import audit
from cadre.tenancy.actors import system_actor
from cadre.tenancy.models import IdentityProvider

logger = logging.getLogger(__name__)

MAX_METADATA_BYTES = 1024 * 1024
_STASH_SECONDS = 300
_STASH = "saml:response:{key}"
_REPLAY = "saml:assertion:{provider}:{assertion}"
# A RelayState Cadre hands out: the sign-in's state token (secrets.token_urlsafe(32)).
_RELAY_STATE = re.compile(r"^[A-Za-z0-9_-]{32,64}$")


class SamlRefused(Exception):
    """A SAML message refused for `reason` (a key of services.refusals.REASONS)."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(reason)
        self.reason = reason
        self.detail = detail


# --- the IdP's metadata ----------------------------------------------------------------------


def _attribute_converters():
    from saml2.attribute_converter import ac_factory

    return ac_factory()


def metadata_read(xml: str) -> dict:
    """What Cadre needs from an IdP's metadata: entity id, single sign-on URL (HTTP-Redirect),
    single logout URL, signing certificates. InvalidInput when it is not usable metadata."""

    def refused(why: str) -> InvalidInput:
        return InvalidInput(
            _("The IdP metadata is not usable: %(why)s") % {"why": why},
            details={"saml_metadata_xml": [why]},
        )

    if not xml or not xml.strip():
        raise refused(_("it is empty."))
    if len(xml.encode()) > MAX_METADATA_BYTES:
        raise refused(_("it is larger than 1 MB."))
    metadata = InMemoryMetaData(_attribute_converters(), xml.strip())
    try:
        metadata.load()
    except Exception as caught:  # pysaml2 raises the XML parser's and its own errors
        raise refused(
            _("it is not SAML metadata XML (%(error)s).") % {"error": str(caught)[:120]}
        ) from None
    idps = [entity_id for entity_id, entity in metadata.items() if entity.get("idpsso_descriptor")]
    if len(idps) != 1:
        raise refused(
            _("it must describe exactly one identity provider (found %(count)s).")
            % {"count": len(idps)}
        )
    entity_id = idps[0]
    sso = metadata.service(
        entity_id, "idpsso_descriptor", "single_sign_on_service", BINDING_HTTP_REDIRECT
    )
    if not sso:
        raise refused(_("the IdP has no single sign-on service with the HTTP-Redirect binding."))
    certs = metadata.certs(entity_id, "idpsso", "signing")
    if not certs:
        raise refused(_("the IdP lists no signing certificate."))
    slo = metadata.service(
        entity_id, "idpsso_descriptor", "single_logout_service", BINDING_HTTP_REDIRECT
    )
    return {
        "entity_id": entity_id,
        "sso_url": sso[0]["location"],
        "slo_url": (slo[0].get("response_location") or slo[0]["location"]) if slo else "",
        "certificates": len(certs),
    }


# --- Cadre's SP key pair ---------------------------------------------------------------------

_SP_KEY_BITS = 3072
_SP_CERTIFICATE_DAYS = 3650  # SAML trusts the certificate in metadata, not its dates


def sp_key_pair_new(common_name: str) -> tuple[str, str]:
    """A new RSA private key and a self-signed certificate for it (both PEM)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=_SP_KEY_BITS)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name[:64])])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=_SP_CERTIFICATE_DAYS))
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    return key_pem, certificate.public_bytes(serialization.Encoding.PEM).decode()


def _common_name(provider: IdentityProvider) -> str:
    return f"Cadre SP {provider.organization.slug}/{provider.slug}"


def sp_keys_ensure(provider: IdentityProvider) -> IdentityProvider:
    """Give the provider its SP key pair the first time one is needed (once: a concurrent
    first use keeps whichever pair was stored first)."""
    if provider.saml_sp_certificate and provider.saml_sp_private_key:
        return provider
    key_pem, cert_pem = sp_key_pair_new(_common_name(provider))
    IdentityProvider.objects.filter(pk=provider.pk, saml_sp_certificate="").update(
        saml_sp_private_key=key_pem, saml_sp_certificate=cert_pem
    )
    provider.refresh_from_db(fields=["saml_sp_private_key", "saml_sp_certificate"])
    return provider


def _key_audit(actor, provider: IdentityProvider, action: str) -> None:
    audit.record(
        actor=actor,
        action=action,
        target=provider,
        after={
            "provider": provider.slug,
            "certificate_sha256": certificate_fingerprint(provider.saml_sp_certificate),
            "next_certificate_sha256": certificate_fingerprint(provider.saml_sp_next_certificate),
        },
    )


def certificate_fingerprint(cert_pem: str) -> str:
    """A PEM certificate's SHA-256 fingerprint (aa:bb:…), '' for none."""
    if not cert_pem:
        return ""
    certificate = x509.load_pem_x509_certificate(cert_pem.encode())
    return certificate.fingerprint(hashes.SHA256()).hex(":")


@transaction.atomic
def sp_key_rotate_begin(*, actor, provider: IdentityProvider) -> IdentityProvider:
    """Make the `next` SP key pair: published in the SP metadata (signing and encryption)
    beside the current one, not yet used. The IdP's administrator loads the new metadata;
    then sp_key_rotate_complete. Audited with the certificates' fingerprints."""
    provider = IdentityProvider.objects.select_for_update().get(pk=provider.pk)
    sp_keys_ensure(provider)
    provider.saml_sp_next_private_key, provider.saml_sp_next_certificate = sp_key_pair_new(
        _common_name(provider)
    )
    provider.save(update_fields=["saml_sp_next_private_key", "saml_sp_next_certificate"])
    _key_audit(actor, provider, "identity_provider.saml_key_rotate_begin")
    return provider


@transaction.atomic
def sp_key_rotate_complete(*, actor, provider: IdentityProvider) -> IdentityProvider:
    """The `next` SP key pair becomes current and the old one is dropped (assertions still
    encrypted to it can no longer be read). InvalidInput when no rotation was begun."""
    provider = IdentityProvider.objects.select_for_update().get(pk=provider.pk)
    if not provider.saml_sp_next_certificate:
        raise InvalidInput(_("No SP key rotation was begun for this identity provider."))
    provider.saml_sp_private_key = provider.saml_sp_next_private_key
    provider.saml_sp_certificate = provider.saml_sp_next_certificate
    provider.saml_sp_next_private_key = provider.saml_sp_next_certificate = ""
    provider.save(
        update_fields=[
            "saml_sp_private_key",
            "saml_sp_certificate",
            "saml_sp_next_private_key",
            "saml_sp_next_certificate",
        ]
    )
    _key_audit(actor, provider, "identity_provider.saml_key_rotate_complete")
    return provider


# --- Cadre as the service provider -----------------------------------------------------------


def sp_endpoints(provider: IdentityProvider) -> dict:
    """Cadre's SAML SP for this provider: entity id (its metadata URL), ACS and SLO URLs, from
    CADRE_BASE_URL (they must not change with the host a page was reached at)."""
    base = settings.CADRE_BASE_URL.rstrip("/")
    args = [provider.organization.slug, provider.slug]
    return {
        "entity_id": base + reverse("console:saml_metadata", args=args),
        "acs_url": base + reverse("console:saml_acs", args=args),
        "slo_url": base + reverse("console:saml_slo", args=args),
    }


def _config(provider: IdentityProvider, sp: dict, keys: dict) -> SPConfig:
    config = SPConfig()
    encryption = [{"key_file": keys["key"], "cert_file": keys["cert"]}]
    if keys.get("next_key"):
        encryption.append({"key_file": keys["next_key"], "cert_file": keys["next_cert"]})
    config.load(
        {
            "entityid": sp["entity_id"],
            "xmlsec_binary": settings.CADRE_SAML_XMLSEC_BINARY,
            "accepted_time_diff": settings.CADRE_SAML_CLOCK_SKEW_SECONDS,
            "allow_unknown_attributes": True,
            # Signatures are checked only with the keys the IdP's metadata lists, never with a
            # certificate the message carries.
            "only_use_keys_in_metadata": True,
            "metadata": {"inline": [provider.saml_metadata_xml]}
            if provider.saml_metadata_xml
            else {},
            # Cadre's SP key pair signs; assertions encrypted to the current or the next
            # certificate are both read, so an IdP may switch as soon as it sees the next one.
            "key_file": keys["key"],
            "cert_file": keys["cert"],
            "additional_cert_files": [keys["next_cert"]] if keys.get("next_cert") else None,
            "encryption_keypairs": encryption,
            "signing_algorithm": SIG_RSA_SHA256,
            "digest_algorithm": DIGEST_SHA256,
            "service": {
                "sp": {
                    "endpoints": {
                        "assertion_consumer_service": [(sp["acs_url"], BINDING_HTTP_POST)],
                        "single_logout_service": [
                            (sp["slo_url"], BINDING_HTTP_REDIRECT),
                            (sp["slo_url"], BINDING_HTTP_POST),
                        ],
                    },
                    # InResponseTo is checked here, against the sign-in this browser started,
                    # after the replay check (so a replayed assertion is named as such).
                    "allow_unsolicited": True,
                    "want_assertions_or_response_signed": True,
                    "want_assertions_signed": False,
                    "want_response_signed": False,
                    "authn_requests_signed": True,
                    "logout_requests_signed": True,
                    "logout_responses_signed": True,
                }
            },
        }
    )
    return config


@contextmanager
def _client(provider: IdentityProvider, sp: dict) -> Iterator[Saml2Client]:
    """A pysaml2 client with the SP key pair: xmlsec1 reads keys from files, so they are
    written (owner-only) to a private temporary folder removed when the client is done."""
    sp_keys_ensure(provider)
    with tempfile.TemporaryDirectory(prefix="cadre-saml-") as folder:
        keys = {}
        pems = {
            "key": provider.saml_sp_private_key,
            "cert": provider.saml_sp_certificate,
            "next_key": provider.saml_sp_next_private_key,
            "next_cert": provider.saml_sp_next_certificate,
        }
        for name, pem in pems.items():
            if pem:
                path = Path(folder) / f"{name}.pem"
                descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(descriptor, "w") as file:
                    file.write(pem)
                keys[name] = str(path)
        yield Saml2Client(_config(provider, sp, keys))


def sp_metadata(*, provider: IdentityProvider, sp: dict) -> str:
    """Cadre's SP metadata for this provider (entity id, ACS and SLO URLs, the SP key pair's
    certificate, and the next one during a rotation, for signing and encryption)."""
    with _client(provider, sp) as client:
        xml = create_metadata_string(None, config=client.config, valid=24 * 7).decode()
    # Cadre asks for signed assertions (IdPs such as SimpleSAMLphp sign the assertion only when
    # the SP's metadata says so) while accepting a signed Response around an unsigned one, which
    # pysaml2's want_assertions_signed would refuse; so the flag is set in the metadata only.
    return xml.replace('WantAssertionsSigned="false"', 'WantAssertionsSigned="true"', 1)


def authn_request(*, provider: IdentityProvider, sp: dict, relay_state: str) -> tuple[str, str]:
    """The IdP's sign-in URL carrying a signed AuthnRequest (HTTP-Redirect: the signature is in
    the query) and the request's id."""
    with _client(provider, sp) as client:
        try:
            request_id, info = client.prepare_for_authenticate(
                entityid=provider.saml_entity_id,
                relay_state=relay_state,
                binding=BINDING_HTTP_REDIRECT,
                response_binding=BINDING_HTTP_POST,
                sign=True,
                sigalg=SIG_RSA_SHA256,
            )
        except Exception as caught:  # metadata that no longer names the IdP, and the like
            raise SamlRefused("provider_unreachable", str(caught)[:200]) from None
    return dict(info["headers"])["Location"], request_id


def relay_state_ok(relay_state: str) -> bool:
    """Whether a RelayState is one Cadre could have issued (a state token, never a URL)."""
    return bool(_RELAY_STATE.match(relay_state or ""))


def response_stash(saml_response: str) -> str:
    """Keep a posted SAMLResponse for the callback; returns its one-time key."""
    key = secrets.token_urlsafe(24)
    cache.set(_STASH.format(key=key), saml_response, _STASH_SECONDS)
    return key


def _stash_take(key: str) -> str | None:
    if not key or not re.fullmatch(r"[A-Za-z0-9_-]{16,64}", key):
        return None
    stashed = _STASH.format(key=key)
    saml_response = cache.get(stashed)
    cache.delete(stashed)
    return saml_response


def _reason_for(caught: Exception) -> str:
    text = str(caught)
    if isinstance(caught, ResponseLifetimeExceed):
        return "expired"
    if isinstance(caught, ToEarly):
        return "not_yet_valid"
    if isinstance(caught, StatusError):
        return "provider_error"
    if "Signature missing" in text or "Neither the response nor the assertions are signed" in text:
        return "signature_missing"
    if isinstance(caught, SignatureError | SigverError | IncorrectlySigned):
        return "bad_signature"
    if "AudienceRestrictions" in text:
        return "wrong_audience"
    if "recipient" in text.lower():
        return "wrong_destination"
    return "response_invalid"


def _attributes(assertion) -> dict:
    """The assertion's attributes by Name and by FriendlyName: one value as itself, several as
    a list."""
    claims: dict = {}
    for statement in assertion.attribute_statement or []:
        for attribute in statement.attribute or []:
            values = [
                (value.text or "").strip()
                for value in attribute.attribute_value or []
                if value.text is not None
            ]
            value = values[0] if len(values) == 1 else values
            for name in (attribute.name, attribute.friendly_name):
                if name:
                    claims.setdefault(name, value)
    return claims


def _replay_seconds(response) -> int:
    """How long an assertion id is remembered: until it could no longer be accepted."""
    ends = [response.not_on_or_after or 0]
    for confirmation in response.assertion.subject.subject_confirmation or []:
        data = confirmation.subject_confirmation_data
        if data is not None and data.not_on_or_after:
            ends.append(calendar.timegm(str_to_time(data.not_on_or_after)))
    until = max(ends) or time.time() + 3600
    seconds = int(until - time.time()) + settings.CADRE_SAML_CLOCK_SKEW_SECONDS
    return min(max(seconds, 60), 24 * 3600)


def response_claims(*, provider: IdentityProvider, pending: dict, code: str) -> tuple[dict, dict]:
    """The checked assertion's claims (its attributes, plus name_id, name_id_format,
    session_index) and the facts matching uses (as services.oidc.sso_claims returns them).

    Checked: the signature on the response or the assertion, with a key from the IdP's metadata;
    the issuer; the audience (Cadre's entity id); NotBefore / NotOnOrAfter within the clock skew;
    the recipient (the ACS URL); that the assertion id was never accepted before; that it
    answers the AuthnRequest this browser sent. Raises SamlRefused."""
    saml_response = _stash_take(code)
    if saml_response is None:
        raise SamlRefused("state_unknown", "no posted SAML response for this sign-in")
    with _client(provider, pending["sp"]) as client:
        try:
            response = client.parse_authn_request_response(saml_response, BINDING_HTTP_POST)
        except Exception as caught:  # pysaml2 signals every failed check with an exception
            raise SamlRefused(_reason_for(caught), str(caught)[:200]) from None
    if response is None or response.assertion is None:
        raise SamlRefused("response_invalid", "wrong destination or no assertion")
    assertion = response.assertion
    issuers = {response.issuer(), (assertion.issuer.text or "").strip() if assertion.issuer else ""}
    if issuers - {"", provider.saml_entity_id} or provider.saml_entity_id not in issuers:
        raise SamlRefused("wrong_issuer", f"issued by {sorted(issuers)}")
    if not cache.add(
        _REPLAY.format(provider=provider.pk, assertion=assertion.id), 1, _replay_seconds(response)
    ):
        raise SamlRefused("assertion_replayed", f"assertion {assertion.id}")
    answered = {response.in_response_to} | {
        confirmation.subject_confirmation_data.in_response_to
        for confirmation in assertion.subject.subject_confirmation or []
        if confirmation.subject_confirmation_data is not None
    }
    if answered != {pending.get("request_id")}:
        raise SamlRefused("state_unknown", "the response answers another sign-in")
    name_id = response.name_id
    if name_id is None or not (name_id.text or "").strip():
        raise SamlRefused("response_invalid", "no NameID")
    info = response.session_info()
    claims = {
        **_attributes(assertion),
        "name_id": name_id.text.strip(),
        "name_id_format": name_id.format or "",
        "session_index": info.get("session_index") or "",
    }
    return claims, _found(provider, claims)


def _first(value) -> str:
    if isinstance(value, list):
        value = value[0] if value else ""
    return str(value or "").strip()


def _found(provider: IdentityProvider, claims: dict) -> dict:
    email = _first(claims.get(provider.claim_email))
    if not email and claims["name_id_format"] == NAMEID_FORMAT_EMAILADDRESS:
        email = claims["name_id"]
    return {
        "sub": claims["name_id"],
        "im_ids": [],
        "tenant": "",
        "email": email,
        # A signed assertion from the organization's own IdP vouches for what it states.
        "email_verified": bool(email),
        "name": _first(claims.get(provider.claim_name)),
        "employee_id": _first(claims.get(provider.claim_employee_id))
        if provider.claim_employee_id
        else "",
    }


# --- single logout ---------------------------------------------------------------------------

_LOGOUT_SENT = "saml:logout-request:{provider}:{request}"
_LOGOUT_SECONDS = 600


def _binding(binding: str) -> str:
    return BINDING_HTTP_POST if binding == "post" else BINDING_HTTP_REDIRECT


def logout_request_read(
    *,
    provider: IdentityProvider,
    sp: dict,
    saml_request: str,
    relay_state: str,
    sig_alg: str,
    signature: str,
    binding: str = "redirect",
) -> dict:
    """An IdP's LogoutRequest (binding "redirect": signed over the query; "post": an XML
    signature), once its signature (with a key from the IdP's metadata), issuer, destination
    and time hold: {id, name_id, session_indexes, message}. Raises SamlRefused."""
    with _client(provider, sp) as client:
        # The query signature is checked with the IdP's certificate (pysaml2's RSA backend).
        client.sec.sec_backend = RSACrypto(None)
        request = LogoutRequest(
            client.sec, [sp["slo_url"]], timeslack=settings.CADRE_SAML_CLOCK_SKEW_SECONDS
        )
        try:
            xml = client.unravel(saml_request, _binding(binding), LogoutRequest.msgtype)
            request = request.loads(
                xml,
                _binding(binding),
                origdoc=saml_request,
                must=True,
                relay_state=relay_state or None,
                sigalg=sig_alg or None,
                signature=signature or None,
            )
            if request is None or request.message is None:
                raise SamlRefused("signature_missing", "the LogoutRequest is not signed")
            if not request.verify():
                raise SamlRefused("expired", "the LogoutRequest's IssueInstant is out of range")
        except SamlRefused:
            raise
        except Exception as caught:
            reason = (
                "bad_signature" if isinstance(caught, IncorrectlySigned) else "response_invalid"
            )
            raise SamlRefused(reason, str(caught)[:200]) from None
    message = request.message
    issuer = (message.issuer.text or "").strip() if message.issuer else ""
    if issuer != provider.saml_entity_id:
        raise SamlRefused("wrong_issuer", f"issued by {issuer!r}")
    if message.name_id is None or not (message.name_id.text or "").strip():
        raise SamlRefused("response_invalid", "no NameID")
    return {
        "id": message.id,
        "name_id": message.name_id.text.strip(),
        "session_indexes": [index.text for index in message.session_index or [] if index.text],
        "message": message,
    }


def _logout_services(client: Saml2Client, provider: IdentityProvider, binding: str) -> list:
    """The IdP's single logout services with this binding, per its metadata ([] for none)."""
    try:
        return client.metadata.single_logout_service(provider.saml_entity_id, binding, "idpsso")
    except (UnsupportedBinding, UnknownSystemEntity):
        return []


def logout_response_send(
    *,
    provider: IdentityProvider,
    sp: dict,
    request,
    relay_state: str,
    success: bool,
    binding: str = "redirect",
) -> tuple[str, str]:
    """Cadre's signed LogoutResponse to `request` (the "message" of logout_request_read), in
    the binding the request came in when the IdP's metadata offers it, else the other one:
    ("redirect", url) or ("post", an auto-submitting HTML form); ("", "") when the IdP's
    metadata names no logout service."""
    preferred = _binding(binding)
    other = BINDING_HTTP_REDIRECT if preferred == BINDING_HTTP_POST else BINDING_HTTP_POST
    with _client(provider, sp) as client:
        services = {
            candidate: _logout_services(client, provider, candidate)
            for candidate in (preferred, other)
        }
        chosen = next((candidate for candidate in services if services[candidate]), None)
        if chosen is None:
            logger.warning("SAML IdP %s names no single logout service", provider.slug)
            return "", ""
        service = services[chosen][0]
        destination = service.get("response_location") or service["location"]
        response = client.create_logout_response(
            request,
            bindings=[chosen],
            status=None
            if success
            else samlp.Status(status_code=samlp.StatusCode(value=samlp.STATUS_RESPONDER)),
            # The redirect binding signs the query instead (apply_binding below).
            sign=chosen == BINDING_HTTP_POST,
            sign_alg=SIG_RSA_SHA256,
            digest_alg=DIGEST_SHA256,
        )
        # A signed (HTTP-POST) response comes back as its XML text, an unsigned one as an object.
        info = client.apply_binding(
            chosen,
            str(response),
            destination,
            relay_state,
            response=True,
            sign=chosen == BINDING_HTTP_REDIRECT,
            sigalg=SIG_RSA_SHA256,
        )
    if chosen == BINDING_HTTP_POST:
        return "post", info["data"]
    return "redirect", dict(info["headers"])["Location"]


def logout_request_url(
    *,
    provider: IdentityProvider,
    sp: dict,
    name_id: str,
    name_id_format: str,
    session_index: str,
    relay_state: str,
) -> str:
    """SP-initiated single logout: the IdP's logout service URL carrying Cadre's signed
    LogoutRequest (HTTP-Redirect) for this NameID and SessionIndex; '' when the IdP's metadata
    names no HTTP-Redirect logout service. The request id is remembered, so only the IdP's
    answer to it is taken (logout_response_read)."""
    with _client(provider, sp) as client:
        services = _logout_services(client, provider, BINDING_HTTP_REDIRECT)
        if not services:
            return ""
        destination = services[0]["location"]
        request_id, request = client.create_logout_request(
            destination,
            provider.saml_entity_id,
            name_id=_name_id(name_id, name_id_format),
            session_indexes=[session_index] if session_index else None,
            sign=False,
        )
        info = client.apply_binding(
            BINDING_HTTP_REDIRECT,
            str(request),
            destination,
            relay_state,
            sign=True,
            sigalg=SIG_RSA_SHA256,
        )
    cache.set(_LOGOUT_SENT.format(provider=provider.pk, request=request_id), 1, _LOGOUT_SECONDS)
    return dict(info["headers"])["Location"]


def _name_id(value: str, name_id_format: str) -> NameID:
    return NameID(text=value, format=name_id_format or None)


def logout_response_read(
    *,
    provider: IdentityProvider,
    sp: dict,
    saml_response: str,
    relay_state: str,
    sig_alg: str,
    signature: str,
    binding: str = "redirect",
) -> bool:
    """The IdP's LogoutResponse to a LogoutRequest Cadre sent: signed (query or XML) with a key
    from the IdP's metadata, from the IdP, answering a request still remembered (once).
    Whether the IdP reports success. Raises SamlRefused."""
    with _client(provider, sp) as client:
        try:
            if binding == "redirect":
                if not (sig_alg and signature):
                    raise SamlRefused("signature_missing", "the LogoutResponse is not signed")
                message = {"SAMLResponse": saml_response, "SigAlg": sig_alg, "Signature": signature}
                if relay_state:
                    message["RelayState"] = relay_state
                certificates = client.metadata.certs(provider.saml_entity_id, "idpsso", "signing")
                if not any(
                    verify_redirect_signature(message, RSACrypto(None), cert=cert[1])
                    for cert in certificates
                ):
                    raise SamlRefused("bad_signature", "LogoutResponse query signature")
            response = client.parse_logout_request_response(saml_response, _binding(binding))
        except SamlRefused:
            raise
        except Exception as caught:
            reason = (
                "bad_signature"
                if isinstance(caught, SignatureError | SigverError)
                else ("response_invalid")
            )
            raise SamlRefused(reason, str(caught)[:200]) from None
    if response is None or response.response is None:
        raise SamlRefused("response_invalid", "no LogoutResponse")
    message = response.response
    if binding == "post" and message.signature is None:
        raise SamlRefused("signature_missing", "the LogoutResponse is not signed")
    issuer = (message.issuer.text or "").strip() if message.issuer else ""
    if issuer != provider.saml_entity_id:
        raise SamlRefused("wrong_issuer", f"issued by {issuer!r}")
    sent = _LOGOUT_SENT.format(provider=provider.pk, request=message.in_response_to or "")
    if not cache.get(sent):
        raise SamlRefused("state_unknown", "the LogoutResponse answers no request Cadre sent")
    cache.delete(sent)
    return message.status.status_code.value == samlp.STATUS_SUCCESS


# --- the IdP's metadata, refreshed -----------------------------------------------------------

_METADATA_TIMEOUT = 10


def metadata_fetch(url: str) -> str:
    """An IdP's metadata from its URL, through the outbound guard (public addresses only,
    unless CADRE_SAML_METADATA_ALLOWED_HOSTS allows the host; connected to the checked
    address); no redirects, at most 1 MB. InvalidInput when it cannot be read."""

    def refused(why: str) -> InvalidInput:
        return InvalidInput(
            _("The IdP metadata URL: %(why)s") % {"why": why}, details={"saml_metadata_url": [why]}
        )

    try:
        url = outbound.check_url(url, allow_setting=outbound.SAML_METADATA)
        with (
            outbound.http_client(
                allow_setting=outbound.SAML_METADATA, timeout=_METADATA_TIMEOUT
            ) as client,
            client.stream("GET", url) as answer,
        ):
            if answer.status_code != 200:
                raise refused(_("it answered HTTP %(status)s.") % {"status": answer.status_code})
            body = b""
            for chunk in answer.iter_bytes():
                body += chunk
                if len(body) > MAX_METADATA_BYTES:
                    raise refused(_("its metadata is larger than 1 MB."))
    except outbound.OutboundRefused as refusal:
        raise refused(refusal.message) from None
    except httpx.HTTPError as caught:
        raise refused(_("it could not be read (%(error)s).") % {"error": caught}) from None
    return body.decode("utf-8", errors="replace")


def metadata_refresh(*, provider: IdentityProvider) -> bool:
    """Read the IdP's metadata again from its URL and keep it (new signing certificates, new
    endpoints) when it parses and still names the same IdP; whether it changed. A fetch or
    metadata that is refused stores nothing but the provider's last_error, and is audited."""
    try:
        xml = metadata_fetch(provider.saml_metadata_url)
        facts = metadata_read(xml)
        if facts["entity_id"] != provider.saml_entity_id:
            raise InvalidInput(
                _("The IdP metadata now names another entity id (%(entity_id)s).")
                % {"entity_id": facts["entity_id"][:200]}
            )
    except InvalidInput as refusal:
        with transaction.atomic():
            IdentityProvider.objects.filter(pk=provider.pk).update(
                last_error=f"metadata_refresh: {refusal.message}"[:500],
                last_error_at=timezone.now(),
            )
            audit.record(
                actor=system_actor(provider.organization, label=f"sso:{provider.slug}"),
                action="identity_provider.saml_metadata_refresh_failed",
                target=provider,
                reason="metadata_refused",
                after={"provider": provider.slug, "detail": str(refusal.message)[:300]},
            )
        return False
    changed = xml.strip() != provider.saml_metadata_xml.strip()
    with transaction.atomic():
        provider.saml_metadata_read_at = timezone.now()
        fields = ["saml_metadata_read_at"]
        if changed:
            provider.saml_metadata_xml = xml.strip()
            fields.append("saml_metadata_xml")
            audit.record(
                actor=system_actor(provider.organization, label=f"sso:{provider.slug}"),
                action="identity_provider.saml_metadata_refresh",
                target=provider,
                after={"provider": provider.slug, "certificates": facts["certificates"]},
            )
        provider.save(update_fields=fields)
    return changed


def metadata_refresh_all() -> int:
    """Refresh every enabled SAML provider's metadata read from a URL; how many changed."""
    providers = (
        IdentityProvider.objects.select_related("organization")
        .filter(kind=IdentityProvider.Kind.SAML, is_enabled=True)
        .exclude(saml_metadata_url="")
    )
    return sum(metadata_refresh(provider=provider) for provider in providers)
