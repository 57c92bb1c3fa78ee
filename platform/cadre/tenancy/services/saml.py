"""SAML 2.0 sign-in (pysaml2, signatures checked by xmlsec1): the IdP's metadata, Cadre's SP
metadata, the AuthnRequest (HTTP-Redirect), the checks on the Response (HTTP-POST) and the
IdP's LogoutRequest. Matching, roles, JIT and audit are the OIDC flow's (services/oidc.py).

An IdP POSTs the Response cross-site, where the browser withholds the (SameSite=Lax) session
cookie: the assertion consumer keeps the raw Response for a few minutes under a one-time key
and sends the browser on to the sign-in callback (a top-level GET, which carries the cookie),
where the sign-in started in this browser is found by RelayState and the Response checked."""

from __future__ import annotations

import calendar
import logging
import re
import secrets
import time

from django.conf import settings
from django.core.cache import cache
from django.utils.translation import gettext as _
from saml2 import BINDING_HTTP_POST, BINDING_HTTP_REDIRECT, samlp
from saml2.client import Saml2Client
from saml2.config import SPConfig
from saml2.mdstore import InMemoryMetaData
from saml2.metadata import create_metadata_string
from saml2.request import LogoutRequest
from saml2.response import IncorrectlySigned, StatusError
from saml2.saml import NAMEID_FORMAT_EMAILADDRESS
from saml2.sigver import RSACrypto, SignatureError, SigverError
from saml2.time_util import str_to_time
from saml2.validate import ResponseLifetimeExceed, ToEarly

from cadre.errors import InvalidInput
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


# --- Cadre as the service provider -----------------------------------------------------------


def _config(provider: IdentityProvider, sp: dict) -> SPConfig:
    config = SPConfig()
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
            "service": {
                "sp": {
                    "endpoints": {
                        "assertion_consumer_service": [(sp["acs_url"], BINDING_HTTP_POST)],
                        "single_logout_service": [(sp["slo_url"], BINDING_HTTP_REDIRECT)],
                    },
                    # InResponseTo is checked here, against the sign-in this browser started,
                    # after the replay check (so a replayed assertion is named as such).
                    "allow_unsolicited": True,
                    "want_assertions_or_response_signed": True,
                    "want_assertions_signed": False,
                    "want_response_signed": False,
                    "authn_requests_signed": False,
                    "logout_requests_signed": False,
                }
            },
        }
    )
    return config


def sp_metadata(*, provider: IdentityProvider, sp: dict) -> str:
    """Cadre's SP metadata for this provider (entity id, ACS and SLO URLs), for the IdP."""
    return create_metadata_string(None, config=_config(provider, sp), valid=24 * 7).decode()


def authn_request(*, provider: IdentityProvider, sp: dict, relay_state: str) -> tuple[str, str]:
    """The IdP's sign-in URL carrying an AuthnRequest (HTTP-Redirect) and the request's id."""
    client = Saml2Client(_config(provider, sp))
    try:
        request_id, info = client.prepare_for_authenticate(
            entityid=provider.saml_entity_id,
            relay_state=relay_state,
            binding=BINDING_HTTP_REDIRECT,
            response_binding=BINDING_HTTP_POST,
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
    client = Saml2Client(_config(provider, pending["sp"]))
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


def logout_request_read(
    *,
    provider: IdentityProvider,
    sp: dict,
    saml_request: str,
    relay_state: str,
    sig_alg: str,
    signature: str,
) -> dict:
    """An IdP's LogoutRequest (HTTP-Redirect), once its signature (over the query, with a key
    from the IdP's metadata), issuer, destination and time hold: {id, name_id, session_indexes}.
    Raises SamlRefused."""
    client = Saml2Client(_config(provider, sp))
    # The query signature is checked with the IdP's certificate; Cadre's SP has no key of its
    # own, so pysaml2 has no RSA backend unless given one.
    client.sec.sec_backend = RSACrypto(None)
    request = LogoutRequest(
        client.sec, [sp["slo_url"]], timeslack=settings.CADRE_SAML_CLOCK_SKEW_SECONDS
    )
    try:
        xml = client.unravel(saml_request, BINDING_HTTP_REDIRECT, LogoutRequest.msgtype)
        request = request.loads(
            xml,
            BINDING_HTTP_REDIRECT,
            origdoc=saml_request,
            must=True,
            relay_state=relay_state or None,
            sigalg=sig_alg or None,
            signature=signature or None,
        )
        if not request.verify():
            raise SamlRefused("expired", "the LogoutRequest's IssueInstant is out of range")
    except SamlRefused:
        raise
    except Exception as caught:
        reason = "bad_signature" if isinstance(caught, IncorrectlySigned) else "response_invalid"
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


def logout_response_url(
    *, provider: IdentityProvider, sp: dict, request, relay_state: str, success: bool
) -> str:
    """Where to send the browser with Cadre's LogoutResponse to `request` (the "message" of
    logout_request_read) over HTTP-Redirect: the IdP's single logout service, '' when its
    metadata names none."""
    client = Saml2Client(_config(provider, sp))
    try:
        response = client.create_logout_response(
            request,
            bindings=[BINDING_HTTP_REDIRECT],
            status=None
            if success
            else samlp.Status(status_code=samlp.StatusCode(value=samlp.STATUS_RESPONDER)),
            sign=False,
        )
    except Exception:  # no single logout service with that binding in the IdP's metadata
        logger.warning("SAML IdP %s names no HTTP-Redirect logout service", provider.slug)
        return ""
    info = client.apply_binding(
        BINDING_HTTP_REDIRECT, str(response), response.destination, relay_state, response=True
    )
    return dict(info["headers"])["Location"]
