"""Every tenancy service writes its audit event: action, actor, target and diff."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from cadre.governance.models import AuditEvent
from cadre.tenancy import services
from cadre.tenancy.actors import member_actor
from cadre.tenancy.models import ApiKey, Member
from tests.conftest import PASSWORD
from tests.factories import DepartmentFactory, IMIdentityFactory, MemberFactory, PositionFactory


def last_event(organization) -> AuditEvent:
    # Newest first, sealed or not: an event waits for its seal until after the commit.
    return AuditEvent.objects.filter(organization=organization).order_by("-sequence").first()


def events_since(organization, event_id: int) -> list[AuditEvent]:
    return list(
        AuditEvent.objects.filter(organization=organization, pk__gt=event_id).order_by("sequence")
    )


def head(organization) -> int:
    """The id of the organization's newest event (0 when it has none)."""
    event = last_event(organization)
    return event.pk if event else 0


def assert_event(event, *, action, actor, target_type, target_id, changes=None):
    assert event.action == action
    assert event.actor_type == actor.kind
    assert event.actor_id == actor.actor_id
    assert event.actor_label == actor.label
    assert event.target_type == target_type
    assert event.target_id == str(target_id)
    if changes is not None:
        assert event.changes == changes


@pytest.fixture
def owner(alice):
    return member_actor(alice)


def test_organization_create_audits_the_organization_and_its_owner(db):
    organization, owner = services.organization_create(
        name="Initech", owner_email="Peter@Initech.test", password=PASSWORD
    )
    first, second = AuditEvent.objects.filter(organization=organization).order_by("sequence")
    assert (first.action, first.target_id) == ("organization.create", str(organization.pk))
    assert first.actor_type == "system"
    assert first.changes == {"after": {"name": "Initech", "slug": "initech"}}
    assert (second.action, second.target_id) == ("member.create", str(owner.pk))
    assert PASSWORD not in json.dumps([first.changes, second.changes])


def test_organization_update_audits_before_and_after(org_a, owner):
    services.organization_update(actor=owner, organization=org_a, name="Acme Ltd")
    assert_event(
        last_event(org_a),
        action="organization.update",
        actor=owner,
        target_type="organization",
        target_id=org_a.pk,
        changes={"before": {"name": "Acme"}, "after": {"name": "Acme Ltd"}},
    )


def test_department_create_update_archive_are_audited(org_a, owner):
    department = services.department_create(actor=owner, name="Sales", code="sales")
    assert_event(
        last_event(org_a),
        action="department.create",
        actor=owner,
        target_type="department",
        target_id=department.pk,
    )
    assert last_event(org_a).changes["after"]["name"] == "Sales"
    services.department_update(actor=owner, department=department, name="Field sales")
    assert_event(
        last_event(org_a),
        action="department.update",
        actor=owner,
        target_type="department",
        target_id=department.pk,
        changes={"before": {"name": "Sales"}, "after": {"name": "Field sales"}},
    )
    services.department_archive(actor=owner, department=department)
    assert_event(
        last_event(org_a),
        action="department.archive",
        actor=owner,
        target_type="department",
        target_id=department.pk,
        changes={"before": {"is_archived": False}, "after": {"is_archived": True}},
    )


def test_renaming_an_archived_department_is_an_update_not_an_archive(org_a, owner):
    department = DepartmentFactory(organization=org_a, is_archived=True)
    services.department_update(actor=owner, department=department, name="Old", is_archived=True)
    assert last_event(org_a).action == "department.update"


def test_position_create_and_update_are_audited(org_a, owner):
    position = services.position_create(actor=owner, name="Key accounts")
    assert_event(
        last_event(org_a),
        action="position.create",
        actor=owner,
        target_type="position",
        target_id=position.pk,
    )
    assert last_event(org_a).changes["after"]["code"] == "key-accounts"
    services.position_update(actor=owner, position=position, description="Big clients")
    assert_event(
        last_event(org_a),
        action="position.update",
        actor=owner,
        target_type="position",
        target_id=position.pk,
        changes={"before": {"description": ""}, "after": {"description": "Big clients"}},
    )
    services.position_update(actor=owner, position=position, is_archived=True)
    assert last_event(org_a).action == "position.archive"


def test_member_create_update_deactivate_reactivate_are_audited(org_a, owner):
    department = DepartmentFactory(organization=org_a)
    position = PositionFactory(organization=org_a)
    member = services.member_create(
        actor=owner,
        display_name="Dora",
        email="Dora@Acme.test",
        department=department,
        positions=[position],
    )
    event = last_event(org_a)
    assert_event(
        event, action="member.create", actor=owner, target_type="member", target_id=member.pk
    )
    assert event.changes["after"]["email"] == "dora@acme.test"
    assert event.changes["after"]["department"] == department.pk
    assert event.changes["after"]["positions"] == [position.pk]
    assert event.changes["after"]["roles"] == ["employee"]

    services.member_update(actor=owner, member=member, title="Lead", roles=["auditor"])
    assert_event(
        last_event(org_a),
        action="member.update",
        actor=owner,
        target_type="member",
        target_id=member.pk,
        changes={
            "before": {"roles": ["employee"], "title": ""},
            "after": {"roles": ["auditor"], "title": "Lead"},
        },
    )
    services.member_deactivate(actor=owner, member=member, reason="left the company")
    event = last_event(org_a)
    assert_event(
        event,
        action="member.deactivate",
        actor=owner,
        target_type="member",
        target_id=member.pk,
        changes={"before": {"status": "active"}, "after": {"status": "deactivated"}},
    )
    assert event.reason == "left the company"
    services.member_reactivate(actor=owner, member=member)
    assert_event(
        last_event(org_a),
        action="member.reactivate",
        actor=owner,
        target_type="member",
        target_id=member.pk,
        changes={"before": {"status": "deactivated"}, "after": {"status": "active"}},
    )


def test_invite_accept_and_revoke_are_audited(org_a, owner):
    before = head(org_a)
    member, _invitation, token = services.member_invite(actor=owner, email="eve@acme.test")
    create, invite = events_since(org_a, before)
    assert create.action == "member.create"
    assert_event(
        invite, action="member.invite", actor=owner, target_type="member", target_id=member.pk
    )
    assert invite.changes["after"]["email"] == "eve@acme.test"
    assert token not in json.dumps(invite.changes)

    accepted = services.invitation_accept(token=token, password=PASSWORD, display_name="Eve")
    event = last_event(org_a)
    assert event.action == "member.invitation_accept"
    assert (event.actor_type, event.actor_id) == ("member", str(accepted.pk))
    assert (event.target_type, event.target_id) == ("member", str(member.pk))
    assert event.changes == {"after": {"status": "active"}}
    assert PASSWORD not in json.dumps(event.changes) and token not in json.dumps(event.changes)

    other, second, _ = services.member_invite(actor=owner, email="fay@acme.test")
    services.invitation_revoke(actor=owner, invitation=second)
    assert_event(
        last_event(org_a),
        action="member.invitation_revoke",
        actor=owner,
        target_type="member",
        target_id=other.pk,
        changes={"after": {"invitation": second.pk}},
    )


def test_im_identity_create_and_delete_are_audited(org_a, owner, bob):
    identity = services.im_identity_create(
        actor=owner, member=bob, platform="slack", platform_user_id="U42"
    )
    assert_event(
        last_event(org_a),
        action="member.identity_add",
        actor=owner,
        target_type="member",
        target_id=bob.pk,
        changes={"after": {"platform": "slack", "platform_user_id": "U42"}},
    )
    services.im_identity_delete(actor=owner, identity=identity)
    assert_event(
        last_event(org_a),
        action="member.identity_remove",
        actor=owner,
        target_type="member",
        target_id=bob.pk,
        changes={"before": {"platform": "slack", "platform_user_id": "U42"}},
    )


def test_api_key_create_and_revoke_are_audited_without_secrets(org_a, owner):
    expires = timezone.now() + timedelta(days=30)
    key, secret = services.api_key_create(
        actor=owner, name="CI", scopes=["org:read"], expires_at=expires
    )
    event = last_event(org_a)
    assert_event(event, action="apikey.create", actor=owner, target_type="apikey", target_id=key.pk)
    assert event.changes["after"]["scopes"] == ["org:read"]
    assert event.changes["after"]["prefix"] == key.prefix
    dumped = json.dumps(event.changes)
    assert secret not in dumped
    assert key.key_hash not in dumped
    services.api_key_revoke(actor=owner, key=key)
    assert_event(
        last_event(org_a),
        action="apikey.revoke",
        actor=owner,
        target_type="apikey",
        target_id=key.pk,
        changes={"before": {"state": "active"}, "after": {"state": "revoked"}},
    )
    everything = json.dumps(
        list(AuditEvent.objects.filter(organization=org_a).values("changes", "target_label"))
    )
    assert secret not in everything and key.key_hash not in everything


def test_object_grant_and_revoke_are_audited(org_a, owner, bob):
    department = DepartmentFactory(organization=org_a)
    services.object_grant(actor=owner, member=bob, permission="member.manage", target=department)
    assert_event(
        last_event(org_a),
        action="grant.add",
        actor=owner,
        target_type="department",
        target_id=department.pk,
        changes={"after": {"member": bob.pk, "permission": "member.manage"}},
    )
    services.object_grant_revoke(
        actor=owner, member=bob, permission="member.manage", target=department
    )
    assert_event(
        last_event(org_a),
        action="grant.remove",
        actor=owner,
        target_type="department",
        target_id=department.pk,
        changes={"before": {"member": bob.pk, "permission": "member.manage"}},
    )


def test_api_key_actions_are_attributed_to_the_key(org_a, alice, key_client):
    client = key_client(alice, ["org:read", "org:write"])
    key = ApiKey.objects.get(organization=org_a, name="test")
    response = client.post("/api/v1/departments/", {"name": "Via key"}, format="json")
    assert response.status_code == 201
    event = last_event(org_a)
    assert event.action == "department.create"
    assert (event.actor_type, event.actor_id) == ("api_key", str(key.pk))
    assert key.prefix in event.actor_label


def test_secret_named_fields_are_redacted_in_any_diff(org_a, owner):
    from cadre.governance import audit

    event = audit.record(
        actor=owner,
        action="test.secret",
        target=("thing", 1),
        after={"password": "hunter22", "nested": {"api_key": "abc", "token": "t"}, "ok": 1},
    )
    dumped = json.dumps(event.changes)
    assert "hunter22" not in dumped and "abc" not in dumped and '"t"' not in dumped
    assert event.changes["after"]["ok"] == 1


def test_failed_service_leaves_no_audit_event(org_a, owner, alice):
    before = head(org_a)
    from cadre.errors import Conflict

    with pytest.raises(Conflict):
        services.member_deactivate(actor=owner, member=alice)
    assert head(org_a) == before
    assert Member.objects.get(pk=alice.pk).status == "active"


def test_identity_factory_identity_delete_through_api_is_audited(org_a, alice, bob, client_for):
    identity = IMIdentityFactory(member=bob)
    response = client_for(alice).delete(f"/api/v1/im-identities/{identity.pk}/")
    assert response.status_code == 204
    assert last_event(org_a).action == "member.identity_remove"


def test_member_create_with_factory_member_as_manager_is_audited(org_a, owner):
    manager = MemberFactory(organization=org_a)
    member = services.member_create(actor=owner, display_name="Gus", manager=manager)
    assert last_event(org_a).changes["after"]["manager"] == manager.pk
    assert last_event(org_a).target_id == str(member.pk)


def test_service_events_are_sealed_into_the_chain_in_the_order_they_were_written(org_a, owner):
    from cadre.governance import audit

    before = head(org_a)
    department = services.department_create(actor=owner, name="Ops")
    services.department_update(actor=owner, department=department, name="Operations")
    written = events_since(org_a, before)
    assert [event.sequence for event in written] == [None, None]  # sealed after the commit
    assert audit.seal(organization=org_a) >= 2
    sealed = events_since(org_a, before)
    assert [event.action for event in sealed] == ["department.create", "department.update"]
    assert sealed[1].sequence == sealed[0].sequence + 1
    assert sealed[1].prev_hash == sealed[0].hash
    assert audit.verify_chain(org_a)["ok"]


def test_a_failed_service_leaves_no_gap_in_the_chain(org_a, owner, alice):
    from cadre.errors import Conflict
    from cadre.governance import audit

    services.department_create(actor=owner, name="Before")
    with pytest.raises(Conflict):
        services.member_deactivate(actor=owner, member=alice)
    services.department_create(actor=owner, name="After")
    audit.seal(organization=org_a)
    sequences = list(
        AuditEvent.objects.filter(organization=org_a)
        .order_by("sequence")
        .values_list("sequence", flat=True)
    )
    assert sequences == list(range(1, len(sequences) + 1))
    assert (
        audit.verify_chain(org_a).items()
        >= {
            "ok": True,
            "checked": len(sequences),
            "unsealed": 0,
            "broken": None,
        }.items()
    )
