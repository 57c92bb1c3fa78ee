"""Session end driven by the OpenID Connect provider (back-channel logout, against Cadre's
loopback fake: django-oauth-toolkit sends no logout tokens) and the provider told when a member
signs out of Cadre (RP-initiated logout, against django-oauth-toolkit's provider in its own
process, whose end_session_endpoint ends its own session and sends the browser back)."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse
from joserfc.jwk import RSAKey

from cadre.governance.audit_models import AuditEvent
from cadre.tenancy.models import IdentityProvider, SsoSession
from tests.tenancy.oidc_provider import OidcProvider
from tests.tenancy.test_sso_oidc import dot_login, forget_provider_keys, provider_login


@pytest.fixture
def idp():
    with OidcProvider() as provider:
        forget_provider_keys(provider.issuer)
        provider.users["bob"] = {"email": "bob@acme.test", "email_verified": True, "name": "Bob"}
        yield provider


@pytest.fixture
def provider(org_a, idp):
    return IdentityProvider.objects.create(
        organization=org_a,
        name="Test IdP",
        slug="test-idp",
        issuer=idp.issuer,
        client_id=idp.client_id,
        client_secret=idp.client_secret,
    )


@pytest.fixture
def signed_in(client, provider, bob, idp):
    response, _ = provider_login(client, provider, "bob")
    assert response.status_code == 302
    assert client.get(reverse("console:home")).status_code == 200
    return client


def backchannel(provider, token: str):
    url = reverse("console:oidc_backchannel_logout", args=["acme", provider.slug])
    return Client().post(url, {"logout_token": token})


def test_sign_in_records_the_provider_session(signed_in, provider):
    record = SsoSession.objects.get(provider=provider)
    assert (record.subject, record.provider_session_id) == ("sub-bob", "sid-bob")
    assert record.session_key == signed_in.session.session_key


def test_a_valid_logout_token_ends_the_session(signed_in, provider, idp, bob):
    response = backchannel(provider, idp.logout_token("bob"))
    assert response.status_code == 200 and "no-store" in response["Cache-Control"]
    home = signed_in.get(reverse("console:home"))
    assert home.status_code == 302 and "/login/" in home["Location"]
    record = SsoSession.objects.get()
    assert record.end_reason == "backchannel_logout" and record.ended_at is not None
    event = AuditEvent.objects.get(action="sso.session_end")
    assert event.target_id == str(bob.pk) and event.reason == "backchannel_logout"


def test_a_logout_token_naming_only_the_subject_ends_its_sessions(signed_in, provider, idp):
    assert backchannel(provider, idp.logout_token("bob", drop=("sid",))).status_code == 200
    assert signed_in.get(reverse("console:home")).status_code == 302


def test_a_logout_token_for_another_session_ends_nothing(signed_in, provider, idp):
    assert backchannel(provider, idp.logout_token("bob", sid="sid-elsewhere")).status_code == 200
    assert signed_in.get(reverse("console:home")).status_code == 200
    assert SsoSession.objects.get().ended_at is None


@pytest.mark.parametrize(
    ("changes", "detail"),
    [
        ({"foreign_key": True}, "bad signature"),
        ({"drop": ("events",)}, "no events claim"),
        ({"events": {"http://example.test/other": {}}}, "another event"),
        ({"nonce": "n-1"}, "nonce present"),
        ({"drop": ("sid", "sub")}, "neither sid nor sub"),
        ({"aud": "another-client"}, "wrong audience"),
        ({"iss": "https://other-issuer.test"}, "wrong issuer"),
        ({"drop": ("iat",)}, "no iat"),
        ({"iat": 1_000_000_000}, "iat long ago"),
        ({"drop": ("jti",)}, "no jti"),
        ({"not_a_jwt": True}, "not a JWT"),
    ],
)
def test_an_invalid_logout_token_is_refused_and_the_session_kept(
    signed_in, provider, idp, changes, detail
):
    changes = dict(changes)
    if changes.pop("foreign_key", False):
        # Signed with a key the provider does not publish, under the published key's kid.
        changes["key"] = RSAKey.generate_key(2048, parameters={"kid": idp.key.kid})
    token = "not-a-jwt" if changes.pop("not_a_jwt", False) else idp.logout_token("bob", **changes)
    response = backchannel(provider, token)
    assert response.status_code == 400, detail
    assert response.json()["error"] == "invalid_request"
    assert signed_in.get(reverse("console:home")).status_code == 200
    assert SsoSession.objects.get().ended_at is None
    assert AuditEvent.objects.filter(action="sso.backchannel_logout_refused").exists()


def test_a_replayed_logout_token_is_refused(signed_in, provider, idp):
    token = idp.logout_token("bob", sid="sid-elsewhere")
    assert backchannel(provider, token).status_code == 200
    assert backchannel(provider, token).status_code == 400


def test_signing_out_of_cadre_ends_the_providers_session_too(client, dot_provider, dot, bob):
    browser = dot.browser()
    response, _ = dot_login(client, dot_provider, browser, "bob")
    assert response.status_code == 302 and browser.signed_in()
    response = client.post(reverse("console:logout"))
    assert response.status_code == 302
    end_session = response["Location"]
    assert end_session.startswith(f"{dot.issuer}/logout/?")
    assert f"client_id={dot.client_id}" in end_session
    assert "post_logout_redirect_uri=http%3A%2F%2Ftestserver%2Flogin%2F" in end_session
    assert "_auth_user_id" not in client.session
    record = SsoSession.objects.get()
    assert record.end_reason == "signed_out"
    assert AuditEvent.objects.filter(action="sso.signout", target_id=str(bob.pk)).exists()
    # At the provider: it asks to confirm (no id_token_hint), ends its session, sends the
    # browser back to Cadre's sign-in page.
    assert browser.log_out(end_session) == "http://testserver/login/"
    assert not browser.signed_in()
    assert client.get(reverse("console:home")).status_code == 302


def test_after_signing_out_the_provider_asks_for_the_password_again(client, dot_provider, dot, bob):
    browser = dot.browser()
    dot_login(client, dot_provider, browser, "bob")
    again, _ = dot_login(Client(), dot_provider, browser, "bob")  # the provider's session
    assert again.status_code == 302 and browser.pages.count("/accounts/login/") == 1
    end_session = client.post(reverse("console:logout"))["Location"]
    browser.log_out(end_session)
    third, _ = dot_login(Client(), dot_provider, browser, "bob")
    assert third.status_code == 302 and browser.pages.count("/accounts/login/") == 2


def test_a_password_session_signs_out_as_before(client, alice):
    client.force_login(alice.user)
    response = client.post(reverse("console:logout"))
    assert response.status_code == 302 and "testserver" not in response["Location"]
    assert not AuditEvent.objects.filter(action="sso.signout").exists()
