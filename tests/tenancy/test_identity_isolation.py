"""Identities never cross organizations by themselves: an account at organization B's identity
provider (OpenID Connect, SAML, Feishu/Lark, WeCom, DingTalk) that asserts the e-mail of an
owner of organization A signs in to B only, with a login of B's own, whether B creates the
member just in time or created it beforehand. A person joins a second organization with the
same login only by accepting an invitation while signed in."""

from __future__ import annotations

import shutil

import pytest
from django.test import Client
from django.urls import reverse

from cadre.errors import Conflict
from cadre.governance.audit_models import AuditEvent
from cadre.tenancy import services
from cadre.tenancy.actors import member_actor
from cadre.tenancy.models import IdentityProvider, Member, SsoIdentity, User
from cadre.tenancy.services import oidc
from tests.conftest import PASSWORD
from tests.factories import MemberFactory, OrganizationFactory
from tests.tenancy.im_oauth_fakes import DingTalkFake, FeishuFake, WeComFake
from tests.tenancy.oidc_provider import OidcProvider
from tests.tenancy.saml_idp import SamlIdp
from tests.tenancy.test_sso_im import im_login
from tests.tenancy.test_sso_oidc import forget_provider_keys, provider_login
from tests.tenancy.test_sso_saml import idp_sign_in, post_to_acs

VICTIM = "alice@acme.test"

needs_xmlsec = pytest.mark.skipif(
    shutil.which("xmlsec1") is None, reason="xmlsec1 is missing (make xmlsec1)"
)


@pytest.fixture
def acme_key(alice):
    key, _secret = services.api_key_create(
        actor=member_actor(alice), name="acme-ops", scopes=["org:read"]
    )
    return key


def _globex_member(charlie, email: str = VICTIM) -> Member:
    """What the owner of B can do before the sign-in: a member (an owner, even) with A's
    owner's e-mail and no login yet."""
    return services.member_create(
        actor=member_actor(charlie), display_name="Alice?", email=email, roles=["owner"]
    )


def _provider(org, kind: str, **fields) -> IdentityProvider:
    return IdentityProvider.objects.create(
        organization=org, name=f"Globex {kind}", slug=f"globex-{kind}", kind=kind, **fields
    )


# --- signing in at B's provider as A's owner -------------------------------------------------


def _oidc(client, org_b, jit):
    with OidcProvider() as idp:
        forget_provider_keys(idp.issuer)
        idp.users["mallory"] = {"email": VICTIM, "email_verified": True, "name": "Alice"}
        provider = _provider(
            org_b,
            "oidc",
            issuer=idp.issuer,
            client_id=idp.client_id,
            client_secret=idp.client_secret,
            jit_enabled=jit,
        )
        response, _ = provider_login(client, provider, "mallory")
    return response


def _saml(client, org_b, jit):
    with SamlIdp() as idp:
        idp.users["mallory"] = {
            "name_id": "mallory-1",
            "attributes": {"email": [VICTIM], "name": ["Alice"]},
        }
        provider = _provider(
            org_b,
            "saml",
            saml_metadata_xml=idp.metadata(),
            saml_entity_id=idp.entity_id,
            jit_enabled=jit,
        )
        response = post_to_acs(client, idp_sign_in(client, provider, idp, "mallory"))
    return response


def _im(fake_class, kind: str, user: dict, **fields):
    def sign_in(client, org_b, jit):
        with fake_class() as fake:
            fake.users["mallory"] = user
            provider = _provider(
                org_b,
                kind,
                client_id=fake.client_id,
                client_secret=fake.client_secret,
                authorize_base_url=fake.url,
                api_base_url=fake.url,
                jit_enabled=jit,
                **fields,
            )
            response, _ = im_login(client, provider, fake, "mallory")
        return response

    return sign_in


_feishu = _im(
    FeishuFake,
    "feishu",
    {
        "name": "Alice",
        "open_id": "ou_mallory",
        "union_id": "on_mallory",
        "user_id": "u_mallory",
        "tenant_key": "tk-globex",
        "email": VICTIM,
        "enterprise_email": VICTIM,
        "employee_no": "",
    },
)
_wecom = _im(
    WeComFake,
    "wecom",
    {
        "userid": "mallory",
        "name": "Alice",
        "department": [1],
        "position": "",
        "email": VICTIM,
        "biz_mail": VICTIM,
        "status": 1,
    },
    agent_id="1000002",
)
_dingtalk = _im(
    DingTalkFake,
    "dingtalk",
    {
        "userid": "mallory",
        "unionid": "union-mallory",
        "name": "Alice",
        "org_email": VICTIM,
        "job_number": "",
        "dept_id_list": [1],
    },
)

SIGN_INS = {
    "oidc": _oidc,
    "saml": pytest.param(_saml, marks=needs_xmlsec),
    "feishu": _feishu,
    "wecom": _wecom,
    "dingtalk": _dingtalk,
}


def _confined_to_globex(client: Client, *, org_a, org_b, alice, acme_key) -> User:
    """The browser is signed in to B with a login of B's own, and A is out of its reach."""
    user_id = client.session.get("_auth_user_id")
    assert user_id and user_id != str(alice.user_id)
    user = User.objects.get(pk=user_id)
    assert set(user.memberships.values_list("organization_id", flat=True)) == {org_b.pk}
    assert not user.has_usable_password()
    organization = client.get("/api/v1/organization/")
    assert organization.status_code == 200 and organization.json()["slug"] == org_b.slug
    assert acme_key.prefix not in client.get("/api/v1/api-keys/").content.decode()
    switch = client.post(reverse("console:switch_organization"), {"organization": org_a.pk})
    assert switch.status_code == 404
    assert client.get("/api/v1/organization/").json()["slug"] == org_b.slug
    # A's owner keeps her login, her password and her one membership.
    victim = User.objects.get(pk=alice.user_id)
    assert victim.email == VICTIM and victim.check_password(PASSWORD)
    assert list(victim.memberships.values_list("organization_id", flat=True)) == [org_a.pk]
    return user


@pytest.mark.parametrize("sign_in", SIGN_INS.values(), ids=SIGN_INS.keys())
def test_jit_sign_in_with_another_orgs_email_gets_a_login_of_its_own(
    client, org_a, org_b, alice, charlie, acme_key, sign_in
):
    response = sign_in(client, org_b, True)
    assert response.status_code == 302, response.content[:300]
    user = _confined_to_globex(client, org_a=org_a, org_b=org_b, alice=alice, acme_key=acme_key)
    member = Member.objects.get(organization=org_b, email=VICTIM)
    assert member.user_id == user.pk and member.roles == ["employee"]
    assert AuditEvent.objects.filter(organization=org_b, action="sso.jit_create").exists()
    assert not AuditEvent.objects.filter(organization=org_a, action__startswith="sso.").exists()


@pytest.mark.parametrize("sign_in", SIGN_INS.values(), ids=SIGN_INS.keys())
def test_member_created_with_another_orgs_email_gets_a_login_of_its_own(
    client, org_a, org_b, alice, charlie, acme_key, sign_in
):
    planted = _globex_member(charlie)
    response = sign_in(client, org_b, False)
    assert response.status_code == 302, response.content[:300]
    user = _confined_to_globex(client, org_a=org_a, org_b=org_b, alice=alice, acme_key=acme_key)
    planted.refresh_from_db()
    assert planted.user_id == user.pk
    assert SsoIdentity.objects.get(member=planted).organization_id == org_b.pk


# --- the login an SSO sign-in creates --------------------------------------------------------


def _login_for(member: Member) -> User:
    """The login a first SSO or IM sign-in gives the member."""
    return oidc._user_for(member)


def test_a_login_held_by_no_organization_is_never_adopted(org_b, charlie):
    """An operator's account (createsuperuser) belongs to no organization: an identity
    provider asserting its e-mail must not become it."""
    root = User.objects.create_superuser("root@acme.test", PASSWORD)
    member = _globex_member(charlie, email="root@acme.test")
    user = _login_for(member)
    assert user.pk != root.pk and not user.is_superuser and not user.is_staff
    assert user.email != "root@acme.test" and user.email.endswith(".invalid")
    assert not root.memberships.exists()


def test_a_free_email_becomes_the_new_logins_name(org_b, charlie):
    member = _globex_member(charlie, email="dana@globex.test")
    user = _login_for(member)
    assert user.email == "dana@globex.test" and not user.has_usable_password()
    member.refresh_from_db()
    assert member.user_id == user.pk and member.status == Member.Status.ACTIVE


def test_taken_emails_get_distinct_names_in_each_organization(org_a, org_b, alice, charlie):
    first = _login_for(_globex_member(charlie))
    owner = MemberFactory(organization=OrganizationFactory(slug="initech"), roles=["owner"])
    second_member = services.member_create(
        actor=member_actor(owner), display_name="A", email=VICTIM, roles=["employee"]
    )
    second = _login_for(second_member)
    names = {first.email, second.email, alice.user.email}
    assert len(names) == 3
    assert first.email.endswith(".invalid") and second.email.endswith(".invalid")


def test_member_without_email_gets_a_login(org_b, charlie):
    """An IM login matches members by their IM id or employee number, e-mail or not."""
    member = services.member_create(
        actor=member_actor(charlie), display_name="Chat only", employee_no="E-5"
    )
    user = _login_for(member)
    assert user.email.endswith(".invalid") and member.user_id == user.pk


# --- the legitimate path: an invitation accepted while signed in -----------------------------


def test_invitation_accepted_while_signed_in_joins_both_organizations(org_a, org_b, alice, charlie):
    _member, _invitation, token = services.member_invite(
        actor=member_actor(charlie), email=VICTIM, roles=["employee"]
    )
    browser = Client()
    browser.force_login(alice.user)
    accepted = browser.post(reverse("console:invite", args=[token]))
    assert accepted.status_code == 302
    joined = Member.objects.get(organization=org_b, email=VICTIM)
    assert joined.user_id == alice.user_id and joined.status == Member.Status.ACTIVE
    assert browser.get("/api/v1/organization/").json()["slug"] == org_b.slug
    back = browser.post(reverse("console:switch_organization"), {"organization": org_a.pk})
    assert back.status_code == 302
    assert browser.get("/api/v1/organization/").json()["slug"] == org_a.slug


def test_invitation_to_a_member_who_already_has_a_login_is_refused(org_b, charlie, alice):
    """An invitation sent before the member first signed in (by SSO) cannot move the member
    to whoever opens the link later."""
    member, _invitation, token = services.member_invite(
        actor=member_actor(charlie), email="erin@globex.test"
    )
    own = _login_for(member)
    with pytest.raises(Conflict):
        services.invitation_accept(token=token, password=None, user=alice.user)
    member.refresh_from_db()
    assert member.user_id == own.pk
    assert not Member.objects.filter(organization=org_b, user=alice.user).exists()


def test_invitation_for_an_email_an_sso_login_holds_creates_the_invitees_login(
    org_a, org_b, alice, charlie
):
    """B's provider made a login named after an address nobody had yet; when A invites the
    address, the person who opens the link gets a password login with it (their mailbox
    proves it), and B's SSO-only login is renamed, not adopted."""
    squatter = _login_for(_globex_member(charlie, email="frank@acme.test"))
    assert squatter.email == "frank@acme.test"
    _member, _invitation, token = services.member_invite(
        actor=member_actor(alice), email="frank@acme.test"
    )
    member = services.invitation_accept(token=token, password=PASSWORD, display_name="Frank")
    assert member.user_id != squatter.pk
    assert member.user.email == "frank@acme.test" and member.user.check_password(PASSWORD)
    squatter.refresh_from_db()
    assert squatter.email != "frank@acme.test" and squatter.email.endswith(".invalid")
    assert list(squatter.memberships.values_list("organization_id", flat=True)) == [org_b.pk]


def test_a_new_organization_owned_by_an_address_a_provider_named_gets_its_own_login(org_b, charlie):
    """The operator creates an organization for an address that B's provider made a login of:
    the new organization's owner is a new password login, never B's provider's."""
    squatter = _login_for(_globex_member(charlie, email="grace@initech.test"))
    organization, owner = services.organization_create(
        name="Initech", owner_email="grace@initech.test", password=PASSWORD
    )
    assert owner.user_id != squatter.pk
    assert owner.user.email == "grace@initech.test" and owner.user.check_password(PASSWORD)
    squatter.refresh_from_db()
    assert squatter.email.endswith(".invalid")
    assert not squatter.memberships.filter(organization=organization).exists()
    assert AuditEvent.objects.filter(action="member.login_rename", organization=org_b).exists()


def test_invitation_for_an_email_a_password_login_holds_asks_to_sign_in(org_a, alice, charlie):
    _member, _invitation, token = services.member_invite(actor=member_actor(charlie), email=VICTIM)
    with pytest.raises(Conflict) as refused:
        services.invitation_accept(token=token, password=PASSWORD, display_name="Alice")
    assert refused.value.code == "sign_in_first"


def test_a_linked_login_signed_in_by_one_orgs_provider_opens_that_org_only(
    client, org_a, org_b, alice, charlie, acme_key
):
    """Alice joined B with her login (an invitation accepted while signed in). B's provider
    vouches for B's member, so a sign-in through it opens B, not A as well."""
    _member, _invitation, token = services.member_invite(
        actor=member_actor(charlie), email=VICTIM, roles=["employee"]
    )
    services.invitation_accept(token=token, password=None, user=alice.user)
    response = _feishu(client, org_b, False)
    assert response.status_code == 302
    assert client.session["_auth_user_id"] == str(alice.user_id)
    assert client.get("/api/v1/organization/").json()["slug"] == org_b.slug
    assert acme_key.prefix not in client.get("/api/v1/api-keys/").content.decode()
    switch = client.post(reverse("console:switch_organization"), {"organization": org_a.pk})
    assert switch.status_code == 404


def test_invitation_accepted_in_an_sso_session_adds_that_organization(
    client, org_a, org_b, alice, charlie
):
    """Alice signed in through A's own provider, then accepts B's invitation: she now works in
    both without signing in again."""
    with FeishuFake() as fake:
        fake.users["alice"] = {
            "name": "Alice",
            "open_id": "ou_a",
            "union_id": "on_a",
            "user_id": "u_a",
            "tenant_key": "tk-acme",
            "email": VICTIM,
            "enterprise_email": VICTIM,
        }
        provider = IdentityProvider.objects.create(
            organization=org_a,
            name="Acme Feishu",
            slug="acme-feishu",
            kind="feishu",
            client_id=fake.client_id,
            client_secret=fake.client_secret,
            authorize_base_url=fake.url,
            api_base_url=fake.url,
        )
        response, _ = im_login(client, provider, fake, "alice")
    assert response.status_code == 302
    assert client.session["_auth_user_id"] == str(alice.user_id)
    _member, _invitation, token = services.member_invite(
        actor=member_actor(charlie), email=VICTIM, roles=["employee"]
    )
    assert client.post(reverse("console:invite", args=[token])).status_code == 302
    assert client.get("/api/v1/organization/").json()["slug"] == org_b.slug
    back = client.post(reverse("console:switch_organization"), {"organization": org_a.pk})
    assert back.status_code == 302
    assert client.get("/api/v1/organization/").json()["slug"] == org_a.slug


def test_password_sign_in_of_a_linked_login_reaches_every_organization(
    client, org_a, org_b, alice, charlie
):
    """A password is the person's own: it opens every organization the login belongs to."""
    _member, _invitation, token = services.member_invite(
        actor=member_actor(charlie), email=VICTIM, roles=["employee"]
    )
    services.invitation_accept(token=token, password=None, user=alice.user)
    signed = client.post(reverse("console:login"), {"username": VICTIM, "password": PASSWORD})
    assert signed.status_code == 302
    for organization in (org_b, org_a):
        switch = client.post(
            reverse("console:switch_organization"), {"organization": organization.pk}
        )
        assert switch.status_code == 302
