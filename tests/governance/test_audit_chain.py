"""The audit hash chain: events are sealed into it after commit; tampering is found and refused."""

from __future__ import annotations

import itertools
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import DatabaseError, connection, transaction

from cadre.governance import audit
from cadre.governance.models import AppendOnlyError, AuditChainHead, AuditEvent
from cadre.tenancy.actors import member_actor, system_actor
from tests.factories import MemberFactory


def _record_many(organization, count: int, action: str = "test.event") -> list[AuditEvent]:
    actor = system_actor(organization)
    return [
        audit.record(actor=actor, action=action, target=("thing", n), after={"n": n})
        for n in range(count)
    ]


def _sealed_many(organization, count: int, action: str = "test.event") -> list[AuditEvent]:
    """`count` events recorded and sealed, as stored (chain order)."""
    events = _record_many(organization, count, action)
    audit.seal(organization=organization)
    stored = AuditEvent.objects.in_bulk([event.pk for event in events])
    return [stored[event.pk] for event in events]


def _tamper(sql: str, params: list) -> None:
    """Run SQL past the append-only trigger, as a database superuser could."""
    with connection.cursor() as cursor:
        cursor.execute("SET session_replication_role = replica")
        try:
            cursor.execute(sql, params)
        finally:
            cursor.execute("SET session_replication_role = DEFAULT")


def _verify(slug: str, *options: str) -> str:
    out = StringIO()
    call_command("audit_verify", "--org", slug, *options, stdout=out)
    return out.getvalue()


def _verify_broken(slug: str) -> str:
    out = StringIO()
    with pytest.raises(CommandError):
        call_command("audit_verify", "--org", slug, stdout=out)
    return out.getvalue()


def _seal_sql(event_id: int, sequence: int = 1, hash_: str = "a" * 64) -> tuple[str, list]:
    return (
        "UPDATE governance_auditevent SET sequence = %s, prev_hash = %s, hash = %s WHERE id = %s",
        [sequence, audit.GENESIS_HASH, hash_, event_id],
    )


def _refused(sql: str, params: list) -> None:
    with (
        pytest.raises(DatabaseError, match="append-only"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute(sql, params)


def test_events_are_recorded_unsealed_and_sealed_into_a_contiguous_chain(org_a):
    recorded = _record_many(org_a, 5)
    assert all((e.sequence, e.prev_hash, e.hash) == (None, None, None) for e in recorded)
    assert AuditEvent.objects.filter(organization=org_a).unsealed().count() == 5
    assert audit.seal(organization=org_a) == 5
    events = list(AuditEvent.objects.filter(organization=org_a).order_by("sequence"))
    assert [e.pk for e in events] == [e.pk for e in recorded]  # sealed in insertion order
    assert [e.sequence for e in events] == [1, 2, 3, 4, 5]
    assert events[0].prev_hash == audit.GENESIS_HASH
    for previous, event in itertools.pairwise(events):
        assert event.prev_hash == previous.hash
    head = AuditChainHead.objects.get(organization=org_a)
    assert (head.sequence, head.hash) == (5, events[-1].hash)
    assert (
        audit.verify_chain(org_a).items()
        >= {"ok": True, "checked": 5, "unsealed": 0, "broken": None}.items()
    )
    assert "OK, 5 events verified" in _verify("acme")


def test_sealing_again_changes_nothing_and_later_events_extend_the_chain(org_a):
    first = _sealed_many(org_a, 3)
    assert audit.seal(organization=org_a) == 0
    later = _sealed_many(org_a, 2)
    assert [e.sequence for e in later] == [4, 5]
    assert later[0].prev_hash == first[-1].hash
    assert audit.verify_chain(org_a)["checked"] == 5


def test_sealing_in_small_batches_makes_the_same_chain(org_a):
    recorded = _record_many(org_a, 7)
    assert audit.seal(organization=org_a, batch_size=3) == 7
    stored = AuditEvent.objects.in_bulk([e.pk for e in recorded])
    assert [stored[e.pk].sequence for e in recorded] == list(range(1, 8))
    assert audit.verify_chain(org_a)["ok"]


def test_each_organization_has_its_own_chain(org_a, org_b):
    _record_many(org_a, 3)
    other = _record_many(org_b, 2)
    assert audit.seal() == 5  # every organization with unsealed events
    stored = AuditEvent.objects.in_bulk([e.pk for e in other])
    assert [stored[e.pk].sequence for e in other] == [1, 2]
    assert stored[other[0].pk].prev_hash == audit.GENESIS_HASH
    assert audit.verify_chain(org_a)["checked"] == 3
    assert audit.verify_chain(org_b)["checked"] == 2


def test_verify_counts_unsealed_events_without_checking_them(org_a):
    _sealed_many(org_a, 3)
    _record_many(org_a, 2)
    assert (
        audit.verify_chain(org_a).items()
        >= {"ok": True, "checked": 3, "unsealed": 2, "broken": None}.items()
    )
    assert "OK, 3 events verified (2 newer events not sealed yet)" in _verify("acme")
    assert "OK, 5 events verified;" in _verify("acme", "--seal")


def test_chain_order_lists_unsealed_events_after_sealed_ones_in_insertion_order(org_a):
    sealed = _sealed_many(org_a, 2)
    pending = _record_many(org_a, 3)
    in_order = [e.pk for e in sealed] + [e.pk for e in pending]
    events = AuditEvent.objects.filter(organization=org_a)
    assert list(events.order_by("sequence").values_list("pk", flat=True)) == in_order
    assert list(events.order_by("-sequence").values_list("pk", flat=True)) == in_order[::-1]
    assert [e.pk for e in events] == in_order[::-1]  # default: newest first
    assert events.order_by("sequence").last().pk == pending[-1].pk
    assert events.latest("sequence").pk == pending[-1].pk
    assert events.earliest("sequence").pk == sealed[0].pk
    with pytest.raises(AuditEvent.DoesNotExist):
        events.filter(action="nothing").latest("sequence")
    assert str(events.order_by("sequence").first()) == "#1 test.event"
    assert str(events.order_by("-sequence").first()) == "(unsealed) test.event"


def test_audit_api_lists_unsealed_events_first_with_empty_chain_fields(org_a, alice, client_for):
    audit.record(actor=member_actor(alice), action="test.sealed")
    audit.seal(organization=org_a)
    audit.record(actor=member_actor(alice), action="test.waiting")
    rows = client_for(alice).get("/api/v1/audit-events/").json()["results"]
    waiting, sealed = rows[0], rows[1]
    assert (waiting["action"], waiting["sequence"], waiting["hash"]) == ("test.waiting", None, None)
    assert (sealed["action"], sealed["sequence"]) == ("test.sealed", 1)


def test_audit_seal_command_seals_one_or_every_organization(org_a, org_b):
    _record_many(org_a, 2)
    _record_many(org_b, 3)
    out = StringIO()
    call_command("audit_seal", "--org", "acme", stdout=out)
    assert out.getvalue().strip() == "sealed 2 events"
    assert AuditEvent.objects.filter(organization=org_b).unsealed().count() == 3
    out = StringIO()
    call_command("audit_seal", "--all", stdout=out)
    assert out.getvalue().strip() == "sealed 3 events"
    assert not AuditEvent.objects.unsealed().filter(organization__in=[org_a, org_b]).exists()
    with pytest.raises(CommandError, match="no organization"):
        call_command("audit_seal", "--org", "nope")
    with pytest.raises(CommandError):
        call_command("audit_seal")


def test_editing_a_row_is_detected_at_its_position(org_a):
    events = _sealed_many(org_a, 5)
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
    events = _sealed_many(org_a, 3)
    _tamper(f"UPDATE governance_auditevent SET {column} = %s WHERE id = %s", [value, events[1].pk])
    result = audit.verify_chain(org_a)
    assert not result["ok"] and result["broken"]["position"] == 2


def test_rewriting_a_row_and_its_hash_breaks_the_next_link(org_a):
    events = _sealed_many(org_a, 4)
    _tamper("UPDATE governance_auditevent SET hash = %s WHERE id = %s", ["f" * 64, events[1].pk])
    result = audit.verify_chain(org_a)
    assert not result["ok"] and result["broken"]["position"] == 2


def test_deleting_a_middle_row_is_detected_at_its_position(org_a):
    events = _sealed_many(org_a, 5)
    _tamper("DELETE FROM governance_auditevent WHERE id = %s", [events[1].pk])
    result = audit.verify_chain(org_a)
    assert not result["ok"]
    assert result["broken"]["position"] == 2
    assert "missing" in result["broken"]["problem"]
    assert "BROKEN at position 2" in _verify_broken("acme")


def test_deleting_the_last_row_is_detected_by_the_chain_head(org_a):
    events = _sealed_many(org_a, 3)
    _tamper("DELETE FROM governance_auditevent WHERE id = %s", [events[2].pk])
    result = audit.verify_chain(org_a)
    assert not result["ok"]
    assert result["broken"]["position"] == 3
    assert "BROKEN at position 3" in _verify_broken("acme")


def test_deleting_the_first_row_is_detected_at_position_one(org_a):
    events = _sealed_many(org_a, 3)
    _tamper("DELETE FROM governance_auditevent WHERE id = %s", [events[0].pk])
    assert audit.verify_chain(org_a)["broken"]["position"] == 1


def test_audit_verify_reports_only_the_broken_organization(org_a, org_b):
    events = _sealed_many(org_a, 2)
    _sealed_many(org_b, 2)
    _tamper("UPDATE governance_auditevent SET reason = 'x' WHERE id = %s", [events[0].pk])
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
        "UPDATE governance_auditevent SET hash = repeat('b', 64) WHERE id = %s",
        "UPDATE governance_auditevent SET sequence = NULL, prev_hash = NULL, hash = NULL "
        "WHERE id = %s",
        "DELETE FROM governance_auditevent WHERE id = %s",
    ],
)
def test_database_trigger_refuses_raw_update_and_delete_of_sealed_events(org_a, sql):
    event = _sealed_many(org_a, 1)[0]
    _refused(sql, [event.pk])
    stored = AuditEvent.objects.get(pk=event.pk)
    assert (stored.action, stored.sequence, stored.hash) == ("test.event", 1, event.hash)


def test_database_trigger_lets_an_unsealed_event_be_sealed_once(org_a):
    event = _record_many(org_a, 1)[0]
    with connection.cursor() as cursor:
        cursor.execute(*_seal_sql(event.pk))
    assert AuditEvent.objects.get(pk=event.pk).hash == "a" * 64
    _refused(*_seal_sql(event.pk, sequence=2, hash_="c" * 64))  # a second seal
    assert AuditEvent.objects.get(pk=event.pk).hash == "a" * 64


@pytest.mark.parametrize(
    "sql",
    [
        # sealing that also changes the content
        "UPDATE governance_auditevent SET sequence = 1, prev_hash = repeat('0', 64), "
        "hash = repeat('a', 64), reason = 'rewritten' WHERE id = %s",
        "UPDATE governance_auditevent SET sequence = 1, prev_hash = repeat('0', 64), "
        "hash = repeat('a', 64), created_at = now() - interval '1 day' WHERE id = %s",
        # half a seal
        "UPDATE governance_auditevent SET sequence = 1 WHERE id = %s",
        # plain edits and deletion while waiting for the seal
        "UPDATE governance_auditevent SET action = 'changed' WHERE id = %s",
        "UPDATE governance_auditevent SET changes = '{}' WHERE id = %s",
        "DELETE FROM governance_auditevent WHERE id = %s",
    ],
)
def test_database_trigger_refuses_any_other_change_to_unsealed_events(org_a, sql):
    event = _record_many(org_a, 1)[0]
    _refused(sql, [event.pk])
    stored = AuditEvent.objects.get(pk=event.pk)
    assert (stored.action, stored.reason, stored.sequence) == ("test.event", "", None)
    assert stored.changes == {"after": {"n": 0}}


def test_ipv6_addresses_survive_the_round_trip_through_the_hash(org_a):
    from cadre.observability import RequestContext, _request_context

    for address in ("0:0:0:0:0:0:0:1", "::ffff:127.0.0.1", "2001:DB8::1", "not-an-ip"):
        token = _request_context.set(RequestContext(request_id="r" * 16, ip=address))
        try:
            audit.record(actor=system_actor(org_a), action="test.ip")
        finally:
            _request_context.reset(token)
    assert audit.seal(organization=org_a) == 4
    assert (
        audit.verify_chain(org_a).items()
        >= {"ok": True, "checked": 4, "unsealed": 0, "broken": None}.items()
    )


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
    audit.seal(organization=org_a)
    assert audit.verify_chain(org_a)["checked"] == 1


def test_member_actor_events_verify(org_a):
    member = MemberFactory(organization=org_a, roles=["owner"])
    audit.record(actor=member_actor(member), action="test.member", target=member)
    audit.seal(organization=org_a)
    assert (
        audit.verify_chain(org_a).items()
        >= {"ok": True, "checked": 1, "unsealed": 0, "broken": None}.items()
    )


def test_a_chain_that_should_be_anchored_but_has_no_digest_fails(org_a, org_b, anchor_dir):
    """The digest log lost, or on another machine: events older than three digest intervals
    and no signed digest for them is a failure that says why, not an OK."""
    _sealed_many(org_b, 2)
    assert "no signed digest yet" in _verify(org_b.slug)  # young: beat has not run yet

    events = _record_many(org_a, 3)
    _tamper(  # written an hour ago: beat (every 5 minutes) should have signed them since
        "UPDATE governance_auditevent SET created_at = now() - interval '1 hour' "
        "WHERE id = ANY(%s)",
        [[event.pk for event in events]],
    )
    audit.seal(organization=org_a)
    report = _verify_broken(org_a.slug)
    assert "UNANCHORED, 3 events verified but no signed digest anchors them" in report
    assert str(anchor_dir) in report

    call_command("audit_digest", stdout=StringIO())  # signed: anchored again
    assert "1 signed digest(s) match" in _verify(org_a.slug)
