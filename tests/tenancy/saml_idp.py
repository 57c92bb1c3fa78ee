"""A real SAML 2.0 identity provider on loopback for the SAML tests, built with pysaml2: its own
RSA key and self-signed certificate (made with `cryptography` at start), metadata, a login page
that reads the SP's AuthnRequest (HTTP-Redirect) and answers with a signed Response through an
HTTP-POST form, and IdP-initiated single logout (a signed HTTP-Redirect LogoutRequest).

Knobs let a test make it misbehave the ways real IdPs (or attackers) do: no signature, a key
its metadata does not list, another audience, an assertion outside its validity window."""

from __future__ import annotations

import base64
import datetime
import html
import tempfile
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID
from saml2 import BINDING_HTTP_REDIRECT, class_name, saml, samlp
from saml2.pack import http_redirect_message
from saml2.s_utils import decode_base64_and_inflate, sid
from saml2.sigver import (
    CryptoBackendXmlSec1,
    RSACrypto,
    SecurityContext,
    import_rsa_key_from_file,
    pre_signature_part,
)

from tests.tenancy.loopback import QuietHandler

XMLSEC = "/usr/bin/xmlsec1"
SIG_RSA_SHA256 = "http://www.w3.org/2001/04/xmldsig-more#rsa-sha256"
DIGEST_SHA256 = "http://www.w3.org/2001/04/xmlenc#sha256"


def key_and_certificate(common_name: str) -> tuple[bytes, bytes]:
    """A new RSA key and a self-signed certificate for it (PEM)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    return key_pem, certificate.public_bytes(serialization.Encoding.PEM)


def _cert_body(cert_pem: bytes) -> str:
    return "".join(
        line for line in cert_pem.decode().splitlines() if line and not line.startswith("-----")
    )


def _instant(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


class _Signer:
    """An xmlsec1 security context for one key pair."""

    def __init__(self, folder: Path, label: str):
        key_pem, cert_pem = key_and_certificate(f"Test IdP {label}")
        self.key_file = folder / f"{label}.key"
        self.cert_file = folder / f"{label}.crt"
        self.key_file.write_bytes(key_pem)
        self.cert_file.write_bytes(cert_pem)
        self.cert_body = _cert_body(cert_pem)
        self.context = SecurityContext(
            CryptoBackendXmlSec1(XMLSEC),
            key_file=str(self.key_file),
            cert_file=str(self.cert_file),
        )
        self.redirect_signer = RSACrypto(import_rsa_key_from_file(str(self.key_file)))

    def sign(self, xml: str, node, node_id: str) -> str:
        return self.context.sign_statement(
            xml, class_name(node), key_file=str(self.key_file), node_id=node_id
        )


class SamlIdp:
    def __init__(self):
        self.folder = Path(tempfile.mkdtemp(prefix="saml-idp-"))
        self.signer = _Signer(self.folder, "idp")
        self.foreign = _Signer(self.folder, "foreign")  # a key the metadata does not list
        self.users: dict[str, dict] = {}  # login → {"name_id": …, "attributes": {name: [values]}}
        # Knobs for the next responses:
        self.sign_assertion = True
        self.sign_response = False
        self.sign_with_foreign_key = False
        self.audience: str | None = None  # another audience than the SP's entity id
        self.shift_seconds = 0  # move the validity window (negative: already expired)
        self.requests: list[dict] = []  # AuthnRequests received, oldest first
        self.responses: list[dict] = []  # {"SAMLResponse", "RelayState", "acs"} handed out
        idp = self

        class Handler(QuietHandler):
            content_type = "text/html"

            def do_GET(self):
                url = urlsplit(self.path)
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                if url.path == "/metadata":
                    self._send(200, idp.metadata().encode(), "application/samlmetadata+xml")
                elif url.path == "/sso":
                    self._send(200, idp.login_page(query).encode())
                elif url.path == "/slo":
                    idp.logout_responses.append(query)
                    self._send(200, b"<!doctype html><title>Signed out</title><h1>Signed out</h1>")
                else:
                    self._send(404, b"not found")

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
                if urlsplit(self.path).path == "/login":
                    self._send(200, idp.login(form).encode())
                else:
                    self._send(404, b"not found")

        self.logout_responses: list[dict] = []
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.entity_id = f"{self.url}/metadata"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()

    # --- metadata ------------------------------------------------------------------------------

    def metadata(self) -> str:
        return f"""<?xml version="1.0"?>
<md:EntityDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata"
    xmlns:ds="http://www.w3.org/2000/09/xmldsig#" entityID="{self.entity_id}">
  <md:IDPSSODescriptor WantAuthnRequestsSigned="false"
      protocolSupportEnumeration="urn:oasis:names:tc:SAML:2.0:protocol">
    <md:KeyDescriptor use="signing"><ds:KeyInfo><ds:X509Data>
      <ds:X509Certificate>{self.signer.cert_body}</ds:X509Certificate>
    </ds:X509Data></ds:KeyInfo></md:KeyDescriptor>
    <md:SingleLogoutService Binding="{BINDING_HTTP_REDIRECT}" Location="{self.url}/slo"/>
    <md:NameIDFormat>urn:oasis:names:tc:SAML:2.0:nameid-format:persistent</md:NameIDFormat>
    <md:SingleSignOnService Binding="{BINDING_HTTP_REDIRECT}" Location="{self.url}/sso"/>
  </md:IDPSSODescriptor>
</md:EntityDescriptor>
"""

    # --- sign-in -------------------------------------------------------------------------------

    def login_page(self, query: dict) -> str:
        request = samlp.authn_request_from_string(decode_base64_and_inflate(query["SAMLRequest"]))
        self.requests.append(
            {
                "id": request.id,
                "acs": request.assertion_consumer_service_url,
                "issuer": request.issuer.text,
            }
        )
        hidden = "".join(
            f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">'
            for k, v in query.items()
        )
        return (
            "<!doctype html><title>Test SAML IdP</title><h1>Test SAML IdP</h1>"
            f'<form method="post" action="/login">{hidden}'
            '<label>Login <input name="login" id="login"></label>'
            '<button type="submit" id="approve">Sign in</button></form>'
        )

    def login(self, form: dict) -> str:
        """Sign the user in and hand the browser a form that posts the Response to the SP."""
        request = samlp.authn_request_from_string(decode_base64_and_inflate(form["SAMLRequest"]))
        saml_response = self.response_for(
            form["login"],
            in_response_to=request.id,
            acs=request.assertion_consumer_service_url,
            sp_entity_id=request.issuer.text,
        )
        relay_state = form.get("RelayState", "")
        acs = request.assertion_consumer_service_url
        self.responses.append(
            {"SAMLResponse": saml_response, "RelayState": relay_state, "acs": acs}
        )
        return (
            "<!doctype html><title>Test SAML IdP</title><h1>Signed in at the test IdP</h1>"
            f'<form method="post" action="{html.escape(acs)}">'
            f'<input type="hidden" name="SAMLResponse" value="{html.escape(saml_response)}">'
            f'<input type="hidden" name="RelayState" value="{html.escape(relay_state)}">'
            '<button type="submit" id="continue">Continue</button></form>'
        )

    def response_for(self, login: str, *, in_response_to: str, acs: str, sp_entity_id: str) -> str:
        """A base64 Response for the user, signed as the knobs say."""
        user = self.users[login]
        now = time.time() + self.shift_seconds
        assertion_id, response_id = sid(), sid()
        issuer = saml.Issuer(text=self.entity_id, format=saml.NAMEID_FORMAT_ENTITY)
        attributes = [
            saml.Attribute(
                name=name,
                name_format=saml.NAME_FORMAT_BASIC,
                attribute_value=[saml.AttributeValue(text=value) for value in values],
            )
            for name, values in user.get("attributes", {}).items()
        ]
        assertion = saml.Assertion(
            id=assertion_id,
            version="2.0",
            issue_instant=_instant(now),
            issuer=issuer,
            subject=saml.Subject(
                name_id=saml.NameID(format=saml.NAMEID_FORMAT_PERSISTENT, text=user["name_id"]),
                subject_confirmation=[
                    saml.SubjectConfirmation(
                        method=saml.SCM_BEARER,
                        subject_confirmation_data=saml.SubjectConfirmationData(
                            in_response_to=in_response_to,
                            not_on_or_after=_instant(now + 300),
                            recipient=acs,
                        ),
                    )
                ],
            ),
            conditions=saml.Conditions(
                not_before=_instant(now - 30),
                not_on_or_after=_instant(now + 300),
                audience_restriction=[
                    saml.AudienceRestriction(
                        audience=[saml.Audience(text=self.audience or sp_entity_id)]
                    )
                ],
            ),
            authn_statement=[
                saml.AuthnStatement(
                    authn_instant=_instant(now),
                    session_index=user.get("session_index", f"session-{login}"),
                    authn_context=saml.AuthnContext(
                        authn_context_class_ref=saml.AuthnContextClassRef(
                            text=saml.AUTHN_PASSWORD_PROTECTED
                        )
                    ),
                )
            ],
            attribute_statement=[saml.AttributeStatement(attribute=attributes)],
        )
        response = samlp.Response(
            id=response_id,
            version="2.0",
            issue_instant=_instant(now),
            destination=acs,
            in_response_to=in_response_to,
            issuer=saml.Issuer(text=self.entity_id, format=saml.NAMEID_FORMAT_ENTITY),
            status=samlp.Status(status_code=samlp.StatusCode(value=samlp.STATUS_SUCCESS)),
            assertion=assertion,
        )
        signer = self.foreign if self.sign_with_foreign_key else self.signer
        if self.sign_assertion:
            assertion.signature = pre_signature_part(
                assertion_id, signer.cert_body, sign_alg=SIG_RSA_SHA256, digest_alg=DIGEST_SHA256
            )
        if self.sign_response:
            response.signature = pre_signature_part(
                response_id, signer.cert_body, sign_alg=SIG_RSA_SHA256, digest_alg=DIGEST_SHA256
            )
        xml = str(response)
        if self.sign_assertion:
            xml = signer.sign(xml, assertion, assertion_id)
        if self.sign_response:
            xml = signer.sign(xml, response, response_id)
        return base64.b64encode(xml.encode() if isinstance(xml, str) else xml).decode()

    # --- single logout -------------------------------------------------------------------------

    def logout_request_url(
        self, *, slo_url: str, name_id: str, session_index: str = "", sign: bool = True
    ) -> str:
        """An IdP-initiated LogoutRequest to the SP's single logout URL (HTTP-Redirect)."""
        now = time.time()
        request = samlp.LogoutRequest(
            id=sid(),
            version="2.0",
            issue_instant=_instant(now),
            destination=slo_url,
            issuer=saml.Issuer(text=self.entity_id, format=saml.NAMEID_FORMAT_ENTITY),
            name_id=saml.NameID(format=saml.NAMEID_FORMAT_PERSISTENT, text=name_id),
            session_index=[samlp.SessionIndex(text=session_index)] if session_index else [],
        )
        signer = self.foreign if self.sign_with_foreign_key else self.signer
        info = http_redirect_message(
            str(request),
            slo_url,
            relay_state="idp-logout",
            typ="SAMLRequest",
            sigalg=SIG_RSA_SHA256 if sign else None,
            sign=sign,
            backend=signer.redirect_signer if sign else None,
        )
        location = dict(info["headers"])["Location"]
        return location
