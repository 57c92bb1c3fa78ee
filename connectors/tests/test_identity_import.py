"""Identity import from CSV (plan and all-or-nothing apply) and the unmapped-user queue: a mapped
user's next message reaches the member's agent."""

from __future__ import annotations

import pytest
from django.test import Client

from cadre.agents.models import Run
from cadre.errors import Conflict, InvalidInput
from cadre.tenancy.actors import member_actor
from cadre.tenancy.models import IMIdentity, Member
from connectors import selectors
from connectors.base import identities
from connectors.directory.identity_import import (
    MAX_ROWS,
    identity_import_apply,
    identity_import_plan,
)
from connectors.models import InboundEvent, UnmappedIdentity
from connectors.tests.helpers import make_connector, webhook_post
from connectors.tests.test_end_to_end import bob_agent  # noqa: F401 - fixture

pytestmark = pytest.mark.django_db


@pytest.fixture
def slack(alice):
    return make_connector(alice, "slack", {"bot_token": "xoxb-1", "signing_secret": "s"})


def _plan(actor_member, connector, text: str):
    return identity_import_plan(
        actor=member_actor(actor_member), connector=connector, data=text.encode()
    )


def test_members_are_found_by_email_employee_number_or_mobile(alice, make_member, slack):
    by_email = make_member(email="Dana@Acme.test")
    by_number = make_member(employee_no="E-42")
    by_mobile = make_member(mobile="+86 138 0013 8000")
    text = (
        "\ufeffPlatform User ID,Email,Employee ID,Mobile,Display Name\n"
        "U01,dana@acme.test,,,Dana\n"
        "U02,,E-42,,\n"
        "U03,,,13800138000,\n"
        "\n"
    )
    plan = _plan(alice, slack, text)
    assert plan.valid, plan.error_details()
    assert [(row.line, row.member, row.matched_by) for row in plan.rows] == [
        (2, by_email, "email"),
        (3, by_number, "employee_no"),
        (4, by_mobile, "mobile"),
    ]
    result = identity_import_apply(actor=member_actor(alice), connector=slack, data=text.encode())
    assert result.created == 3
    assert IMIdentity.objects.get(platform_user_id="U01").display_name == "Dana"
    assert identities.identity_resolve(slack, platform_user_id="U03") == by_mobile


def test_every_bad_row_is_reported_with_its_line(alice, bob, make_member, slack):
    make_member(employee_no="E1", display_name="Twin A", email="a@acme.test")
    make_member(employee_no="E1", display_name="Twin B", email="b@acme.test")
    make_member(employee_no="E-solo", email="solo@acme.test")
    gone = make_member(email="gone@acme.test", status=Member.Status.DEACTIVATED)
    other = make_member(email="other@acme.test")
    IMIdentity.objects.create(
        organization=alice.organization, member=other, platform="slack", platform_user_id="U9"
    )
    text = (
        "platform_user_id,member_email,employee_no\n"
        "U1,bob@acme.test,\n"  # 2: fine
        ",bob@acme.test,\n"  # 3: no platform user id
        "U4,,E1\n"  # 4: two members share E1
        "U5,gone@acme.test,\n"  # 5: deactivated
        "U1,bob@acme.test,\n"  # 6: duplicate of line 2
        "U9,bob@acme.test,\n"  # 7: already mapped to someone else
        "U8,bob@acme.test,E-solo\n"  # 8: the columns name two different members
        "U10,,\n"  # 9: no member key
    )
    plan = _plan(alice, slack, text)
    details = plan.error_details()
    assert set(details) == {f"line {n}" for n in (3, 4, 5, 6, 7, 8, 9)}
    assert details["line 3"] == ["platform_user_id is empty."]
    assert "Several members have employee number E1" in details["line 4"][0]
    assert details["line 5"] == [f"{gone.display_name} is deactivated."]
    assert details["line 6"] == ["The same platform_user_id is on line 2."]
    assert details["line 7"] == [f"Already mapped to {other.display_name}."]
    assert details["line 8"] == ["The member columns point at different members."]
    assert details["line 9"] == ["Give the member's email, employee number or mobile."]
    with pytest.raises(InvalidInput) as raised:
        identity_import_apply(actor=member_actor(alice), connector=slack, data=text.encode())
    assert raised.value.details == details
    assert list(IMIdentity.objects.values_list("platform_user_id", flat=True)) == ["U9"]


def test_reimporting_the_same_file_changes_nothing(alice, bob, slack):
    text = "platform_user_id,member_email\nU1,bob@acme.test\n"
    actor = member_actor(alice)
    assert identity_import_apply(actor=actor, connector=slack, data=text.encode()).created == 1
    again = identity_import_apply(actor=actor, connector=slack, data=text.encode())
    assert (again.created, again.unchanged) == (0, 1)
    assert IMIdentity.objects.count() == 1


def test_file_level_problems(alice, slack):
    assert _plan(alice, slack, "").file_errors == ["The file is empty."]
    assert _plan(alice, slack, "platform_user_id,member_email\n").file_errors == [
        "The file has a header but no rows."
    ]
    latin = identity_import_plan(
        actor=member_actor(alice),
        connector=slack,
        data="platform_user_id,member_email\nU1,josé@acme.test\n".encode("latin-1"),
    )
    assert "not UTF-8" in latin.file_errors[0]
    too_many = "platform_user_id,member_email\n" + "U,x@acme.test\n" * (MAX_ROWS + 1)
    assert f"more than {MAX_ROWS} rows" in _plan(alice, slack, too_many).file_errors[0]


def test_members_outside_the_organization_are_not_found(alice, charlie, slack):
    plan = _plan(alice, slack, "platform_user_id,member_email\nU1,charlie@globex.test\n")
    assert plan.error_details() == {"line 2": ["No member with email charlie@globex.test."]}


def test_an_employee_may_not_import(bob, slack):
    from cadre.errors import NotPermitted

    with pytest.raises(NotPermitted):
        _plan(bob, slack, "platform_user_id,member_email\nU1,bob@acme.test\n")


def test_mapping_conflicts_with_an_account_already_mapped_to_someone_else(
    alice, bob, make_member, slack
):
    carol = make_member(display_name="Carol")
    IMIdentity.objects.create(
        organization=alice.organization, member=carol, platform="slack", platform_user_id="U7"
    )
    row = UnmappedIdentity.objects.create(
        organization=alice.organization, connector=slack, platform_user_id="U7"
    )
    with pytest.raises(Conflict):
        identities.unmapped_identity_map(actor=member_actor(alice), unmapped=row, member=bob)
    row.refresh_from_db()
    assert row.resolved_at is None


def test_a_mapped_user_next_message_reaches_the_members_agent(
    alice,
    bob,
    bob_agent,  # noqa: F811 - the imported fixture
    fake_api,
    celery_eager,
    django_capture_on_commit_callbacks,
):
    fake_api.route("POST", "/callback", lambda request: (200, {"ok": True}))
    connector = make_connector(
        alice,
        "webhook",
        {"signing_secret": "whsec-test"},
        {"callback_url": f"{fake_api.url}/callback"},
    )

    def message(event_id: str):
        with django_capture_on_commit_callbacks(execute=True):
            response = webhook_post(
                Client(),
                connector,
                {
                    "event_id": event_id,
                    "type": "message",
                    "text": "hello",
                    "user": {"id": "u-newcomer", "name": "Newcomer"},
                    "chat": {"id": "chat-1", "type": "p2p"},
                },
            )
        assert response.status_code == 200
        return InboundEvent.objects.get(connector=connector, event_key=event_id)

    assert message("evt-1").status == "unmapped"
    queued = UnmappedIdentity.objects.get(connector=connector)
    assert list(selectors.unmapped_queue(member_actor(alice), connector)) == [queued]

    identities.unmapped_identity_map(actor=member_actor(alice), unmapped=queued, member=bob)
    assert not selectors.unmapped_queue(member_actor(alice), connector).exists()

    event = message("evt-2")
    assert event.status == "processed" and event.member_id == bob.pk
    run = Run.objects.get(pk=int(event.run_ref))
    assert run.agent_id == bob_agent.pk
