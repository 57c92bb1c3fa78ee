"""Members, invitations, deactivation, owner protections, the department tree, object grants."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core import mail
from django.http import HttpRequest
from django.utils import timezone
from rest_framework.test import APIClient

from cadre.errors import Conflict, InvalidInput, NotPermitted
from cadre.governance.models import AuditEvent
from cadre.tenancy import services
from cadre.tenancy.actors import member_actor
from cadre.tenancy.models import Department, Invitation, Member
from tests.conftest import PASSWORD
from tests.factories import DepartmentFactory, MemberFactory, PositionFactory
from tests.refusals import nothing_changes

# --- invitations --------------------------------------------------------------------------


def _login(email: str, password: str) -> APIClient:
    client = APIClient()
    assert client.login(request=HttpRequest(), email=email, password=password)
    return client


def test_an_invitation_through_the_api_is_emailed_when_mail_delivers(alice, client_for, settings):
    client = client_for(alice)
    sent = client.post("/api/v1/members/invite/", {"email": "one@acme.test"}, format="json")
    assert sent.status_code == 201, sent.content
    assert sent.json()["emailed"] is True  # the tests' locmem backend delivers
    (message,) = mail.outbox
    assert message.to == ["one@acme.test"] and sent.json()["invite_url"] in message.body

    settings.EMAIL_BACKEND = "django.core.mail.backends.console.EmailBackend"
    kept = client.post("/api/v1/members/invite/", {"email": "two@acme.test"}, format="json")
    assert kept.status_code == 201, kept.content
    assert kept.json()["emailed"] is False and kept.json()["invite_url"]
    assert len(mail.outbox) == 1


def test_invite_accept_then_login_works(alice, client_for):
    response = client_for(alice).post(
        "/api/v1/members/invite/",
        {"email": "Eve@Acme.test", "roles": ["auditor"]},
        format="json",
    )
    assert response.status_code == 201
    body = response.json()
    assert body["member"]["status"] == "invited"
    assert body["invitation"]["state"] == "pending"
    token = body["invite_url"].rstrip("/").rsplit("/", 1)[1]
    assert token not in str(Invitation.objects.values_list("token_hash", flat=True))

    member = services.invitation_accept(token=token, password=PASSWORD, display_name="Eve")
    assert member.status == "active" and member.user.email == "eve@acme.test"
    client = _login("eve@acme.test", PASSWORD)
    response = client.get("/api/v1/audit-events/")
    assert response.status_code == 200  # auditor role from the invitation
    assert client.get("/api/v1/members/").status_code == 200


def _invite(alice, email="eve@acme.test"):
    return services.member_invite(actor=member_actor(alice), email=email)


def test_reused_invitation_link_is_refused(alice):
    _, _, token = _invite(alice)
    services.invitation_accept(token=token, password=PASSWORD)
    with pytest.raises(InvalidInput) as error:
        services.invitation_accept(token=token, password=PASSWORD)
    assert error.value.code == "invitation_accepted"


def test_expired_invitation_link_is_refused(alice):
    _, invitation, token = _invite(alice)
    Invitation.objects.filter(pk=invitation.pk).update(expires_at=timezone.now() - timedelta(1))
    with pytest.raises(InvalidInput) as error:
        services.invitation_accept(token=token, password=PASSWORD)
    assert error.value.code == "invitation_expired"


def test_revoked_invitation_link_is_refused(alice, client_for):
    _, invitation, token = _invite(alice)
    response = client_for(alice).post(f"/api/v1/invitations/{invitation.pk}/revoke/")
    assert response.status_code == 200 and response.json()["state"] == "revoked"
    with pytest.raises(InvalidInput) as error:
        services.invitation_accept(token=token, password=PASSWORD)
    assert error.value.code == "invitation_revoked"
    with nothing_changes(invitation):
        assert (
            client_for(alice).post(f"/api/v1/invitations/{invitation.pk}/revoke/").status_code
            == 409
        )


def test_unknown_invitation_token_is_refused(db):
    with pytest.raises(InvalidInput) as error:
        services.invitation_accept(token="no-such-token", password=PASSWORD)
    assert error.value.code == "invitation_unknown"


def test_reinviting_supersedes_the_previous_link(alice):
    member, _, first = _invite(alice)
    _, _, second = services.member_invite(actor=member_actor(alice), email="eve@acme.test")
    with pytest.raises(InvalidInput):
        services.invitation_accept(token=first, password=PASSWORD)
    assert services.invitation_accept(token=second, password=PASSWORD).pk == member.pk


def test_invitation_of_a_deactivated_member_cannot_be_accepted(alice):
    member, _, token = _invite(alice)
    services.member_deactivate(actor=member_actor(alice), member=member)
    with pytest.raises(InvalidInput):
        services.invitation_accept(token=token, password=PASSWORD)


def test_weak_password_is_refused_on_accept(alice):
    _, _, token = _invite(alice)
    with pytest.raises(InvalidInput) as error:
        services.invitation_accept(token=token, password="123")
    assert "password" in error.value.details


def test_existing_account_must_sign_in_to_accept(alice, bob, org_b):
    charlie_org_owner = MemberFactory(organization=org_b, roles=["owner"])
    _, _, token = services.member_invite(actor=member_actor(charlie_org_owner), email=bob.email)
    with pytest.raises(Conflict) as error:
        services.invitation_accept(token=token, password=PASSWORD)
    assert error.value.code == "sign_in_first"
    member = services.invitation_accept(token=token, password=None, user=bob.user)
    assert member.organization == org_b and member.user == bob.user


def test_inviting_someone_who_can_sign_in_is_a_conflict(alice, bob, client_for):
    with nothing_changes(Invitation, Member):
        response = client_for(alice).post(
            "/api/v1/members/invite/", {"email": bob.email}, format="json"
        )
    assert response.status_code == 409


# --- deactivation -------------------------------------------------------------------------


def test_deactivation_blocks_session_access_immediately_and_keeps_history(alice, bob, client_for):
    bob_client = client_for(bob)
    assert bob_client.get("/api/v1/members/").status_code == 200
    response = client_for(alice).post(
        f"/api/v1/members/{bob.pk}/deactivate/", {"reason": "left"}, format="json"
    )
    assert response.status_code == 200
    assert response.json()["status"] == "deactivated"
    assert response.json()["deactivated_at"]
    response = bob_client.get("/api/v1/members/")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "permission_denied"
    bob.refresh_from_db()
    assert bob.status == "deactivated" and bob.user_id is not None
    assert Member.objects.filter(pk=bob.pk).exists()
    assert AuditEvent.objects.filter(
        action="member.deactivate", target_id=str(bob.pk), reason="left"
    ).exists()
    listed = client_for(alice).get("/api/v1/members/", {"status": "deactivated"}).json()
    assert [row["id"] for row in listed["results"]] == [bob.pk]


def test_deactivation_stops_the_members_keys(alice, make_member):
    admin = make_member(roles=["it_admin"])
    _, secret = services.api_key_create(actor=member_actor(admin), name="k", scopes=["org:read"])
    services.member_deactivate(actor=member_actor(alice), member=admin)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert client.get("/api/v1/members/").status_code == 401


def test_deactivation_revokes_pending_invitations(alice):
    member, invitation, _ = _invite(alice)
    services.member_deactivate(actor=member_actor(alice), member=member)
    invitation.refresh_from_db()
    assert invitation.state == "revoked"


def test_deactivation_works_without_listeners_and_tells_each_in_its_transaction(alice, bob):
    with services.member_deactivated.overridden():
        services.member_deactivate(actor=member_actor(alice), member=bob)
    bob.refresh_from_db()
    assert bob.status == "deactivated"

    told = []
    carol = MemberFactory(organization=alice.organization)
    with services.member_deactivated.overridden([lambda **kw: told.append(kw)]):
        services.member_deactivate(actor=member_actor(alice), member=carol, reason="left")
    assert [(kw["member"].pk, kw["reason"]) for kw in told] == [(carol.pk, "left")]

    def refuse(**kw):
        raise Conflict("no")

    dave = MemberFactory(organization=alice.organization)
    with services.member_deactivated.overridden([refuse]), pytest.raises(Conflict):
        services.member_deactivate(actor=member_actor(alice), member=dave)
    dave.refresh_from_db()
    assert dave.status == Member.Status.ACTIVE
    deactivations = AuditEvent.objects.filter(action="member.deactivate", target_id=str(dave.pk))
    assert not deactivations.exists()


def test_cannot_deactivate_yourself(alice, make_member, client_for):
    make_member(roles=["owner"])
    response = client_for(alice).post(f"/api/v1/members/{alice.pk}/deactivate/", {}, format="json")
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "self"


def test_cannot_deactivate_the_last_owner(alice, make_member, client_for):
    admin = make_member(roles=["it_admin"])
    with pytest.raises((Conflict, NotPermitted)):
        services.member_deactivate(actor=member_actor(admin), member=alice)
    other_owner = make_member(roles=["owner"])
    services.member_deactivate(actor=member_actor(other_owner), member=alice)
    with pytest.raises(Conflict) as error:
        services.member_update(
            actor=member_actor(other_owner), member=other_owner, roles=["it_admin"]
        )
    assert error.value.code == "last_owner"


def test_last_owner_cannot_be_deactivated_even_by_the_system(alice):
    from cadre.tenancy.actors import system_actor

    with pytest.raises(Conflict) as error:
        services.member_deactivate(actor=system_actor(alice.organization), member=alice)
    assert error.value.code == "last_owner"


def test_it_admin_cannot_deactivate_or_reactivate_an_owner(alice, make_member, client_for):
    make_member(roles=["owner"])
    admin_client = client_for(make_member(roles=["it_admin"]))
    response = admin_client.post(f"/api/v1/members/{alice.pk}/deactivate/", {}, format="json")
    assert response.status_code == 403
    alice.refresh_from_db()
    assert alice.status == "active"
    dormant = make_member(roles=["owner"], status="deactivated")
    with nothing_changes(dormant):
        response = admin_client.post(f"/api/v1/members/{dormant.pk}/reactivate/", {}, format="json")
    assert response.status_code == 403


def test_deactivating_twice_and_reactivating_an_active_member_conflict(alice, bob, client_for):
    client = client_for(alice)
    with nothing_changes(bob):
        assert client.post(f"/api/v1/members/{bob.pk}/reactivate/").status_code == 409
    assert client.post(f"/api/v1/members/{bob.pk}/deactivate/").status_code == 200
    with nothing_changes(bob):
        assert client.post(f"/api/v1/members/{bob.pk}/deactivate/").status_code == 409


def test_reactivated_member_with_login_is_active_and_signs_in_again(alice, bob, client_for):
    services.member_deactivate(actor=member_actor(alice), member=bob)
    response = client_for(alice).post(f"/api/v1/members/{bob.pk}/reactivate/")
    assert response.status_code == 200
    assert response.json()["status"] == "active"
    assert response.json()["deactivated_at"] is None
    assert client_for(bob).get("/api/v1/members/").status_code == 200


def test_reactivated_im_only_member_is_active_again(alice):
    owner = member_actor(alice)
    member = services.member_create(actor=owner, display_name="Chat only", email="chat@acme.test")
    assert member.status == "active" and member.user_id is None
    services.member_deactivate(actor=owner, member=member)
    services.member_reactivate(actor=owner, member=member)
    member.refresh_from_db()
    assert member.status == "active"
    assert member_actor(member).has("chat.use")


def test_status_cannot_be_changed_by_update(alice, bob, client_for):
    response = client_for(alice).patch(
        f"/api/v1/members/{bob.pk}/", {"status": "deactivated"}, format="json"
    )
    assert response.status_code == 200
    bob.refresh_from_db()
    assert bob.status == "active"


# --- roles --------------------------------------------------------------------------------


def test_only_owners_grant_or_remove_the_owner_role(alice, bob, make_member):
    admin = make_member(roles=["it_admin"])
    with pytest.raises(NotPermitted):
        services.member_update(actor=member_actor(admin), member=bob, roles=["owner"])
    services.member_update(actor=member_actor(alice), member=bob, roles=["owner"])
    with pytest.raises(NotPermitted):
        services.member_update(actor=member_actor(admin), member=bob, roles=["employee"])
    with pytest.raises(NotPermitted):
        services.member_create(actor=member_actor(admin), display_name="X", roles=["owner"])
    services.member_update(actor=member_actor(alice), member=bob, roles=["employee"])
    bob.refresh_from_db()
    assert bob.roles == ["employee"]


def test_it_admin_can_assign_non_owner_roles(bob, make_member, client_for):
    admin = make_member(roles=["it_admin"])
    response = client_for(admin).patch(
        f"/api/v1/members/{bob.pk}/", {"roles": ["auditor", "employee"]}, format="json"
    )
    assert response.status_code == 200
    assert response.json()["roles"] == ["auditor", "employee"]


def test_unknown_role_is_400(alice, bob, client_for):
    response = client_for(alice).patch(
        f"/api/v1/members/{bob.pk}/", {"roles": ["god"]}, format="json"
    )
    assert response.status_code == 400
    assert "roles" in response.json()["error"]["details"]


def test_a_member_cannot_be_their_own_manager(alice, bob, client_for):
    response = client_for(alice).patch(
        f"/api/v1/members/{bob.pk}/", {"manager": bob.pk}, format="json"
    )
    assert response.status_code == 400
    assert "manager" in response.json()["error"]["details"]


def test_duplicate_member_email_is_a_conflict_with_field(alice, bob, client_for):
    response = client_for(alice).post(
        "/api/v1/members/", {"display_name": "B2", "email": bob.email.upper()}, format="json"
    )
    assert response.status_code == 409
    assert "email" in response.json()["error"]["details"]


# --- departments --------------------------------------------------------------------------


def test_department_cycles_are_refused(org_a, alice, client_for):
    client = client_for(alice)
    top = client.post("/api/v1/departments/", {"name": "Top"}, format="json").json()
    mid = client.post(
        "/api/v1/departments/", {"name": "Mid", "parent": top["id"]}, format="json"
    ).json()
    low = client.post(
        "/api/v1/departments/", {"name": "Low", "parent": mid["id"]}, format="json"
    ).json()
    for parent in (low["id"], mid["id"], top["id"]):
        response = client.patch(
            f"/api/v1/departments/{top['id']}/", {"parent": parent}, format="json"
        )
        assert response.status_code == 400, parent
        assert "parent" in response.json()["error"]["details"]
    response = client.patch(
        f"/api/v1/departments/{low['id']}/", {"parent": top["id"]}, format="json"
    )
    assert response.status_code == 200


def test_archive_is_refused_with_members_or_children(org_a, alice, client_for):
    client = client_for(alice)
    parent = DepartmentFactory(organization=org_a)
    child = DepartmentFactory(organization=org_a, parent=parent)
    member = MemberFactory(organization=org_a, department=child)
    response = client.delete(f"/api/v1/departments/{parent.pk}/")
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "has_children"
    response = client.delete(f"/api/v1/departments/{child.pk}/")
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "has_members"
    services.member_update(actor=member_actor(alice), member=member, department=None)
    assert client.delete(f"/api/v1/departments/{child.pk}/").status_code == 200
    response = client.delete(f"/api/v1/departments/{parent.pk}/")
    assert response.status_code == 200 and response.json()["is_archived"] is True
    with nothing_changes(Department):
        response = client.post(
            "/api/v1/departments/", {"name": "New", "parent": parent.pk}, format="json"
        )
    assert response.status_code == 400


def test_sibling_department_names_are_unique_case_insensitively(alice, client_for):
    client = client_for(alice)
    assert client.post("/api/v1/departments/", {"name": "Sales"}, format="json").status_code == 201
    response = client.post("/api/v1/departments/", {"name": "sales"}, format="json")
    assert response.status_code == 409
    assert "name" in response.json()["error"]["details"]


def test_position_code_cannot_be_blanked(org_a, alice, client_for):
    position = PositionFactory(organization=org_a)
    response = client_for(alice).patch(
        f"/api/v1/positions/{position.pk}/", {"code": ""}, format="json"
    )
    assert response.status_code == 400
    position.refresh_from_db()
    assert position.code


# --- object grants ------------------------------------------------------------------------


@pytest.fixture
def tree(org_a):
    sales = DepartmentFactory(organization=org_a, name="Sales")
    east = DepartmentFactory(organization=org_a, name="East", parent=sales)
    support = DepartmentFactory(organization=org_a, name="Support")
    return {"sales": sales, "east": east, "support": support}


@pytest.fixture
def hr_lead(alice, make_member, tree):
    """An employee granted member.manage on Sales (and so on East below it)."""
    lead = make_member(roles=["employee"])
    services.object_grant(
        actor=member_actor(alice), member=lead, permission="member.manage", target=tree["sales"]
    )
    return lead


def test_department_grant_lets_an_employee_manage_members_of_that_subtree(
    org_a, hr_lead, tree, client_for
):
    client = client_for(hr_lead)
    in_east = MemberFactory(organization=org_a, department=tree["east"])
    in_support = MemberFactory(organization=org_a, department=tree["support"])

    response = client.patch(f"/api/v1/members/{in_east.pk}/", {"title": "Rep"}, format="json")
    assert response.status_code == 200
    response = client.post(f"/api/v1/members/{in_east.pk}/deactivate/", {}, format="json")
    assert response.status_code == 200

    with nothing_changes(in_support):
        response = client.patch(
            f"/api/v1/members/{in_support.pk}/", {"title": "Rep"}, format="json"
        )
    assert response.status_code == 403
    with nothing_changes(in_support):
        response = client.post(f"/api/v1/members/{in_support.pk}/deactivate/", {}, format="json")
    assert response.status_code == 403


def test_department_grantee_creates_members_only_inside_the_subtree(hr_lead, tree, client_for):
    client = client_for(hr_lead)
    response = client.post(
        "/api/v1/members/",
        {"display_name": "New rep", "department": tree["east"].pk},
        format="json",
    )
    assert response.status_code == 201, response.content
    with nothing_changes(Member):
        response = client.post(
            "/api/v1/members/",
            {"display_name": "Elsewhere", "department": tree["support"].pk},
            format="json",
        )
    assert response.status_code == 403
    with nothing_changes(Member):
        response = client.post("/api/v1/members/", {"display_name": "Nowhere"}, format="json")
    assert response.status_code == 403


def test_department_grantee_cannot_move_members_out_of_the_subtree(
    org_a, hr_lead, tree, client_for
):
    client = client_for(hr_lead)
    member = MemberFactory(organization=org_a, department=tree["east"])
    for department in (tree["support"].pk, None):
        response = client.patch(
            f"/api/v1/members/{member.pk}/", {"department": department}, format="json"
        )
        assert response.status_code == 403, department
    response = client.patch(
        f"/api/v1/members/{member.pk}/", {"department": tree["sales"].pk}, format="json"
    )
    assert response.status_code == 200
    member.refresh_from_db()
    assert member.department == tree["sales"]


def test_department_grantee_cannot_change_roles(org_a, hr_lead, tree, client_for):
    member = MemberFactory(organization=org_a, department=tree["east"])
    with nothing_changes(member):
        response = client_for(hr_lead).patch(
            f"/api/v1/members/{member.pk}/", {"roles": ["it_admin"]}, format="json"
        )
    assert response.status_code == 403


def test_revoked_grant_stops_working(org_a, alice, hr_lead, tree, client_for):
    member = MemberFactory(organization=org_a, department=tree["east"])
    services.object_grant_revoke(
        actor=member_actor(alice), member=hr_lead, permission="member.manage", target=tree["sales"]
    )
    with nothing_changes(member):
        response = client_for(hr_lead).patch(
            f"/api/v1/members/{member.pk}/", {"title": "x"}, format="json"
        )
    assert response.status_code == 403


def test_deactivated_grantee_loses_what_the_grant_gave(org_a, alice, hr_lead, tree):
    member = MemberFactory(organization=org_a, department=tree["east"])
    assert member_actor(hr_lead).can("member.manage", member)
    services.member_deactivate(actor=member_actor(alice), member=hr_lead)
    hr_lead.refresh_from_db()
    actor = member_actor(hr_lead)
    assert not actor.can("member.manage", member)
    assert not Member.objects.restrict(actor, "manage").exists()


def test_grants_api_lists_creates_and_deletes(org_a, alice, bob, tree, client_for):
    client = client_for(alice)
    response = client.post(
        "/api/v1/grants/",
        {
            "member": bob.pk,
            "permission": "department.manage",
            "target_type": "department",
            "target_id": tree["support"].pk,
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    grant = response.json()
    assert grant == {
        "id": grant["id"],
        "member": bob.pk,
        "permission": "department.manage",
        "target_type": "department",
        "target_id": tree["support"].pk,
    }
    assert client.get("/api/v1/grants/").json() == [grant]
    assert client.get(f"/api/v1/grants/{grant['id']}/").json() == grant
    response = client_for(bob).patch(
        f"/api/v1/departments/{tree['support'].pk}/", {"description": "Helps"}, format="json"
    )
    assert response.status_code == 200
    assert client.delete(f"/api/v1/grants/{grant['id']}/").status_code == 204
    assert client.get("/api/v1/grants/").json() == []
    assert client.get("/api/v1/grants/abc/").status_code == 404


def test_grant_of_an_ungrantable_permission_is_400(alice, bob, tree, client_for):
    response = client_for(alice).post(
        "/api/v1/grants/",
        {
            "member": bob.pk,
            "permission": "organization.manage",
            "target_type": "department",
            "target_id": tree["sales"].pk,
        },
        format="json",
    )
    assert response.status_code == 400
    assert "permission" in response.json()["error"]["details"]


def test_grant_to_a_member_without_login_is_400(org_a, alice, tree, client_for):
    member = services.member_create(actor=member_actor(alice), display_name="IM only")
    response = client_for(alice).post(
        "/api/v1/grants/",
        {
            "member": member.pk,
            "permission": "member.manage",
            "target_type": "department",
            "target_id": tree["sales"].pk,
        },
        format="json",
    )
    assert response.status_code == 400
    assert "member" in response.json()["error"]["details"]


def test_grant_on_unknown_target_is_400(alice, bob, client_for):
    response = client_for(alice).post(
        "/api/v1/grants/",
        {
            "member": bob.pk,
            "permission": "member.manage",
            "target_type": "department",
            "target_id": 10**9,
        },
        format="json",
    )
    assert response.status_code == 400
    assert "target_id" in response.json()["error"]["details"]


def test_members_cannot_join_an_archived_department(org_a, alice, bob, client_for):
    archived = DepartmentFactory(organization=org_a, is_archived=True)
    client = client_for(alice)
    response = client.post(
        "/api/v1/members/", {"display_name": "X", "department": archived.pk}, format="json"
    )
    assert response.status_code == 400
    assert "department" in response.json()["error"]["details"]
    with nothing_changes(bob):
        response = client.patch(
            f"/api/v1/members/{bob.pk}/", {"department": archived.pk}, format="json"
        )
    assert response.status_code == 400


@pytest.mark.django_db(transaction=True)
def test_two_owners_removing_each_other_at_once_leave_one_owner():
    import threading

    from django.db import connections

    from tests.factories import OrganizationFactory

    organization = OrganizationFactory(slug="race")
    first = MemberFactory(organization=organization, roles=["owner"])
    second = MemberFactory(organization=organization, roles=["owner"])
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def remove(actor_member, target):
        try:
            # Each "request" loads its own rows, as two real requests would.
            acting = Member.objects.get(pk=actor_member.pk)
            target = Member.objects.get(pk=target.pk)
            barrier.wait(timeout=30)
            services.member_deactivate(actor=member_actor(acting), member=target)
            outcomes.append("deactivated")
        except Conflict as error:
            outcomes.append(error.code)
        except BaseException as error:  # surfaced by the assertion below
            outcomes.append(repr(error))
        finally:
            connections.close_all()

    threads = [
        threading.Thread(target=remove, args=(first, second)),
        threading.Thread(target=remove, args=(second, first)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(outcomes) == ["deactivated", "last_owner"]
    assert Member.objects.filter(organization=organization, status="active").count() == 1


def test_department_manage_grant_allows_sub_departments_only_below_it(
    alice, make_member, tree, client_for
):
    lead = make_member(roles=["employee"])
    services.object_grant(
        actor=member_actor(alice),
        member=lead,
        permission="department.manage",
        target=tree["sales"],
    )
    client = client_for(lead)
    response = client.post(
        "/api/v1/departments/", {"name": "West", "parent": tree["sales"].pk}, format="json"
    )
    assert response.status_code == 201, response.content
    response = client.patch(
        f"/api/v1/departments/{tree['east'].pk}/", {"description": "East coast"}, format="json"
    )
    assert response.status_code == 200
    assert client.post("/api/v1/departments/", {"name": "Top"}, format="json").status_code == 403
    with nothing_changes(Department):
        response = client.post(
            "/api/v1/departments/", {"name": "X", "parent": tree["support"].pk}, format="json"
        )
    assert response.status_code == 403
    with nothing_changes(tree["east"]):
        response = client.patch(
            f"/api/v1/departments/{tree['east'].pk}/", {"parent": tree["support"].pk}, format="json"
        )
    assert response.status_code == 403
