"""OIDC sign-in against a real provider on loopback: matching, refusals, SSO-required."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from django.core.cache import cache
from django.test import Client
from django.urls import reverse

from cadre.governance.audit_models import AuditEvent
from cadre.tenancy.models import IdentityProvider, Member, User
from tests.conftest import PASSWORD
from tests.tenancy.oidc_provider import OidcProvider


def forget_provider_keys(issuer: str) -> None:
    """Drop the discovery document and key set Cadre cached for this issuer: the cache outlives
    a test, and a later provider on the same loopback port would meet the earlier one's keys
    (same kid, another key: a refused signature) or skip the fetches a test counts."""
    cache.delete_many([f"oidc:discovery:{issuer}", f"oidc:jwks:{issuer}"])


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


def provider_login(client: Client, provider: IdentityProvider, login: str):
    """Click "Sign in with …", sign in at the provider, and follow its redirect back to Cadre.

    Returns (the callback response, the callback URL, for replaying)."""
    start = client.get(
        reverse("console:sso_start", args=[provider.organization.slug, provider.slug])
    )
    assert start.status_code == 302, start.content
    authorize = start["Location"]
    page = httpx.get(authorize)
    assert page.status_code == 200 and "Test IdP" in page.text
    params = {k: v[0] for k, v in parse_qs(urlsplit(authorize).query).items()}
    approved = httpx.post(authorize.split("?")[0], data={**params, "login": login})
    assert approved.status_code == 302
    back = urlsplit(approved.headers["Location"])
    callback = f"{back.path}?{back.query}"
    return client.get(callback), callback


def jwt_claims(token: str) -> dict:
    import base64
    import json

    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


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


def test_sign_in_matches_existing_member_by_verified_email(client, provider, bob, idp):
    response, _ = provider_login(client, provider, "bob")
    assert response.status_code == 302 and response["Location"] == reverse("console:home")
    assert client.session["_auth_user_id"] == str(bob.user_id)
    assert client.get(reverse("console:home")).status_code == 200
    event = AuditEvent.objects.get(action="sso.signin")
    assert event.target_id == str(bob.pk) and event.changes["after"]["provider"] == "test-idp"


def test_client_secret_is_stored_encrypted(provider, idp):
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT client_secret FROM tenancy_identityprovider")
        (raw,) = cursor.fetchone()
    assert idp.client_secret not in raw
    assert IdentityProvider.objects.get().client_secret == idp.client_secret


def test_sign_in_matches_by_employee_id_claim(client, provider, make_member, idp):
    carol = make_member(display_name="Carol", email="carol@old.test", employee_no="E-77")
    provider.claim_employee_id = "employee_no"
    provider.save()
    idp.users["carol"] = {"email": "carol@new.test", "email_verified": False, "employee_no": "E-77"}
    response, _ = provider_login(client, provider, "carol")
    assert response.status_code == 302
    assert client.session["_auth_user_id"] == str(carol.user_id)


def _refusal(client, provider, login="bob"):
    response, _ = provider_login(client, provider, login)
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


def test_rotated_provider_key_is_picked_up(client, provider, bob, idp):
    first, _ = provider_login(client, provider, "bob")
    assert first.status_code == 302
    client.logout()
    idp.rotate_key()
    second, _ = provider_login(Client(), provider, "bob")
    assert second.status_code == 302
    assert idp.jwks_fetches == 2


def test_replayed_callback_is_refused(client, provider, bob, idp):
    first, callback = provider_login(client, provider, "bob")
    assert first.status_code == 302
    client.logout()
    replay = client.get(callback)
    assert refused_reason(replay) == "state_unknown"
    assert "_auth_user_id" not in client.session
    assert actions(provider.organization).count("sso.signin") == 1


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


def test_unknown_user_with_jit_off_is_refused_and_nothing_created(client, provider, idp):
    idp.users["dave"] = {"email": "dave@acme.test", "email_verified": True, "name": "Dave"}
    members, users = Member.objects.count(), User.objects.count()
    assert _refusal(client, provider, "dave") == "unknown_user"
    assert (Member.objects.count(), User.objects.count()) == (members, users)
    assert not Member.objects.filter(email="dave@acme.test").exists()


def test_unverified_email_does_not_match_a_member(client, provider, bob, idp):
    idp.users["bob"]["email_verified"] = False
    assert _refusal(client, provider) == "unknown_user"


def test_jit_on_creates_the_member_and_audits_it(client, provider, org_a, idp):
    provider.jit_enabled = True
    provider.save()
    idp.users["erin"] = {"email": "erin@acme.test", "email_verified": True, "name": "Erin"}
    response, _ = provider_login(client, provider, "erin")
    assert response.status_code == 302
    erin = Member.objects.get(organization=org_a, email="erin@acme.test")
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


def test_later_sign_ins_match_the_linked_provider_account(client, provider, bob, idp):
    first, _ = provider_login(client, provider, "bob")
    assert first.status_code == 302
    assert AuditEvent.objects.get(action="sso.signin").changes["after"]["newly_linked"] is True
    # The provider now reports another, unverified address: the link still names Bob.
    idp.users["bob"] = {"email": "robert@elsewhere.test", "email_verified": False}
    second, _ = provider_login(Client(), provider, "bob")
    assert second.status_code == 302
    events = AuditEvent.objects.filter(action="sso.signin").order_by("id")
    assert [e.target_id for e in events] == [str(bob.pk)] * 2
    assert events.last().changes["after"]["newly_linked"] is False
