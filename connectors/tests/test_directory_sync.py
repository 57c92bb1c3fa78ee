"""IM directory sync against loopback Feishu, WeCom and DingTalk contact APIs."""

from __future__ import annotations

import pytest

from cadre.tenancy.actors import member_actor
from cadre.tenancy.models import ApiKey, Department, IMIdentity, Member
from cadre.tenancy.services import api_key_create, member_update
from connectors.directory.contacts import ContactChange
from connectors.directory.sync import (
    contact_change_apply,
    directory_conflict_resolve,
    directory_sync_execute,
    directory_sync_start,
)
from connectors.models import (
    DirectoryConflict,
    DirectoryDepartmentLink,
    DirectorySync,
    DirectoryUserLink,
)
from connectors.tests.fake_directory import (
    CREDENTIALS,
    FakeDirectory,
    generate,
    platform_department_id,
    platform_user_id,
)
from connectors.tests.fakes import FakePlatformServer
from connectors.tests.helpers import make_connector
from tests.refusals import nothing_changes

PLATFORMS = ["feishu", "wecom", "dingtalk"]


@pytest.fixture
def server():
    server = FakePlatformServer().start()
    yield server
    server.stop()


def setup(server, owner, platform, org):
    fake = FakeDirectory(server, platform, org)
    connector = make_connector(owner, platform, CREDENTIALS[platform], fake.connector_settings())
    return fake, connector


def run_full(owner, connector) -> DirectorySync:
    sync = directory_sync_start(actor=member_actor(owner), connector=connector)
    sync.refresh_from_db()
    return directory_sync_execute(sync)


def synced_members(connector):
    return Member.objects.filter(
        pk__in=DirectoryUserLink.objects.filter(connector=connector).values("member")
    )


@pytest.mark.parametrize("platform", PLATFORMS)
def test_full_sync_builds_the_tree_members_and_identities(server, alice, platform):
    org = generate(users=60, departments=12)
    _, connector = setup(server, alice, platform, org)
    sync = run_full(alice, connector)
    assert sync.status == "succeeded", sync.error
    assert sync.counts["departments_created"] == 12
    assert sync.counts["members_created"] == 60
    assert sync.counts["identities_created"] == 60
    assert sync.progress_done == 60

    # The tree: every department under its directory parent, names as in the directory.
    department = {
        link.platform_department_id: link.department
        for link in DirectoryDepartmentLink.objects.filter(connector=connector)
    }
    assert len(department) == 12
    for fake_department in org.departments:
        mine = department[platform_department_id(platform, fake_department.key)]
        assert mine.name == fake_department.name
        if fake_department.parent:
            parent = department[platform_department_id(platform, fake_department.parent)]
            assert mine.parent_id == parent.pk
        else:
            assert mine.parent_id is None

    # Users: name, e-mail, mobile, employee id, title, department, leader, IM identity.
    members = {
        link.platform_user_id: link.member
        for link in DirectoryUserLink.objects.filter(connector=connector).select_related("member")
    }
    for user in org.users:
        member = members[platform_user_id(platform, user.key)]
        assert member.display_name == user.name
        assert member.email == user.email
        assert member.mobile == user.mobile
        assert member.employee_no == user.employee_no
        assert member.title == user.title
        assert member.department_id == (
            department[platform_department_id(platform, user.departments[0])].pk
        )
        leader = members.get(platform_user_id(platform, user.leader)) if user.leader else None
        assert member.manager_id == (leader.pk if leader else None), user
        assert IMIdentity.objects.filter(
            member=member, platform=platform, platform_user_id=platform_user_id(platform, user.key)
        ).exists()

    # A second run changes nothing.
    again = run_full(alice, connector)
    assert again.status == "succeeded"
    assert again.counts.get("members_created", 0) == 0
    assert again.counts.get("members_updated", 0) == 0
    assert again.counts.get("departments_created", 0) == 0
    assert again.counts.get("conflicts", 0) == 0
    assert not DirectoryConflict.objects.exists()
    assert Member.objects.filter(organization=alice.organization).count() == 61


@pytest.mark.parametrize("platform", PLATFORMS)
def test_rate_limits_are_retried_with_the_platforms_code(server, alice, platform):
    org = generate(users=30, departments=6)
    fake, connector = setup(server, alice, platform, org)
    fake.rate_limit_every = 2
    sync = run_full(alice, connector)
    assert sync.status == "succeeded", sync.error
    assert fake.rate_limited >= 1
    assert sync.counts["members_created"] == 30


@pytest.mark.parametrize(
    ("platform", "code"), [("feishu", "40004"), ("wecom", "60011"), ("dingtalk", "60011")]
)
def test_permission_error_fails_the_run_and_writes_nothing(server, alice, platform, code):
    org = generate(users=20, departments=5)
    fake, connector = setup(server, alice, platform, org)
    fake.forbidden = {3}
    sync = directory_sync_start(actor=member_actor(alice), connector=connector)
    with nothing_changes(Member, Department, IMIdentity, DirectoryUserLink, DirectoryConflict):
        directory_sync_execute(sync)
    sync.refresh_from_db()
    assert sync.status == "failed"
    assert sync.error_code == "permission_denied"
    assert sync.errors[0]["platform_code"] == code
    assert "permission" in sync.error


def test_rate_limit_outlasting_the_retries_fails_cleanly(server, alice):
    fake, connector = setup(server, alice, "wecom", generate(users=5, departments=2))
    fake.rate_limit_every = 1
    sync = directory_sync_start(actor=member_actor(alice), connector=connector)
    with nothing_changes(Member, Department, IMIdentity):
        directory_sync_execute(sync)
    sync.refresh_from_db()
    assert (sync.status, sync.error_code) == ("failed", "rate_limited")
    assert sync.errors[0]["platform_code"] == "45009"


def test_one_sync_at_a_time_and_outsiders_refused(server, alice, bob, charlie):
    from cadre.errors import Conflict, NotPermitted

    _, connector = setup(server, alice, "feishu", generate(users=2, departments=1))
    directory_sync_start(actor=member_actor(alice), connector=connector)
    with pytest.raises(Conflict), nothing_changes(DirectorySync):
        directory_sync_start(actor=member_actor(alice), connector=connector)
    with pytest.raises(NotPermitted), nothing_changes(DirectorySync):
        directory_sync_start(actor=member_actor(bob), connector=connector)


@pytest.mark.parametrize("platform", PLATFORMS)
def test_incremental_events_create_update_and_deactivate(server, alice, platform):
    org = generate(users=10, departments=3)
    _, connector = setup(server, alice, platform, org)
    run_full(alice, connector)
    # A new user, a changed title, a departure.
    from connectors.tests.fake_directory import FakeUser

    org.users.append(
        FakeUser(11, "User 11", "user11@corp.example", "+86 13800000011", "E00011", "Intern",
                 [1], leader=1)
    )  # fmt: skip
    contact_change_apply(connector, ContactChange("user_created", platform_user_id(platform, 11)))
    member = DirectoryUserLink.objects.get(
        connector=connector, platform_user_id=platform_user_id(platform, 11)
    ).member
    assert (member.display_name, member.title, member.email) == (
        "User 11",
        "Intern",
        "user11@corp.example",
    )
    assert member.manager.email == "user1@corp.example"

    org.users[4].title = "Staff engineer"
    contact_change_apply(connector, ContactChange("user_updated", platform_user_id(platform, 5)))
    assert Member.objects.get(email="user5@corp.example").title == "Staff engineer"

    departing = Member.objects.get(email="user6@corp.example")
    api_key_create(actor=member_actor(alice), name="k", scopes=["memory:read"])
    key = ApiKey.objects.get(revoked_at=None, name="k")
    key.created_by = departing
    key.save(update_fields=["created_by"])
    org.users = [u for u in org.users if u.key != 6]
    sync = contact_change_apply(
        connector, ContactChange("user_deleted", platform_user_id(platform, 6))
    )
    assert sync.counts["members_deactivated"] == 1
    departing.refresh_from_db()
    assert departing.status == "deactivated"
    key.refresh_from_db()
    assert key.revoked_at is not None  # the deactivation service revoked the member's keys


def test_departed_user_is_deactivated_by_the_full_sync(server, alice):
    org = generate(users=8, departments=2)
    _, connector = setup(server, alice, "dingtalk", org)
    run_full(alice, connector)
    org.users[2].active = False  # resigned
    org.users = [u for u in org.users if u.key != 4]  # removed
    sync = run_full(alice, connector)
    assert sync.counts["members_deactivated"] == 2
    assert set(Member.objects.filter(status="deactivated").values_list("email", flat=True)) == {
        "user3@corp.example",
        "user4@corp.example",
    }


def test_two_directory_users_with_one_email_are_queued_not_created(server, alice):
    org = generate(users=6, departments=2)
    org.users[1].email = org.users[2].email = "shared@corp.example"
    _, connector = setup(server, alice, "feishu", org)
    sync = run_full(alice, connector)
    assert sync.counts["members_created"] == 4
    conflicts = DirectoryConflict.objects.filter(connector=connector, kind="duplicate_email")
    assert sorted(conflicts.values_list("platform_user_id", flat=True)) == ["ou_2", "ou_3"]
    assert not Member.objects.filter(email="shared@corp.example").exists()

    # Resolved: one becomes a member without the e-mail; the other is dismissed.
    directory_conflict_resolve(
        actor=member_actor(alice), conflict=conflicts.get(platform_user_id="ou_2"),
        resolution="create",
    )  # fmt: skip
    created = DirectoryUserLink.objects.get(connector=connector, platform_user_id="ou_2").member
    assert (created.display_name, created.email) == ("User 2", "")
    directory_conflict_resolve(
        actor=member_actor(alice), conflict=conflicts.get(platform_user_id="ou_3"),
        resolution="dismiss",
    )  # fmt: skip
    assert not DirectoryConflict.objects.filter(connector=connector, status="open").exists()


def test_member_edited_locally_is_queued_not_overwritten(server, alice):
    org = generate(users=5, departments=2)
    _, connector = setup(server, alice, "wecom", org)
    run_full(alice, connector)
    member = Member.objects.get(email="user2@corp.example")
    member_update(actor=member_actor(alice), member=member, title="Team lead (set in Cadre)")
    org.users[1].title = "Principal"  # the directory changes it too
    org.users[1].mobile = "+86 13999999999"  # and a field Cadre left alone
    sync = run_full(alice, connector)
    member.refresh_from_db()
    assert member.title == "Team lead (set in Cadre)"  # not overwritten
    assert member.mobile == "+86 13999999999"  # the untouched field follows the directory
    conflict = DirectoryConflict.objects.get(connector=connector, kind="local_edit")
    assert conflict.fields == ["title"]
    assert conflict.local_values == {"title": "Team lead (set in Cadre)"}
    assert conflict.directory_values["title"] == "Principal"
    assert sync.counts["conflicts"] == 1

    # A local edit the directory did not change again stays without a new conflict.
    directory_conflict_resolve(
        actor=member_actor(alice), conflict=conflict, resolution="keep_local"
    )
    again = run_full(alice, connector)
    assert again.counts.get("conflicts", 0) == 0
    member.refresh_from_db()
    assert member.title == "Team lead (set in Cadre)"

    # Taking the directory's value applies it through the member service.
    org.users[1].title = "Distinguished"
    run_full(alice, connector)
    conflict = DirectoryConflict.objects.get(connector=connector, kind="local_edit", status="open")
    directory_conflict_resolve(
        actor=member_actor(alice), conflict=conflict, resolution="take_directory"
    )
    member.refresh_from_db()
    assert member.title == "Distinguished"


def test_existing_member_is_linked_by_email_not_duplicated(server, alice, make_member):
    existing = make_member(display_name="U. Three", email="user3@corp.example", title="")
    _, connector = setup(server, alice, "feishu", generate(users=4, departments=1))
    sync = run_full(alice, connector)
    assert sync.counts["members_created"] == 3
    assert sync.counts["members_linked"] == 1
    existing.refresh_from_db()
    assert existing.title == "Engineer"  # blank in Cadre: filled from the directory
    assert existing.display_name == "U. Three"  # set in Cadre: queued, not overwritten
    assert DirectoryConflict.objects.get(member=existing).fields == ["display_name"]


def test_departed_last_owner_is_queued_not_deactivated(server, alice):
    org = generate(users=3, departments=1)
    org.users[0].email = alice.email
    _, connector = setup(server, alice, "feishu", org)
    run_full(alice, connector)
    assert DirectoryUserLink.objects.get(connector=connector, member=alice)
    org.users[0].active = False
    sync = run_full(alice, connector)
    alice.refresh_from_db()
    assert alice.status == "active"
    assert DirectoryConflict.objects.filter(kind="deactivate_refused", member=alice).exists()
    assert sync.counts["conflicts"] >= 1


def _feishu_contact_event(event_id: str, event_type: str, open_id: str) -> dict:
    return {
        "schema": "2.0",
        "header": {"event_id": event_id, "token": "vt-dir", "event_type": event_type},
        "event": {"object": {"open_id": open_id, "name": "from the event"}},
    }


def test_feishu_contact_event_through_the_inbound_path(
    server, alice, celery_eager, django_capture_on_commit_callbacks
):
    import json

    from django.test import Client

    from connectors.inbound import drain
    from connectors.models import InboundEvent
    from connectors.tests.fake_directory import FakeUser

    org = generate(users=4, departments=1)
    fake = FakeDirectory(server, "feishu", org)
    connector = make_connector(
        alice, "feishu", {**CREDENTIALS["feishu"], "verification_token": "vt-dir"},
        fake.connector_settings(),
    )  # fmt: skip
    run_full(alice, connector)
    org.users.append(
        FakeUser(5, "User 5", "user5@corp.example", "+86 13800000005", "E00005", "New", [1], 1)
    )
    body = _feishu_contact_event("ev-c1", "contact.user.created_v3", "ou_5")
    answer = Client().post(connector.callback_path, json.dumps(body), "application/json")
    assert answer.status_code == 200
    # The platform redelivers: stored once.
    Client().post(connector.callback_path, json.dumps(body), "application/json")
    assert InboundEvent.objects.filter(connector=connector, event_key="ev-c1").count() == 1
    with django_capture_on_commit_callbacks(execute=True):
        drain.inbound_drain()
    assert InboundEvent.objects.get(event_key="ev-c1").status == "processed"
    member = DirectoryUserLink.objects.get(connector=connector, platform_user_id="ou_5").member
    # Read again from the platform: the API's record, not the event's copy.
    assert (member.display_name, member.title) == ("User 5", "New")
    assert DirectorySync.objects.filter(connector=connector, kind="event").count() == 1

    body = _feishu_contact_event("ev-c2", "contact.user.deleted_v3", "ou_2")
    Client().post(connector.callback_path, json.dumps(body), "application/json")
    with django_capture_on_commit_callbacks(execute=True):
        drain.inbound_drain()
    assert Member.objects.get(email="user2@corp.example").status == "deactivated"


def test_contact_events_of_a_connector_without_directory_sync_are_ignored(server, alice):
    import json

    from django.test import Client

    from connectors.inbound import drain
    from connectors.models import InboundEvent

    connector = make_connector(
        alice, "feishu", {**CREDENTIALS["feishu"], "verification_token": "vt-dir"}, {}
    )
    body = _feishu_contact_event("ev-x", "contact.user.created_v3", "ou_9")
    Client().post(connector.callback_path, json.dumps(body), "application/json")
    with nothing_changes(Member, IMIdentity, DirectorySync, audit=False):
        drain.inbound_drain()
    assert InboundEvent.objects.get(event_key="ev-x").status == "ignored"


def test_wecom_and_dingtalk_contact_events_parse_into_changes():
    from connectors.dingtalk.inbound import parse_callback
    from connectors.wecom.directory import contact_change

    change = contact_change(
        {"MsgType": "event", "Event": "change_contact", "ChangeType": "update_user", "UserID": "u7"}
    )
    assert (change.kind, change.object_id) == ("user_updated", "u7")
    event = parse_callback(
        {"EventType": "user_leave_org", "UserId": ["d1", "d2"], "TimeStamp": "1700000000000"}
    )
    assert event.kind == "event"
    assert event.context["directory"] == [
        {"kind": "user_deleted", "object_id": "d1"},
        {"kind": "user_deleted", "object_id": "d2"},
    ]


def test_a_conflict_whose_directory_record_is_incomplete_is_refused_not_a_500(alice):
    """A queued conflict without the directory's id or name (only a hand-edited row has one)
    is a 409 that changes nothing, not a TypeError."""
    from cadre.errors import Conflict

    connector = make_connector(alice, "feishu", {"app_id": "cli_x", "app_secret": "s"})
    conflict = DirectoryConflict.objects.create(
        organization=alice.organization,
        connector=connector,
        kind="local_edit",
        platform_user_id="ou_9",
        member=alice,
        fields=["title"],
    )
    with nothing_changes(conflict), pytest.raises(Conflict) as refused:
        directory_conflict_resolve(
            actor=member_actor(alice), conflict=conflict, resolution="keep_local"
        )
    assert refused.value.code == "incomplete_conflict"
