"""SAML 2.0 against SimpleSAMLphp (tests/tenancy/simplesamlphp.py), a code base other than
Cadre's SP (pysaml2): SP-initiated sign-in with signed, encrypted assertions; signed
AuthnRequests SimpleSAMLphp verifies against Cadre's SP metadata; the SP key pair's rotation;
single logout initiated by either side over HTTP-Redirect and HTTP-POST; the IdP's metadata
refreshed from its URL. The pysaml2 IdP (test_sso_saml.py) stays for the failure cases
SimpleSAMLphp cannot be made to produce (a foreign key, a shifted clock, another audience)."""

from __future__ import annotations

import base64
import html
import re
import shutil
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from django.conf import settings as django_settings
from django.test import Client
from django.urls import reverse

from cadre.governance.audit_models import AuditEvent
from cadre.tenancy.models import IdentityProvider, Member, SsoIdentity, SsoSession
from cadre.tenancy.services import saml
from tests.tenancy.simplesamlphp import SimpleSamlPhp, available

pytestmark = [
    pytest.mark.skipif(bool(available()), reason=available() or "available"),
    pytest.mark.skipif(shutil.which("xmlsec1") is None, reason="xmlsec1 is missing (make xmlsec1)"),
]

SP_ENTITY = "http://testserver/sso/acme/acme-saml/saml/metadata/"
SP_ACS = "http://testserver/sso/acme/acme-saml/saml/acs/"
SP_SLO = "http://testserver/sso/acme/acme-saml/saml/slo/"
REDIRECT = "urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect"
USERS = {
    "bob": {
        "password": "bob-password",
        "attributes": {
            "uid": "bob-persistent-1",
            "email": "bob@acme.test",
            "name": "Bob",
            "groups": ["cadre-admins", "staff"],
        },
    },
    "dave": {
        "password": "dave-password",
        "attributes": {"uid": "dave-1", "email": "dave@acme.test", "name": "Dave"},
    },
}


def _start(encrypt: bool = True) -> SimpleSamlPhp:
    return SimpleSamlPhp(
        {login: dict(user) for login, user in USERS.items()}, encrypt_assertions=encrypt
    )


@pytest.fixture
def idp():
    with _start() as server:
        yield server


@pytest.fixture
def provider(org_a, idp):
    provider = IdentityProvider.objects.create(
        organization=org_a,
        name="Acme SAML",
        slug="acme-saml",
        kind="saml",
        saml_metadata_xml=idp.metadata(),
        saml_entity_id=idp.entity_id,
        group_roles=[{"value": "cadre-admins", "roles": ["it_admin"]}],
    )
    publish_sp_metadata(idp, provider)
    return provider


def sp_metadata_xml(provider) -> str:
    response = Client().get(reverse("console:saml_metadata", args=["acme", provider.slug]))
    assert response.status_code == 200
    return response.content.decode()


def publish_sp_metadata(idp: SimpleSamlPhp, provider, *, only_post_logout: bool = False) -> str:
    """What the IdP's administrator does: load Cadre's SP metadata into SimpleSAMLphp."""
    xml = sp_metadata_xml(provider)
    if only_post_logout:
        xml, removed = re.subn(r"<(\w+:)?SingleLogoutService [^>]*HTTP-Redirect[^>]*/>", "", xml)
        assert removed == 1
    idp.sp_metadata(xml)
    return xml


def sign_in(client: Client, idp: SimpleSamlPhp, login: str, browser: httpx.Client | None = None):
    """Click "Sign in with Acme SAML", sign in at SimpleSAMLphp, let its form post the
    response to the ACS and follow to the callback. Returns (callback response, posted form,
    the browser's cookies at the IdP)."""
    start = client.get(reverse("console:sso_start", args=["acme", "acme-saml"]))
    assert start.status_code == 302, start.content[:500]
    assert start["Location"].startswith(f"{idp.sso_url}?SAMLRequest=")
    browser = browser or httpx.Client(timeout=20)
    form = idp.sign_in(browser, start["Location"], login)
    assert form["action"] == SP_ACS
    acs = client.post(
        urlsplit(form["action"]).path,
        {"SAMLResponse": form["SAMLResponse"], "RelayState": form["RelayState"]},
    )
    assert acs.status_code == 302, acs.content[:500]
    return client.get(acs["Location"]), form, browser


def _decoded(form: dict) -> str:
    return base64.b64decode(form["SAMLResponse"]).decode()


def test_sign_in_with_a_signed_encrypted_assertion_maps_roles(client, provider, bob, idp):
    response, form, _ = sign_in(client, idp, "bob")
    assert response.status_code == 302 and response["Location"] == reverse("console:home")
    # What SimpleSAMLphp sent: the assertion only in encrypted form.
    xml = _decoded(form)
    assert "EncryptedAssertion" in xml and "<saml:Assertion" not in xml
    assert client.session["_auth_user_id"] == str(Member.objects.get(pk=bob.pk).user_id)
    bob.refresh_from_db()
    assert "it_admin" in bob.roles
    identity = SsoIdentity.objects.get(provider=provider)
    assert (identity.member_id, identity.subject) == (bob.pk, "bob-persistent-1")
    record = SsoSession.objects.get(provider=provider)
    assert record.subject == "bob-persistent-1"
    assert record.name_id_format == "urn:oasis:names:tc:SAML:2.0:nameid-format:persistent"
    assert record.provider_session_id.startswith("_")  # SimpleSAMLphp's SessionIndex
    assert AuditEvent.objects.get(action="sso.signin").changes["after"]["matched_by"] == "email"


def test_a_signed_assertion_in_the_clear_is_accepted(client, org_a, bob):
    with _start(encrypt=False) as idp:
        provider = IdentityProvider.objects.create(
            organization=org_a,
            name="Acme SAML",
            slug="acme-saml",
            kind="saml",
            saml_metadata_xml=idp.metadata(),
            saml_entity_id=idp.entity_id,
        )
        publish_sp_metadata(idp, provider)
        response, form, _ = sign_in(client, idp, "bob")
    xml = _decoded(form)
    assertion = xml[xml.index("<saml:Assertion") :]
    assert (
        "<ds:Signature" in assertion and "<ds:Signature" not in xml[: xml.index("<saml:Assertion")]
    )
    assert response.status_code == 302 and "_auth_user_id" in client.session


def test_jit_creates_the_member_from_simplesamlphp_attributes(client, provider, idp):
    IdentityProvider.objects.filter(pk=provider.pk).update(jit_enabled=True)
    response, _, _ = sign_in(client, idp, "dave")
    assert response.status_code == 302
    dave = Member.objects.get(email="dave@acme.test")
    assert dave.display_name == "Dave"
    assert AuditEvent.objects.filter(action="sso.jit_create").exists()


def test_simplesamlphp_refuses_an_authn_request_whose_signature_was_removed(client, provider, idp):
    start = client.get(reverse("console:sso_start", args=["acme", "acme-saml"]))
    url = start["Location"]
    query = parse_qs(urlsplit(url).query)
    assert query["SigAlg"] == ["http://www.w3.org/2001/04/xmldsig-more#rsa-sha256"]
    assert query["Signature"]
    unsigned = url.split("&SigAlg=")[0]
    page = httpx.get(unsigned, timeout=20, follow_redirects=True)
    assert 'name="AuthState"' not in page.text  # no login page: the request was refused
    assert "signature" in idp.log().lower()


def test_sp_metadata_publishes_the_key_pair_for_signing_and_encryption(client, provider):
    xml = sp_metadata_xml(provider)
    provider.refresh_from_db()
    body = "".join(provider.saml_sp_certificate.strip().splitlines()[1:-1])
    assert xml.count('use="signing"') == 1 and xml.count('use="encryption"') == 1
    assert xml.count(body) == 2
    assert 'AuthnRequestsSigned="true"' in xml
    assert xml.count("SingleLogoutService") == 2  # HTTP-Redirect and HTTP-POST
    assert provider.saml_sp_private_key.startswith("-----BEGIN PRIVATE KEY-----")
    # Stored encrypted, like the other secrets.
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT saml_sp_private_key FROM tenancy_identityprovider WHERE id = %s",
            [provider.pk],
        )
        stored = cursor.fetchone()[0]
    assert stored and "PRIVATE KEY" not in stored


def _certificate_body(pem: str) -> str:
    return "".join(pem.strip().splitlines()[1:-1])


def test_key_rotation_publishes_next_first_then_switches(client, provider, alice, bob, idp):
    from cadre.tenancy.actors import member_actor

    sign_in(client, idp, "bob")
    provider.refresh_from_db()
    old = _certificate_body(provider.saml_sp_certificate)
    provider = saml.sp_key_rotate_begin(actor=member_actor(alice), provider=provider)
    new = _certificate_body(provider.saml_sp_next_certificate)
    xml = publish_sp_metadata(idp, provider)
    assert xml.count(old) == 2 and xml.count(new) == 2  # signing and encryption, each
    # While both are published, SimpleSAMLphp still encrypts to the current key.
    client.logout()
    response, _, _ = sign_in(client, idp, "bob")
    assert response.status_code == 302 and "_auth_user_id" in client.session
    saml.sp_key_rotate_complete(actor=member_actor(alice), provider=provider)
    provider.refresh_from_db()
    assert _certificate_body(provider.saml_sp_certificate) == new
    assert not provider.saml_sp_next_certificate
    xml = publish_sp_metadata(idp, provider)
    assert old not in xml and xml.count(new) == 2
    # The new key signs the AuthnRequest SimpleSAMLphp checks, and decrypts its assertion.
    client.logout()
    response, _, _ = sign_in(client, idp, "bob")
    assert response.status_code == 302 and "_auth_user_id" in client.session
    actions = set(AuditEvent.objects.values_list("action", flat=True))
    assert {
        "identity_provider.saml_key_rotate_begin",
        "identity_provider.saml_key_rotate_complete",
    } <= actions


def test_completing_a_rotation_that_was_not_begun_is_refused(provider, alice):
    from cadre.errors import InvalidInput
    from cadre.tenancy.actors import member_actor

    saml.sp_keys_ensure(provider)
    before = provider.saml_sp_certificate
    with pytest.raises(InvalidInput):
        saml.sp_key_rotate_complete(actor=member_actor(alice), provider=provider)
    provider.refresh_from_db()
    assert provider.saml_sp_certificate == before
    assert not AuditEvent.objects.filter(action__startswith="identity_provider.saml_key").exists()


# --- single logout ---------------------------------------------------------------------------


def _django_path(url: str) -> str:
    assert url.startswith("http://testserver/"), url
    parts = urlsplit(url)
    return f"{parts.path}?{parts.query}" if parts.query else parts.path


def at_idp(idp: SimpleSamlPhp, browser: httpx.Client, response: httpx.Response) -> httpx.Response:
    """Follow SimpleSAMLphp's redirects to its own pages, and its "Redirect" pages (a meta
    refresh it uses for long URLs) as a 302; stop at a page or a redirect to Cadre."""
    while True:
        if response.status_code == 200 and 'id="redirlink"' in response.text:
            target = html.unescape(re.search(r'id="redirlink" href="([^"]+)"', response.text)[1])
            response = httpx.Response(302, headers={"location": target})
        if not (response.is_redirect and response.headers["location"].startswith(idp.url)):
            return response
        response = browser.get(response.headers["location"])


def _signed_in(client, idp) -> httpx.Client:
    response, _, browser = sign_in(client, idp, "bob")
    assert response.status_code == 302
    assert client.get(reverse("console:home")).status_code == 200
    return browser


def _assert_cadre_session_ended(client, bob, reason: str):
    record = SsoSession.objects.get()
    assert record.ended_at is not None and record.end_reason == reason
    home = client.get(reverse("console:home"))
    assert home.status_code == 302 and "/login/" in home["Location"]


def _idp_session_ended(idp, browser) -> bool:
    """Whether SimpleSAMLphp asks this browser to sign in again."""
    client = Client()
    start = client.get(reverse("console:sso_start", args=["acme", "acme-saml"]))
    page = browser.get(start["Location"], follow_redirects=True)
    return 'name="AuthState"' in page.text


def test_idp_initiated_logout_over_http_redirect(client, provider, bob, idp):
    browser = _signed_in(client, idp)
    done = "http://testserver/login/?signed_out=1"
    step = at_idp(idp, browser, browser.get(f"{idp.slo_url}?ReturnTo={done}"))
    assert step.status_code in (302, 303), (step.text[:1000], idp.errors())
    location = step.headers["location"]
    assert location.startswith(f"{SP_SLO}?SAMLRequest=") and "Signature=" in location
    answer = client.get(_django_path(location))
    assert answer.status_code == 302, answer.content[:500]
    assert answer["Location"].startswith(f"{idp.slo_url}?SAMLResponse=")
    assert "Signature=" in answer["Location"]
    _assert_cadre_session_ended(client, bob, "saml_logout")
    end = at_idp(idp, browser, browser.get(answer["Location"]))
    # SimpleSAMLphp checked Cadre's signed LogoutResponse and finished at ReturnTo.
    assert end.status_code in (302, 303) and end.headers["location"] == done, idp.errors()
    event = AuditEvent.objects.get(action="sso.session_end")
    assert event.reason == "saml_logout" and event.target_id == str(bob.pk)


def test_idp_initiated_logout_over_http_post(client, provider, bob, idp):
    publish_sp_metadata(idp, provider, only_post_logout=True)
    browser = _signed_in(client, idp)
    done = "http://testserver/login/?signed_out=1"
    page = at_idp(idp, browser, browser.get(f"{idp.slo_url}?ReturnTo={done}"))
    form = idp.form(page.text)
    assert form["action"] == SP_SLO and "SAMLRequest" in form
    answer = client.post(
        urlsplit(SP_SLO).path,
        {k: v for k, v in form.items() if k in ("SAMLRequest", "RelayState")},
    )
    assert answer.status_code == 200, answer.content[:500]
    _assert_cadre_session_ended(client, bob, "saml_logout")
    reply = idp.form(answer.content.decode())
    assert reply["action"] == idp.slo_url
    end = browser.post(
        reply["action"],
        data={k: v for k, v in reply.items() if k in ("SAMLResponse", "RelayState")},
    )
    end = at_idp(idp, browser, end)
    assert end.status_code in (302, 303) and end.headers["location"] == done, idp.errors()


def test_a_logout_request_with_its_signature_removed_ends_nothing(client, provider, bob, idp):
    browser = _signed_in(client, idp)
    step = at_idp(idp, browser, browser.get(f"{idp.slo_url}?ReturnTo={idp.url}/"))
    unsigned = step.headers["location"].split("&SigAlg=")[0]
    answer = Client().get(_django_path(unsigned))
    assert answer.status_code == 400
    assert SsoSession.objects.get().ended_at is None
    assert client.get(reverse("console:home")).status_code == 200
    assert AuditEvent.objects.get(action="sso.saml_logout_refused").reason == "bad_signature"


@pytest.mark.parametrize("only_post", [False, True], ids=["redirect", "post"])
def test_sp_initiated_logout_ends_the_idp_session_too(client, provider, bob, idp, only_post):
    publish_sp_metadata(idp, provider, only_post_logout=only_post)
    browser = _signed_in(client, idp)
    out = client.post(reverse("console:logout"))
    assert out.status_code == 302
    assert out["Location"].startswith(f"{idp.slo_url}?SAMLRequest=")
    assert "Signature=" in out["Location"]
    assert SsoSession.objects.get().end_reason == "signed_out"
    step = at_idp(idp, browser, browser.get(out["Location"]))
    if only_post:
        assert step.status_code == 200, (step.text[:1000], idp.errors())
        form = idp.form(step.text)
        assert form["action"] == SP_SLO
        back = client.post(
            urlsplit(SP_SLO).path,
            {k: v for k, v in form.items() if k in ("SAMLResponse", "RelayState")},
        )
    else:
        assert step.status_code in (302, 303), (step.text[:1000], idp.errors())
        assert step.headers["location"].startswith(f"{SP_SLO}?SAMLResponse=")
        back = client.get(_django_path(step.headers["location"]))
    assert back.status_code == 200, back.content[:500]
    assert not AuditEvent.objects.filter(action="sso.saml_logout_refused").exists()
    assert _idp_session_ended(idp, browser)


def test_a_logout_response_to_no_request_of_cadre_is_refused(client, provider, bob, idp):
    publish_sp_metadata(idp, provider)
    browser = _signed_in(client, idp)
    out = client.post(reverse("console:logout"))
    step = at_idp(idp, browser, browser.get(out["Location"]))
    path = _django_path(step.headers["location"])
    assert Client().get(path).status_code == 200
    # The same LogoutResponse again: its request was answered already.
    again = Client().get(path)
    assert again.status_code == 400
    assert AuditEvent.objects.get(action="sso.saml_logout_refused").reason == "state_unknown"


# --- the IdP's metadata, refreshed -----------------------------------------------------------


def test_metadata_refresh_takes_the_idps_new_certificate(provider, idp, settings):
    settings.CADRE_SAML_METADATA_ALLOWED_HOSTS = ["127.0.0.1"]
    current = provider.saml_metadata_xml
    # What was stored names a certificate the IdP no longer uses.
    stale = re.sub(
        r"<ds:X509Certificate>[^<]+</ds:X509Certificate>",
        "<ds:X509Certificate>"
        + _certificate_body(saml.sp_key_pair_new("old")[1])
        + "</ds:X509Certificate>",
        current,
    )
    provider.saml_metadata_xml = stale
    provider.saml_metadata_url = idp.entity_id
    provider.save()
    assert saml.metadata_refresh_all() == 1
    provider.refresh_from_db()
    assert provider.saml_metadata_xml.strip() == current.strip()
    assert provider.saml_metadata_read_at is not None
    assert AuditEvent.objects.filter(action="identity_provider.saml_metadata_refresh").exists()
    assert saml.metadata_refresh_all() == 0  # unchanged: nothing written but the read time


@pytest.mark.parametrize("case", ["not_allowed", "not_metadata", "another_entity"])
def test_a_refused_metadata_refresh_stores_nothing(provider, idp, settings, case):
    settings.CADRE_SAML_METADATA_ALLOWED_HOSTS = [] if case == "not_allowed" else ["127.0.0.1"]
    url = {
        "not_allowed": idp.entity_id,
        "not_metadata": f"{idp.url}/index.php",
        "another_entity": idp.entity_id,
    }[case]
    if case == "another_entity":
        provider.saml_entity_id = "https://another-idp.test/metadata"
    provider.saml_metadata_url = url
    provider.save()
    before = provider.saml_metadata_xml
    assert saml.metadata_refresh_all() == 0
    provider.refresh_from_db()
    assert provider.saml_metadata_xml == before
    assert provider.last_error.startswith("metadata_refresh:")
    event = AuditEvent.objects.get(action="identity_provider.saml_metadata_refresh_failed")
    assert event.reason == "metadata_refused"
    assert not AuditEvent.objects.filter(action="identity_provider.saml_metadata_refresh").exists()


def test_metadata_refresh_is_on_the_beat_schedule():
    entry = django_settings.CELERY_BEAT_SCHEDULE["tenancy-saml-metadata-refresh"]
    assert entry["task"] == "cadre.tenancy.tasks.saml_metadata_refresh"


def test_the_saml_sp_key_command_rotates_in_two_steps(provider):
    from io import StringIO

    from django.core.management import call_command

    def run(**step) -> str:
        out = StringIO()
        call_command("saml_sp_key", org="acme", provider="acme-saml", stdout=out, **step)
        return out.getvalue()

    shown = run(show=True)
    provider.refresh_from_db()
    current = saml.certificate_fingerprint(provider.saml_sp_certificate)
    assert shown == f"current  {current}\n"
    begun = run(begin=True)
    provider.refresh_from_db()
    following = saml.certificate_fingerprint(provider.saml_sp_next_certificate)
    assert begun == f"current  {current}\nnext     {following}\n"
    assert run(complete=True) == f"current  {following}\n"
    with pytest.raises(Exception, match="No SP key rotation"):
        run(complete=True)
