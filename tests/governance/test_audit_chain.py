"""The audit hash chain: concurrent writers never fork it; tampering is found and refused."""

from __future__ import annotations

import itertools
import threading

import pytest
from django.core.management import CommandError, call_command
from django.db import DatabaseError, connection, connections, transaction

from cadre.governance import audit
from cadre.governance.models import AppendOnlyError, AuditChainHead, AuditEvent
from cadre.tenancy.actors import member_actor, system_actor
from tests.factories import MemberFactory, OrganizationFactory


def _record_many(organization, count: int, action: str = "test.event") -> list[AuditEvent]:
    actor = system_actor(organization)
    return [
        audit.record(actor=actor, action=action, target=("thing", n), after={"n": n})
        for n in range(count)
    ]


def _tamper(sql: str, params: list) -> None:
    """Run SQL past the append-only trigger, as a database superuser could."""
    with connection.cursor() as cursor:
        cursor.execute("SET session_replication_role = replica")
        try:
            cursor.execute(sql, params)
        finally:
            cursor.execute("SET session_replication_role = DEFAULT")


def _verify(slug: str) -> str:
    from io import StringIO

    out = StringIO()
    call_command("audit_verify", "--org", slug, stdout=out)
    return out.getvalue()


def _verify_broken(slug: str) -> str:
    from io import StringIO

    out = StringIO()
    with pytest.raises(CommandError):
        call_command("audit_verify", "--org", slug, stdout=out)
    return out.getvalue()


def test_events_form_a_contiguous_hash_chain(org_a):
    events = _record_many(org_a, 5)
    assert [e.sequence for e in events] == [1, 2, 3, 4, 5]
    assert events[0].prev_hash == audit.GENESIS_HASH
    for previous, event in itertools.pairwise(events):
        assert event.prev_hash == previous.hash
    assert audit.verify_chain(org_a) == {"ok": True, "checked": 5, "broken": None}
    assert "OK, 5 events verified" in _verify("acme")


def test_each_organization_has_its_own_chain(org_a, org_b):
    _record_many(org_a, 3)
    other = _record_many(org_b, 2)
    assert [e.sequence for e in other] == [1, 2]
    assert audit.verify_chain(org_a)["ok"] and audit.verify_chain(org_b)["ok"]


@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_never_fork_the_chain():
    organization = OrganizationFactory(slug="busy")
    threads_count, per_thread = 8, 6
    barrier = threading.Barrier(threads_count)
    errors: list[BaseException] = []

    def writer(index: int) -> None:
        try:
            barrier.wait(timeout=30)
            actor = system_actor(organization, label=f"writer {index}")
            for n in range(per_thread):
                with transaction.atomic():
                    audit.record(
                        actor=actor, action="test.concurrent", target=("thing", f"{index}-{n}")
                    )
        except BaseException as error:  # surfaced below
            errors.append(error)
        finally:
            connections.close_all()  # each thread has its own connection: close it

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(threads_count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    total = threads_count * per_thread
    sequences = list(
        AuditEvent.objects.filter(organization=organization)
        .order_by("sequence")
        .values_list("sequence", flat=True)
    )
    assert sequences == list(range(1, total + 1))
    assert audit.verify_chain(organization) == {"ok": True, "checked": total, "broken": None}
    head = AuditChainHead.objects.get(organization=organization)
    assert head.sequence == total
    labels = set(
        AuditEvent.objects.filter(organization=organization).values_list("actor_label", flat=True)
    )
    assert len(labels) == threads_count


def test_editing_a_row_is_detected_at_its_position(org_a):
    events = _record_many(org_a, 5)
    _tamper(
        "UPDATE governance_auditevent SET changes = %s WHERE id = %s",
        ['{"after": {"n": 999}}', events[2].pk],
    )
    result = audit.verify_chain(org_a)
    assert not result["ok"]
    assert result["broken"]["position"] == 3
    assert result["broken"]["event_id"] == events[2].pk
    assert "edited" in result["broken"]["problem"]
    assert result["checked"] == 2
    assert "BROKEN at position 3" in _verify_broken("acme")


@pytest.mark.parametrize(
    "column, value",
    [
        ("action", "test.harmless"),
        ("actor_id", "42"),
        ("reason", "nothing to see"),
        ("ip", "10.0.0.1"),
    ],
)
def test_editing_any_hashed_column_is_detected(org_a, column, value):
    events = _record_many(org_a, 3)
    _tamper(f"UPDATE governance_auditevent SET {column} = %s WHERE id = %s", [value, events[1].pk])
    result = audit.verify_chain(org_a)
    assert not result["ok"] and result["broken"]["position"] == 2


def test_rewriting_a_row_and_its_hash_breaks_the_next_link(org_a):
    events = _record_many(org_a, 4)
    _tamper("UPDATE governance_auditevent SET hash = %s WHERE id = %s", ["f" * 64, events[1].pk])
    result = audit.verify_chain(org_a)
    assert not result["ok"] and result["broken"]["position"] == 2


def test_deleting_a_middle_row_is_detected_at_its_position(org_a):
    events = _record_many(org_a, 5)
    _tamper("DELETE FROM governance_auditevent WHERE id = %s", [events[1].pk])
    result = audit.verify_chain(org_a)
    assert not result["ok"]
    assert result["broken"]["position"] == 2
    assert "missing" in result["broken"]["problem"]
    assert "BROKEN at position 2" in _verify_broken("acme")


def test_deleting_the_last_row_is_detected_by_the_chain_head(org_a):
    events = _record_many(org_a, 3)
    _tamper("DELETE FROM governance_auditevent WHERE id = %s", [events[2].pk])
    result = audit.verify_chain(org_a)
    assert not result["ok"]
    assert result["broken"]["position"] == 3
    assert "BROKEN at position 3" in _verify_broken("acme")


def test_deleting_the_first_row_is_detected_at_position_one(org_a):
    events = _record_many(org_a, 3)
    _tamper("DELETE FROM governance_auditevent WHERE id = %s", [events[0].pk])
    assert audit.verify_chain(org_a)["broken"]["position"] == 1


def test_audit_verify_reports_only_the_broken_organization(org_a, org_b):
    events = _record_many(org_a, 2)
    _record_many(org_b, 2)
    _tamper("UPDATE governance_auditevent SET reason = 'x' WHERE id = %s", [events[0].pk])
    from io import StringIO

    out = StringIO()
    with pytest.raises(CommandError):
        call_command("audit_verify", "--all", stdout=out)
    assert "acme: BROKEN at position 1" in out.getvalue()
    assert "globex: OK, 2 events verified" in out.getvalue()


def test_audit_verify_needs_an_existing_org(db):
    with pytest.raises(CommandError):
        call_command("audit_verify")
    with pytest.raises(CommandError, match="no organization"):
        call_command("audit_verify", "--org", "nope")


def test_orm_refuses_to_update_or_delete_events(org_a):
    event = _record_many(org_a, 1)[0]
    event.action = "changed"
    with pytest.raises(AppendOnlyError):
        event.save()
    with pytest.raises(AppendOnlyError):
        event.delete()
    with pytest.raises(AppendOnlyError):
        AuditEvent.objects.filter(pk=event.pk).update(action="changed")
    with pytest.raises(AppendOnlyError):
        AuditEvent.objects.filter(pk=event.pk).delete()
    with pytest.raises(AppendOnlyError):
        AuditEvent.objects.bulk_update([event], ["action"])
    assert AuditEvent.objects.get(pk=event.pk).action == "test.event"


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE governance_auditevent SET action = 'changed' WHERE id = %s",
        "DELETE FROM governance_auditevent WHERE id = %s",
    ],
)
def test_database_trigger_refuses_raw_update_and_delete(org_a, sql):
    event = _record_many(org_a, 1)[0]
    with (
        pytest.raises(DatabaseError, match="append-only"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute(sql, [event.pk])
    assert AuditEvent.objects.get(pk=event.pk).action == "test.event"


def test_ipv6_addresses_survive_the_round_trip_through_the_hash(org_a):
    from cadre.observability import RequestContext, _request_context

    for address in ("0:0:0:0:0:0:0:1", "::ffff:127.0.0.1", "2001:DB8::1", "not-an-ip"):
        token = _request_context.set(RequestContext(request_id="r" * 16, ip=address))
        try:
            audit.record(actor=system_actor(org_a), action="test.ip")
        finally:
            _request_context.reset(token)
    assert audit.verify_chain(org_a)["ok"]


def test_nul_characters_in_request_context_do_not_break_recording(org_a):
    from cadre.observability import RequestContext, _request_context

    token = _request_context.set(
        RequestContext(request_id="abc\x00defghij", ip="127.0.0.1", user_agent="curl\x00/8")
    )
    try:
        event = audit.record(actor=system_actor(org_a), action="test.nul", after={"text": "a\x00b"})
    finally:
        _request_context.reset(token)
    assert "\x00" not in event.request_id + event.user_agent
    assert audit.verify_chain(org_a)["ok"]


def test_member_actor_events_verify(org_a):
    member = MemberFactory(organization=org_a, roles=["owner"])
    audit.record(actor=member_actor(member), action="test.member", target=member)
    assert audit.verify_chain(org_a)["ok"]
