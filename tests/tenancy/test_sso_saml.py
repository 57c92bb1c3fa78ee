"""SAML 2.0 sign-in against the pysaml2 IdP on loopback (tests/tenancy/saml_idp.py): kept for
the refusals SimpleSAMLphp (test_sso_simplesamlphp.py) cannot be made to produce — a foreign
key, no signature, another audience, a shifted clock, a response for another attempt — each
signing no one in and creating nothing; and the flow's edges (RelayState, next, replay)."""

from __future__ import annotations

import shutil
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from django.test import Client
from django.urls import reverse

from cadre.governance.audit_models import AuditEvent
from cadre.tenancy.models import IdentityProvider, Member, SsoIdentity, SsoSession
from tests.tenancy.saml_idp import SamlIdp

pytestmark = pytest.mark.skipif(
    shutil.which("xmlsec1") is None, reason="xmlsec1 is missing (make xmlsec1)"
)


@pytest.fixture
def idp():
    with SamlIdp() as server:
        server.users["bob"] = {
            "name_id": "bob-persistent-1",
            "attributes": {"email": ["bob@acme.test"], "name": ["Bob"], "groups": ["cadre-admins"]},
        }
        yield server


@pytest.fixture
def provider(org_a, idp):
    return IdentityProvider.objects.create(
        organization=org_a,
        name="Acme SAML",
        slug="acme-saml",
        kind="saml",
        saml_metadata_xml=idp.metadata(),
        saml_entity_id=idp.entity_id,
        group_roles=[{"value": "cadre-admins", "roles": ["it_admin"]}],
    )


def _args(provider):
    return [provider.organization.slug, provider.slug]


def idp_sign_in(
    client: Client, provider: IdentityProvider, idp: SamlIdp, login: str, query: str = ""
) -> dict:
    """Click "Sign in with …" and sign in at the IdP; returns the form the IdP hands the
    browser (SAMLResponse, RelayState, acs)."""
    start = client.get(reverse("console:sso_start", args=_args(provider)) + query)
    assert start.status_code == 302, start.content
    authorize = start["Location"]
    assert authorize.startswith(f"{idp.url}/sso?SAMLRequest=")
    page = httpx.get(authorize)
    assert page.status_code == 200 and "Test SAML IdP" in page.text
    params = {k: v[0] for k, v in parse_qs(urlsplit(authorize).query).items()}
    signed_in = httpx.post(f"{idp.url}/login", data={**params, "login": login})
    assert signed_in.status_code == 200
    return idp.responses[-1]


def post_to_acs(client: Client, posted: dict, **overrides):
    """What the browser does with the IdP's form: POST to the ACS, then follow to the callback."""
    data = {"SAMLResponse": posted["SAMLResponse"], "RelayState": posted["RelayState"]}
    data.update(overrides)
    acs = client.post(urlsplit(posted["acs"]).path, data)
    if acs.status_code != 302:
        return acs
    return client.get(acs["Location"])


def refused_reason(response) -> str:
    assert response.status_code == 403, response.content[:500]
    return response.content.decode().split('data-reason="')[1].split('"')[0]


def test_sign_in_matches_the_member_and_maps_roles(client, provider, bob, idp):
    posted = idp_sign_in(client, provider, idp, "bob")
    assert idp.requests[-1]["acs"] == "http://testserver/sso/acme/acme-saml/saml/acs/"
    assert idp.requests[-1]["issuer"] == "http://testserver/sso/acme/acme-saml/saml/metadata/"
    response = post_to_acs(client, posted)
    assert response.status_code == 302 and response["Location"] == reverse("console:home")
    assert client.session["_auth_user_id"] == str(Member.objects.get(pk=bob.pk).user_id)
    bob.refresh_from_db()
    assert "it_admin" in bob.roles
    identity = SsoIdentity.objects.get(provider=provider)
    assert (identity.member_id, identity.subject) == (bob.pk, "bob-persistent-1")
    record = SsoSession.objects.get(provider=provider)
    assert record.session_key == client.session.session_key
    assert (record.subject, record.provider_session_id) == ("bob-persistent-1", "session-bob")
    event = AuditEvent.objects.get(action="sso.signin")
    assert event.changes["after"]["matched_by"] == "email"


def test_next_is_kept_on_this_site_only(client, provider, bob, idp):
    posted = idp_sign_in(client, provider, idp, "bob", "?next=https://evil.test/")
    assert post_to_acs(client, posted)["Location"] == reverse("console:home")
    client.logout()
    posted = idp_sign_in(client, provider, idp, "bob", "?next=/members/")
    assert post_to_acs(client, posted)["Location"] == "/members/"


def _assert_refused(client, provider, response, reason: str, *, members_before: int):
    assert refused_reason(response) == reason
    assert "_auth_user_id" not in client.session
    assert Member.objects.count() == members_before
    assert not SsoIdentity.objects.exists() and not SsoSession.objects.exists()
    event = AuditEvent.objects.filter(action="sso.signin_failed").latest("id")
    assert event.reason == reason
    assert not AuditEvent.objects.filter(action="sso.signin").exists()
    provider.refresh_from_db()
    assert provider.last_error.startswith(reason)


@pytest.mark.parametrize(
    ("knobs", "reason"),
    [
        ({"sign_with_foreign_key": True}, "bad_signature"),
        ({"sign_assertion": False}, "signature_missing"),
        ({"audience": "https://another-sp.test/metadata"}, "wrong_audience"),
        ({"shift_seconds": -1200}, "expired"),
        ({"shift_seconds": 1200}, "not_yet_valid"),
    ],
)
def test_a_response_that_fails_a_check_is_refused(client, provider, bob, idp, knobs, reason):
    members = Member.objects.count()
    for name, value in knobs.items():
        setattr(idp, name, value)
    response = post_to_acs(client, idp_sign_in(client, provider, idp, "bob"))
    _assert_refused(client, provider, response, reason, members_before=members)
    bob.refresh_from_db()
    assert bob.roles == ["employee"]


def test_a_signed_response_with_an_unsigned_assertion_is_accepted(client, provider, bob, idp):
    idp.sign_assertion, idp.sign_response = False, True
    response = post_to_acs(client, idp_sign_in(client, provider, idp, "bob"))
    assert response.status_code == 302 and "_auth_user_id" in client.session


def test_within_the_clock_skew_is_accepted(client, provider, bob, idp, settings):
    settings.CADRE_SAML_CLOCK_SKEW_SECONDS = 120
    idp.shift_seconds = 100  # NotBefore is now+70 s: inside the skew
    response = post_to_acs(client, idp_sign_in(client, provider, idp, "bob"))
    assert response.status_code == 302 and "_auth_user_id" in client.session


def test_a_replayed_assertion_is_refused(client, provider, bob, idp):
    first = idp_sign_in(client, provider, idp, "bob")
    assert post_to_acs(client, first).status_code == 302
    SsoSession.objects.all().delete()
    # Another browser starts its own sign-in and is handed the captured response.
    other = Client()
    own = idp_sign_in(other, provider, idp, "bob")
    response = post_to_acs(other, first, RelayState=own["RelayState"])
    assert refused_reason(response) == "assertion_replayed"
    assert "_auth_user_id" not in other.session
    assert not SsoSession.objects.exists()
    event = AuditEvent.objects.get(action="sso.signin_failed")
    assert event.reason == "assertion_replayed"


def test_the_same_response_posted_twice_signs_in_once(client, provider, bob, idp):
    posted = idp_sign_in(client, provider, idp, "bob")
    assert post_to_acs(client, posted).status_code == 302
    again = post_to_acs(client, posted)
    assert refused_reason(again) in {"state_unknown", "assertion_replayed"}
    assert SsoSession.objects.count() == 1


def test_a_response_for_another_sign_in_is_refused(client, provider, bob, idp):
    """A response the IdP made for one AuthnRequest, delivered with another one's RelayState."""
    first = idp_sign_in(client, provider, idp, "bob")
    second = idp_sign_in(client, provider, idp, "bob")
    response = post_to_acs(client, first, RelayState=second["RelayState"])
    assert refused_reason(response) == "state_unknown"
    assert "_auth_user_id" not in client.session


def test_unknown_user_with_jit_off_is_refused_and_nothing_created(client, provider, idp):
    idp.users["dave"] = {"name_id": "dave-1", "attributes": {"email": ["dave@acme.test"]}}
    members = Member.objects.count()
    response = post_to_acs(client, idp_sign_in(client, provider, idp, "dave"))
    _assert_refused(client, provider, response, "unknown_user", members_before=members)
    assert not Member.objects.filter(email="dave@acme.test").exists()


def test_unknown_user_with_jit_on_is_created(client, provider, idp):
    provider.jit_enabled = True
    provider.save()
    idp.users["dave"] = {
        "name_id": "dave-1",
        "attributes": {"email": ["dave@acme.test"], "name": ["Dave"], "groups": ["cadre-admins"]},
    }
    response = post_to_acs(client, idp_sign_in(client, provider, idp, "dave"))
    assert response.status_code == 302
    dave = Member.objects.get(email="dave@acme.test")
    assert dave.display_name == "Dave" and "it_admin" in dave.roles
    assert AuditEvent.objects.filter(action="sso.jit_create").exists()


@pytest.mark.parametrize("relay_state", ["https://evil.test/", "", "x" * 43])
def test_a_bad_relay_state_is_refused_and_never_followed(client, provider, bob, idp, relay_state):
    members = Member.objects.count()
    posted = idp_sign_in(client, provider, idp, "bob")
    response = post_to_acs(client, posted, RelayState=relay_state)
    reason = "state_unknown" if relay_state == "x" * 43 else "relay_state_invalid"
    _assert_refused(client, provider, response, reason, members_before=members)
    assert "evil.test" not in response.get("Location", "")


def test_an_idp_that_is_not_saml_has_no_acs(client, org_a):
    IdentityProvider.objects.create(
        organization=org_a, name="OIDC", slug="oidc", issuer="https://x.test", client_id="c"
    )
    assert client.post(reverse("console:saml_acs", args=["acme", "oidc"])).status_code == 404


def test_sp_metadata_names_the_entity_id_and_acs(client, provider):
    response = client.get(reverse("console:saml_metadata", args=_args(provider)))
    assert response.status_code == 200
    xml = response.content.decode()
    assert 'entityID="http://testserver/sso/acme/acme-saml/saml/metadata/"' in xml
    assert 'Location="http://testserver/sso/acme/acme-saml/saml/acs/"' in xml
    assert "urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST" in xml


# --- single logout ---------------------------------------------------------------------------


def _signed_in(client, provider, idp):
    assert post_to_acs(client, idp_sign_in(client, provider, idp, "bob")).status_code == 302
    assert client.get(reverse("console:home")).status_code == 200


def test_idp_logout_request_ends_the_session_and_answers(client, provider, bob, idp):
    _signed_in(client, provider, idp)
    other_browser = Client()  # the IdP's logout reaches Cadre through the browser at the IdP
    url = idp.logout_request_url(
        slo_url="http://testserver/sso/acme/acme-saml/saml/slo/",
        name_id="bob-persistent-1",
        session_index="session-bob",
    )
    parts = urlsplit(url)
    response = other_browser.get(f"{parts.path}?{parts.query}")
    assert response.status_code == 302
    assert response["Location"].startswith(f"{idp.url}/slo?SAMLResponse=")
    record = SsoSession.objects.get()
    assert record.ended_at is not None and record.end_reason == "saml_logout"
    home = client.get(reverse("console:home"))
    assert home.status_code == 302 and "/login/" in home["Location"]
    event = AuditEvent.objects.get(action="sso.session_end")
    assert event.reason == "saml_logout" and event.target_id == str(bob.pk)


@pytest.mark.parametrize("knob", ["unsigned", "foreign_key"])
def test_an_unsigned_or_forged_logout_request_is_refused(client, provider, bob, idp, knob):
    _signed_in(client, provider, idp)
    idp.sign_with_foreign_key = knob == "foreign_key"
    url = idp.logout_request_url(
        slo_url="http://testserver/sso/acme/acme-saml/saml/slo/",
        name_id="bob-persistent-1",
        sign=knob != "unsigned",
    )
    parts = urlsplit(url)
    response = Client().get(f"{parts.path}?{parts.query}")
    assert response.status_code == 400
    assert SsoSession.objects.get().ended_at is None
    assert client.get(reverse("console:home")).status_code == 200
    assert AuditEvent.objects.filter(action="sso.saml_logout_refused").exists()


def test_the_console_test_sign_in_shows_the_saml_claims_and_changes_nothing(
    client, provider, alice, bob, idp
):
    client.force_login(alice.user)
    start = client.get(reverse("console:identity_provider_test", args=[provider.pk]))
    assert start.status_code == 302 and start["Location"].startswith(f"{idp.url}/sso?")
    params = {k: v[0] for k, v in parse_qs(urlsplit(start["Location"]).query).items()}
    assert httpx.post(f"{idp.url}/login", data={**params, "login": "bob"}).status_code == 200
    page = post_to_acs(client, idp.responses[-1])
    assert page.status_code == 200
    text = page.content.decode()
    assert "bob-persistent-1" in text and "cadre-admins" in text and "it_admin" in text
    assert client.session["_auth_user_id"] == str(alice.user_id)  # still the admin
    bob.refresh_from_db()
    assert bob.roles == ["employee"]
    assert not SsoIdentity.objects.exists() and not SsoSession.objects.exists()
    assert AuditEvent.objects.get(action="sso.test_signin").reason == "would_sign_in"


def test_a_provider_created_through_the_service_has_its_key_pair_at_once(org_a, alice, idp):
    from cryptography import x509

    from cadre.tenancy.actors import member_actor
    from cadre.tenancy.services import oidc

    saved = oidc.identity_provider_save(
        actor=member_actor(alice),
        name="Acme SAML",
        slug="acme-new",
        kind="saml",
        saml_metadata_xml=idp.metadata(),
    )
    saved.refresh_from_db()
    # Made when the provider is created (not at its first sign-in): the SP metadata an
    # administrator copies into the IdP right away already names the certificate.
    certificate = x509.load_pem_x509_certificate(saved.saml_sp_certificate.encode())
    assert "acme-new" in certificate.subject.rfc4514_string()
    assert "PRIVATE KEY" in saved.saml_sp_private_key
