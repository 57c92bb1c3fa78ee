"""Whoever may edit colleagues cannot become one through single sign-on: pointing a member's
e-mail, employee number or IM account at a provider account of one's own holds the member
(`Member.sso_link_held`) until they sign in through an account already theirs or an owner
allows it; an owner's are changed by an owner only."""

from __future__ import annotations

import pytest
from django.test import Client

from cadre.governance.models import AuditEvent
from cadre.memory import services as memory_services
from cadre.tenancy import services
from cadre.tenancy.actors import member_actor
from cadre.tenancy.models import Member, SsoIdentity
from tests.factories import DepartmentFactory
from tests.tenancy.test_sso_oidc import (
    idp as idp,
)
from tests.tenancy.test_sso_oidc import (
    provider as provider,
)
from tests.tenancy.test_sso_oidc import (
    provider_login,
    refused_reason,
)

pytestmark = pytest.mark.django_db

SECRET = "Carol is being treated for a back injury"


@pytest.fixture
def sales_lead(org_a, alice, make_member):
    """An employee who manages the Sales department's members, nothing more."""
    sales = DepartmentFactory(organization=org_a, name="Sales")
    lead = make_member(roles=["employee"], email="lead@acme.test", display_name="Lead")
    services.object_grant(
        actor=member_actor(alice), member=lead, permission="member.manage", target=sales
    )
    carol = make_member(
        roles=["employee"], email="carol@acme.test", display_name="Carol", department=sales
    )
    memory_services.memory_add(
        actor=member_actor(carol),
        scope="user",
        kind="fact",
        content=SECRET,
        source_kind="user_statement",
    )
    return lead, carol


def test_only_an_owner_changes_what_sign_in_finds_an_owner_by(alice, make_member, client_for):
    ivan = make_member(roles=["it_admin"], email="ivan@acme.test", display_name="Ivan")
    api = client_for(ivan)
    for change in ({"email": "ivan@acme.test"}, {"employee_no": "E-1"}):
        response = api.patch(f"/api/v1/members/{alice.pk}/", change, format="json")
        assert response.status_code == 403, response.content
    response = api.post(
        "/api/v1/im-identities/",
        {"member": alice.pk, "platform": "feishu", "platform_user_id": "ou_ivan"},
        format="json",
    )
    assert response.status_code == 403, response.content
    alice.refresh_from_db()
    assert (alice.email, alice.employee_no, alice.sso_link_held) == ("alice@acme.test", "", False)
    assert not alice.im_identities.exists()
    # Another member's, and their own, an IT admin still keeps up to date.
    response = api.patch(f"/api/v1/members/{ivan.pk}/", {"email": "i@acme.test"}, format="json")
    assert response.status_code == 200 and response.json()["sso_link_held"] is False


def test_an_e_mail_someone_else_set_cannot_take_the_member_over(
    client, sales_lead, provider, idp, alice, client_for
):
    lead, carol = sales_lead
    # The lead points Carol's e-mail at an alias they hold at the company's provider.
    response = client_for(lead).patch(
        f"/api/v1/members/{carol.pk}/", {"email": "l.ead@acme.test"}, format="json"
    )
    assert response.status_code == 200 and response.json()["sso_link_held"] is True
    idp.users["lead"] = {"email": "l.ead@acme.test", "email_verified": True, "name": "Lead"}
    response, _ = provider_login(client, provider, "lead")
    assert refused_reason(response) == "link_held"
    assert "_auth_user_id" not in client.session
    assert not SsoIdentity.objects.exists()
    assert "an owner must allow single sign-on" in response.content.decode()
    # Not the lead's to lift; an owner who has checked the address may.
    assert client_for(lead).post(f"/api/v1/members/{carol.pk}/sso-link/allow/").status_code == 403
    assert Member.objects.get(pk=carol.pk).sso_link_held
    allowed = client_for(alice).post(f"/api/v1/members/{carol.pk}/sso-link/allow/")
    assert allowed.status_code == 200 and allowed.json()["sso_link_held"] is False
    assert AuditEvent.objects.filter(action="member.sso_link_allow", target_id=str(carol.pk))


def test_an_im_account_someone_else_added_holds_the_member(sales_lead, client_for):
    lead, carol = sales_lead
    response = client_for(lead).post(
        "/api/v1/im-identities/",
        {"member": carol.pk, "platform": "feishu", "platform_user_id": "ou_lead"},
        format="json",
    )
    assert response.status_code == 201, response.content
    assert Member.objects.get(pk=carol.pk).sso_link_held


def test_their_own_change_holds_nothing_and_their_linked_account_lifts_a_hold(
    client, sales_lead, provider, idp, alice
):
    lead, carol = sales_lead
    idp.users["carol"] = {"email": "carol@acme.test", "email_verified": True, "name": "Carol"}
    response, _ = provider_login(client, provider, "carol")  # linked from now on
    assert response.status_code == 302 and client.session["_auth_user_id"] == str(carol.user_id)
    services.member_update(actor=member_actor(alice), member=alice, email="a@acme.test")
    assert not Member.objects.get(pk=alice.pk).sso_link_held  # her own
    # The lead corrects Carol's e-mail: held, until Carol signs in through her linked account.
    services.member_update(
        actor=member_actor(lead), member=Member.objects.get(pk=carol.pk), email="c@acme.test"
    )
    assert Member.objects.get(pk=carol.pk).sso_link_held
    browser = Client()
    response, _ = provider_login(browser, provider, "carol")
    assert response.status_code == 302 and browser.session["_auth_user_id"] == str(carol.user_id)
    assert not Member.objects.get(pk=carol.pk).sso_link_held
