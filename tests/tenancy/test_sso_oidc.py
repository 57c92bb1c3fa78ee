"""OIDC sign-in: matching, JIT creation, key rotation and replays against django-oauth-toolkit's
provider (its own process, tests/tenancy/dot_provider.py); the refusals a real provider cannot be
made to produce (another audience or issuer, an expired token, a forged signature, an unknown
key, a foreign nonce) against Cadre's loopback fake (tests/tenancy/oidc_provider.py); and
SSO-required password sign-in."""

from __future__ import annotations

import base64
import json
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from django.test import Client
from django.urls import reverse

from cadre.governance.audit_models import AuditEvent
from cadre.tenancy.models import IdentityProvider, Member, SsoIdentity, User
from tests.conftest import PASSWORD
from tests.tenancy.conftest import DOT_SLUG, forget_provider_keys
from tests.tenancy.oidc_provider import OidcProvider


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


def dot_login(client: Client, provider: IdentityProvider, browser, login: str):
    """Click "Sign in with …", sign in on the DOT provider's form in `browser` (an
    IdpBrowser, which keeps the provider's session), and follow its redirect back to Cadre.

    Returns (the callback response, the callback URL, for replaying)."""
    start = client.get(
        reverse("console:sso_start", args=[provider.organization.slug, provider.slug])
    )
    assert start.status_code == 302, start.content
    query = parse_qs(urlsplit(start["Location"]).query)
    assert query["code_challenge_method"] == ["S256"] and query["code_challenge"]
    back = urlsplit(browser.sign_in(start["Location"], login))
    assert back.netloc == "testserver" and "code=" in back.query, back
    callback = f"{back.path}?{back.query}"
    return client.get(callback), callback


def provider_login(client: Client, provider: IdentityProvider, login: str):
    """Click "Sign in with …", sign in at the fake provider, and follow its redirect back to Cadre.

    Returns (the callback response, the callback URL, for replaying)."""
    start = client.get(
        reverse("console:sso_start", args=[provider.organization.slug, provider.slug])
    )
    assert start.status_code == 302, start.content
    back = urlsplit(fake_approve(start["Location"], login))
    callback = f"{back.path}?{back.query}"
    return client.get(callback), callback


def fake_approve(authorize: str, login: str) -> str:
    """Sign in as `login` on the fake provider's page; the URL it sends the browser back to."""
    page = httpx.get(authorize)
    assert page.status_code == 200 and "Test IdP" in page.text
    params = {k: v[0] for k, v in parse_qs(urlsplit(authorize).query).items()}
    approved = httpx.post(authorize.split("?")[0], data={**params, "login": login})
    assert approved.status_code == 302
    return approved.headers["Location"]


def _jwt_part(token: str, index: int) -> dict:
    part = token.split(".")[index]
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))


def jwt_claims(token: str) -> dict:
    return _jwt_part(token, 1)


def jwt_header(token: str) -> dict:
    return _jwt_part(token, 0)


def actions(organization) -> list[str]:
    return list(
        AuditEvent.objects.filter(organization=organization)
        .order_by("id")
        .values_list("action", flat=True)
    )


def refused_reason(response) -> str:
    assert response.status_code == 403
    text = response.content.decode()
    return text.split('data-reason="')[1].split('"')[0]


def test_sign_in_matches_existing_member_by_verified_email(client, dot_provider, bob, dot):
    browser = dot.browser()
    response, _ = dot_login(client, dot_provider, browser, "bob")
    assert browser.pages[0] == "/accounts/login/"  # the provider's own sign-in form
    assert response.status_code == 302 and response["Location"] == reverse("console:home")
    assert client.session["_auth_user_id"] == str(bob.user_id)
    assert client.get(reverse("console:home")).status_code == 200
    event = AuditEvent.objects.get(action="sso.signin")
    assert event.target_id == str(bob.pk) and event.changes["after"]["provider"] == DOT_SLUG
    assert event.changes["after"]["matched_by"] == "email"


def test_client_secret_is_stored_encrypted(provider, idp):
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT client_secret FROM tenancy_identityprovider")
        (raw,) = cursor.fetchone()
    assert idp.client_secret not in raw
    assert IdentityProvider.objects.get().client_secret == idp.client_secret


def test_sign_in_matches_by_employee_id_claim(client, dot_provider, make_member, dot):
    carol = make_member(display_name="Carol", email="carol@old.test", employee_no="E-77")
    dot_provider.claim_employee_id = "employee_no"
    dot_provider.save()
    dot.user("carol", email="carol@new.test", email_verified=False, employee_no="E-77")
    response, _ = dot_login(client, dot_provider, dot.browser(), "carol")
    assert response.status_code == 302
    assert client.session["_auth_user_id"] == str(carol.user_id)


def _refusal(client, provider, login="bob", *, browser=None):
    if browser is None:
        response, _ = provider_login(client, provider, login)
    else:
        response, _ = dot_login(client, provider, browser, login)
    reason = refused_reason(response)
    assert "_auth_user_id" not in client.session
    provider.refresh_from_db()
    assert provider.last_error.startswith(reason)
    event = AuditEvent.objects.get(action="sso.signin_failed")
    assert event.reason == reason
    assert "sso.signin" not in actions(provider.organization)
    return reason


def test_wrong_audience_is_refused(client, provider, bob, idp):
    idp.token_overrides = {"aud": "another-app"}
    assert _refusal(client, provider) == "wrong_audience"


def test_wrong_issuer_is_refused(client, provider, bob, idp):
    idp.token_overrides = {"iss": "http://evil.test"}
    assert _refusal(client, provider) == "wrong_issuer"


def test_expired_token_is_refused(client, provider, bob, idp):
    idp.token_overrides = {"exp": 1_000_000, "iat": 999_000}
    assert _refusal(client, provider) == "expired"


def test_token_signed_by_unpublished_key_is_refused(client, provider, bob, idp):
    from tests.tenancy.oidc_provider import _new_key

    forged = _new_key(idp.key.kid)  # same kid, another key: the signature cannot verify
    idp.signing_key = forged
    assert _refusal(client, provider) == "bad_signature"


def test_unknown_kid_refetches_keys_once_then_refuses(client, provider, bob, idp):
    from tests.tenancy.oidc_provider import _new_key

    idp.signing_key = _new_key("never-published")
    assert _refusal(client, provider) == "unknown_key"
    assert idp.jwks_fetches == 2  # cached set, then one refetch for the unknown kid


def test_key_rotation_new_key_accepted_removed_key_refused(
    client, dot_provider, bob, dot, monkeypatch
):
    """The provider rotates: its new key appears in the JWKS beside the old one and signs from
    then on; later it stops publishing the old key, whose tokens are then refused."""
    from cadre.tenancy.services import oidc

    seen = []
    checked = oidc.id_token_claims

    def recording(**kwargs):
        seen.append(kwargs["id_token"])
        return checked(**kwargs)

    monkeypatch.setattr(oidc, "id_token_claims", recording)
    first, _ = dot_login(client, dot_provider, dot.browser(), "bob")
    assert first.status_code == 302
    old_token, old_kid = seen[-1], dot.jwks_kids()[0]
    dot.rotate_key()
    assert len(dot.jwks_kids()) == 2 and dot.jwks_kids()[1] == old_kid  # new first, old kept
    second, _ = dot_login(Client(), dot_provider, dot.browser(), "bob")
    assert second.status_code == 302  # the unknown kid made Cadre read the key set again
    assert jwt_header(seen[-1])["kid"] != old_kid
    assert oidc.signed_token(dot_provider, old_token).header["kid"] == old_kid  # still published
    dot.retire_inactive_keys()
    assert old_kid not in dot.jwks_kids()
    forget_provider_keys(dot.issuer)  # Cadre's cached key set expires (an hour)
    with pytest.raises(oidc.SsoRefused) as refused:
        oidc.signed_token(dot_provider, old_token)
    assert refused.value.reason == "unknown_key"
    third, _ = dot_login(Client(), dot_provider, dot.browser(), "bob")
    assert third.status_code == 302


def test_replayed_callback_is_refused(client, dot_provider, bob, dot):
    first, callback = dot_login(client, dot_provider, dot.browser(), "bob")
    assert first.status_code == 302
    client.logout()
    replay = client.get(callback)
    assert refused_reason(replay) == "state_unknown"
    assert "_auth_user_id" not in client.session
    assert actions(dot_provider.organization).count("sso.signin") == 1


def test_replayed_id_token_nonce_is_refused(client, provider, bob, idp):
    """An id_token already used for a sign-in is refused when shown again with its nonce."""
    from cadre.tenancy.services import oidc

    first, _ = provider_login(client, provider, "bob")
    assert first.status_code == 302
    used = idp.issued[-1]
    nonce = jwt_claims(used)["nonce"]
    with pytest.raises(oidc.SsoRefused) as refused:
        oidc.id_token_claims(provider=provider, id_token=used, nonce=nonce)
    assert refused.value.reason == "nonce_replayed"


def test_nonce_of_another_sign_in_is_refused(client, provider, bob, idp):
    idp.token_overrides = {"nonce": "someone-elses-nonce"}
    assert _refusal(client, provider) == "nonce_mismatch"


def test_unknown_user_with_jit_off_is_refused_and_nothing_created(client, dot_provider, dot):
    dot.user("dave", email="dave@acme.test", email_verified=True, name="Dave")
    members, users = Member.objects.count(), User.objects.count()
    assert _refusal(client, dot_provider, "dave", browser=dot.browser()) == "unknown_user"
    assert (Member.objects.count(), User.objects.count()) == (members, users)
    assert not Member.objects.filter(email="dave@acme.test").exists()


def test_unverified_email_does_not_match_a_member(client, dot_provider, bob, dot):
    dot.user("bob", email="bob@acme.test", email_verified=False, name="Bob")
    assert _refusal(client, dot_provider, browser=dot.browser()) == "unknown_user"
    assert not SsoIdentity.objects.exists()


def test_jit_on_creates_the_member_and_audits_it(client, dot_provider, org_a, dot):
    dot_provider.jit_enabled = True
    dot_provider.save()
    dot.user("erin", email="erin@acme.test", email_verified=True, name="Erin Example")
    response, _ = dot_login(client, dot_provider, dot.browser(), "erin")
    assert response.status_code == 302
    erin = Member.objects.get(organization=org_a, email="erin@acme.test")
    assert erin.display_name == "Erin Example"
    assert client.session["_auth_user_id"] == str(erin.user_id)
    assert erin.roles == ["employee"] and erin.user is not None
    assert not erin.user.has_usable_password()
    assert "sso.jit_create" in actions(org_a) and "sso.signin" in actions(org_a)


def test_outsider_org_slug_does_not_reach_the_provider(client, provider, org_b):
    url = reverse("console:sso_start", args=[org_b.slug, provider.slug])
    assert client.get(url).status_code == 404


def test_login_page_lists_the_org_providers(client, provider):
    page = client.get(reverse("console:login") + "?org=acme").content.decode()
    assert "Sign in with Test IdP" in page
    assert (
        "Sign in with" not in client.get(reverse("console:login") + "?org=globex").content.decode()
    )


def _password_login(client, email):
    return client.post(reverse("console:login"), {"username": email, "password": PASSWORD})


def test_sso_required_refuses_the_password_form_for_members(client, org_a, alice, bob):
    org_a.settings = {"sso_required": True}
    org_a.save()
    response = _password_login(client, bob.email)
    assert response.status_code == 403
    assert "requires single sign-on" in response.content.decode()
    assert "_auth_user_id" not in client.session
    assert "sso.password_refused" in actions(org_a)


def test_sso_required_lets_the_owner_break_glass_audited(client, org_a, alice):
    org_a.settings = {"sso_required": True}
    org_a.save()
    response = _password_login(client, alice.email)
    assert response.status_code == 302
    assert client.session["_auth_user_id"] == str(alice.user_id)
    assert AuditEvent.objects.get(action="sso.break_glass").target_id == str(alice.pk)


def test_password_sign_in_unchanged_without_sso_required(client, bob):
    assert _password_login(client, bob.email).status_code == 302
    assert not AuditEvent.objects.filter(action__startswith="sso.").exists()


def test_later_sign_ins_match_the_linked_provider_account(client, dot_provider, bob, dot):
    first, _ = dot_login(client, dot_provider, dot.browser(), "bob")
    assert first.status_code == 302
    assert AuditEvent.objects.get(action="sso.signin").changes["after"]["newly_linked"] is True
    # The provider now reports another, unverified address: the link still names Bob.
    dot.user("bob", email="robert@elsewhere.test", email_verified=False)
    second, _ = dot_login(Client(), dot_provider, dot.browser(), "bob")
    assert second.status_code == 302
    events = AuditEvent.objects.filter(action="sso.signin").order_by("id")
    assert [e.target_id for e in events] == [str(bob.pk)] * 2
    assert events.last().changes["after"]["newly_linked"] is False
