"""Groups → roles from the `groups` claim of django-oauth-toolkit's OpenID Connect provider (its
own process, tests/tenancy/dot_provider.py: the users' Django groups at the provider), applied on
each sign-in and audited; the last owner is never demoted; and the console's test sign-in, which
shows the claims and the mapping's result without signing in or changing anything."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from django.test import Client
from django.urls import reverse

from cadre.errors import InvalidInput, NotPermitted
from cadre.governance.audit_models import AuditEvent
from cadre.tenancy.actors import member_actor
from cadre.tenancy.models import IdentityProvider, Member, SsoIdentity, User
from cadre.tenancy.services import oidc
from tests.refusals import nothing_changes
from tests.tenancy.conftest import DOT_SLUG
from tests.tenancy.oidc_provider import OidcProvider
from tests.tenancy.test_sso_oidc import dot_login, fake_approve, forget_provider_keys


@pytest.fixture
def idp(dot):
    """The DOT provider, where Bob is in staff and cadre-admins and Alice in staff."""
    dot.user("bob", email="bob@acme.test", email_verified=True, groups=["staff", "cadre-admins"])
    dot.user("alice", email="alice@acme.test", email_verified=True, groups=["staff"])
    return dot


MAPPING = [
    {"value": "cadre-admins", "roles": ["it_admin"]},
    {"value": "auditors", "roles": ["auditor"]},
    {"value": "owners", "roles": ["owner"]},
]


@pytest.fixture
def provider(org_a, idp):
    return IdentityProvider.objects.create(
        organization=org_a,
        name="DOT IdP",
        slug=DOT_SLUG,
        issuer=idp.issuer,
        client_id=idp.client_id,
        client_secret=idp.client_secret,
        scopes="openid email profile groups",
        group_roles=MAPPING,
    )


def sign_in(client, provider, idp, login):
    response, _ = dot_login(client, provider, idp.browser(), login)
    return response


def test_groups_grant_roles_on_sign_in_and_the_change_is_audited(client, provider, bob, idp):
    response = sign_in(client, provider, idp, "bob")
    assert response.status_code == 302
    bob.refresh_from_db()
    assert bob.roles == ["employee", "it_admin"]
    event = AuditEvent.objects.get(action="sso.role_change")
    assert event.reason == "role changed from claims"
    assert event.changes["before"]["roles"] == ["employee"]
    assert event.changes["after"]["roles"] == ["employee", "it_admin"]
    assert sorted(event.changes["after"]["groups"]) == ["cadre-admins", "staff"]


def test_leaving_the_group_removes_the_mapped_role_but_keeps_others(client, provider, bob, idp):
    bob.roles = ["employee", "it_admin", "skill_reviewer"]  # skill_reviewer: not in the mapping
    bob.save()
    idp.user("bob", email="bob@acme.test", email_verified=True, groups=["staff", "auditors"])
    response = sign_in(client, provider, idp, "bob")
    assert response.status_code == 302
    bob.refresh_from_db()
    assert bob.roles == ["employee", "skill_reviewer", "auditor"]
    assert AuditEvent.objects.filter(action="sso.role_change").count() == 1


def test_unchanged_roles_are_not_audited_as_a_change(client, provider, bob, idp):
    bob.roles = ["employee", "it_admin"]
    bob.save()
    assert sign_in(client, provider, idp, "bob").status_code == 302
    bob.refresh_from_db()
    assert bob.roles == ["employee", "it_admin"]
    assert not AuditEvent.objects.filter(action="sso.role_change").exists()


def test_the_last_owner_is_never_demoted(client, provider, alice, idp):
    response = sign_in(client, provider, idp, "alice")  # not in "owners"
    assert response.status_code == 302
    alice.refresh_from_db()
    assert "owner" in alice.roles
    assert AuditEvent.objects.get(action="sso.role_change_refused").reason == "last_owner"


def test_an_owner_is_demoted_when_another_owner_remains(client, provider, alice, make_member, idp):
    make_member(roles=["owner"], display_name="Other owner", email="o@acme.test")
    response = sign_in(client, provider, idp, "alice")
    assert response.status_code == 302
    alice.refresh_from_db()
    assert alice.roles == ["employee"]
    assert AuditEvent.objects.get(action="sso.role_change").changes["after"]["owner_kept"] is False


def test_mapping_to_owner_needs_an_owner(provider, alice, make_member):
    admin = make_member(roles=["it_admin"], display_name="Ida", email="ida@acme.test")
    with pytest.raises(NotPermitted):
        oidc.identity_provider_save(
            actor=member_actor(admin), provider=provider, group_roles=MAPPING
        )
    with pytest.raises(InvalidInput):
        oidc.identity_provider_save(
            actor=member_actor(alice),
            provider=provider,
            group_roles=[{"value": "x", "roles": ["pope"]}],
        )
    saved = oidc.identity_provider_save(
        actor=member_actor(alice), provider=provider, group_roles=MAPPING[:1]
    )
    assert saved.group_roles == MAPPING[:1]


def test_console_form_parses_the_mapping_lines(provider, alice):
    client = Client()
    client.force_login(alice.user)
    url = reverse("console:identity_provider_edit", args=[provider.pk])
    page = client.get(url)
    assert "cadre-admins = it_admin" in page.content.decode()
    data = {
        "name": provider.name,
        "slug": provider.slug,
        "kind": "oidc",
        "issuer": provider.issuer,
        "client_id": provider.client_id,
        "scopes": "openid email profile",
        "claim_email": "email",
        "claim_name": "name",
        "claim_groups": "groups",
        "group_roles": "Engineering = skill_reviewer, auditor\nbad line",
        "is_enabled": "on",
    }
    response = client.post(url, data)
    assert response.status_code == 200 and "Line 2" in response.content.decode()
    data["group_roles"] = "Engineering = skill_reviewer, auditor"
    response = client.post(url, data)
    assert response.status_code == 302
    provider.refresh_from_db()
    assert provider.group_roles == [
        {"value": "Engineering", "roles": ["skill_reviewer", "auditor"]}
    ]


# --- test sign-in ------------------------------------------------------------------------


def _test_signin(client, provider, idp, login):
    """Press "Test sign-in", sign in at the provider as `login`, and follow it back."""
    start = client.get(reverse("console:identity_provider_test", args=[provider.pk]))
    assert start.status_code == 302, start.content
    back = urlsplit(idp.browser().sign_in(start["Location"], login))
    return client.get(f"{back.path}?{back.query}")


def test_test_sign_in_shows_claims_and_mapping_without_changing_anything(provider, alice, bob, idp):
    client = Client()
    client.force_login(alice.user)
    with nothing_changes(
        Member,
        User,
        SsoIdentity,
        bob,
        IdentityProvider.objects.filter(last_error=""),
        audit=False,
        enqueued=False,
    ):
        response = _test_signin(client, provider, idp, "bob")
    text = response.content.decode()
    assert response.status_code == 200
    assert 'data-test-outcome="would_sign_in"' in text
    assert "cadre-admins" in text and "bob@acme.test" in text
    assert 'class="test-roles-after">employee, it_admin' in text
    assert client.session["_auth_user_id"] == str(alice.user_id)  # still the admin
    assert not AuditEvent.objects.filter(action__in=["sso.signin", "sso.role_change"]).exists()
    assert AuditEvent.objects.get(action="sso.test_signin").reason == "would_sign_in"


def test_test_sign_in_of_an_unknown_user_shows_the_refusal(provider, alice, idp):
    idp.user("zed", email="zed@acme.test", email_verified=True, groups=[])
    client = Client()
    client.force_login(alice.user)
    with nothing_changes(Member, User, SsoIdentity, audit=False, enqueued=False):
        response = _test_signin(client, provider, idp, "zed")
    assert 'data-test-outcome="unknown_user"' in response.content.decode()


def test_test_sign_in_refusal_is_kept_as_the_last_error(org_a, alice):
    """A token for another audience: something only Cadre's fake provider can be made to send."""
    with OidcProvider() as fake:
        forget_provider_keys(fake.issuer)
        fake.users["bob"] = {"email": "bob@acme.test", "email_verified": True}
        fake.token_overrides = {"aud": "another-app"}
        provider = IdentityProvider.objects.create(
            organization=org_a,
            name="Test IdP",
            slug="test-idp",
            issuer=fake.issuer,
            client_id=fake.client_id,
            client_secret=fake.client_secret,
        )
        client = Client()
        client.force_login(alice.user)
        start = client.get(reverse("console:identity_provider_test", args=[provider.pk]))
        back = urlsplit(fake_approve(start["Location"], "bob"))
        response = client.get(f"{back.path}?{back.query}")
    assert 'data-test-outcome="wrong_audience"' in response.content.decode()
    provider.refresh_from_db()
    assert provider.last_error.startswith("wrong_audience")
    page = client.get(reverse("console:identity_providers")).content.decode()
    assert "wrong_audience" in page


def test_test_sign_in_needs_organization_manage(provider, bob):
    client = Client()
    client.force_login(bob.user)
    response = client.get(reverse("console:identity_provider_test", args=[provider.pk]))
    assert response.status_code in (302, 403)
    assert "cadre_oidc_pending" not in client.session


def test_test_sign_in_callback_in_another_session_signs_no_one_in(provider, alice, bob, idp):
    admin = Client()
    admin.force_login(alice.user)
    start = admin.get(reverse("console:identity_provider_test", args=[provider.pk]))
    back = urlsplit(idp.browser().sign_in(start["Location"], "bob"))
    stranger = Client()
    response = stranger.get(f"{back.path}?{back.query}")
    assert response.status_code == 403
    assert "_auth_user_id" not in stranger.session
