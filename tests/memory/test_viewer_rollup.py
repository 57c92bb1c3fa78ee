"""The per-day usage rollup (MemoryUsageDay, kept by triggers on the context record items), each
memory's last send (MemoryLastSent, kept from the memories and that rollup) and the two-query
quality counts give exactly the numbers of the first build's direct queries, and the rollups
stay exact after new records, feedback, status changes and deletes."""

from __future__ import annotations

from datetime import UTC, timedelta

import pytest
from django.db.models import Count, Max, Q
from django.db.models.functions import Trunc
from django.utils import timezone

from cadre.agents import ratings as ports
from cadre.memory import services
from cadre.memory.models import (
    ContextRecord,
    ContextRecordItem,
    Memory,
    MemoryLastSent,
    MemoryUsageDay,
)
from cadre.viewer import heatmap, quality, reach
from tests.conftest import actor_for
from tests.memory.test_viewer import _add, _call, known  # noqa: F401 - the fixture

SENT = ContextRecordItem.Status.SENT


def _from_items() -> dict:
    """The rollup computed from the items, as the heatmap's direct queries count them."""
    sent = Q(status=SENT, context__kind=ContextRecord.Kind.MODEL_CALL)
    rows = (
        ContextRecordItem.objects.annotate(day=Trunc("context__created_at", "day", tzinfo=UTC))
        .values("memory_id", "day")
        .annotate(
            retrieved=Count("pk"),
            sent=Count("pk", filter=sent),
            last_used=Max("context__created_at"),
            last_sent=Max("context__created_at", filter=sent),
        )
        .order_by()
    )
    return {
        (row["memory_id"], row["day"].date()): (
            row["retrieved"],
            row["sent"],
            row["last_used"],
            row["last_sent"],
        )
        for row in rows
    }


def _last_sent_from_rows() -> dict:
    """Each memory's copied columns and newest send to a runtime model call, from the rows."""
    sent = ContextRecordItem.objects.filter(
        status=SENT, context__kind=ContextRecord.Kind.MODEL_CALL
    )
    newest = dict(sent.values_list("memory_id").annotate(at=Max("context__created_at")).order_by())
    return {
        m.pk: (
            m.organization_id,
            m.scope,
            m.scope_key,
            m.subject_id or 0,
            m.kind,
            m.status,
            m.created_at,
            newest.get(m.pk),
        )
        for m in Memory.objects.all()
    }


def _last_sent_kept() -> dict:
    return {
        r.memory_id: (
            r.organization_id,
            r.scope,
            r.scope_key,
            r.subject_id,
            r.kind,
            r.status,
            r.created_at,
            r.last_sent,
        )
        for r in MemoryLastSent.objects.all()
    }


def _assert_kept() -> None:
    assert _rollup() == _from_items()
    assert _last_sent_kept() == _last_sent_from_rows()


def _rollup() -> dict:
    return {
        (row.memory_id, row.day): (row.retrieved, row.sent, row.last_used, row.last_sent)
        for row in MemoryUsageDay.objects.all()
    }


def _both(function, actor, **options):
    """(direct, rollup) results of a viewer selector."""
    reach.DIRECT = True
    try:
        direct = function(actor, **options)
    finally:
        reach.DIRECT = False
    return direct, function(actor, **options)


@pytest.fixture
def rated():
    ratings = {"test": lambda org, runs: {"101": "success", "102": "failure", "103": "success"}}
    with ports.RUN_OUTCOMES.overridden(ratings):
        yield


@pytest.mark.parametrize("who", ["alice", "bob"])
@pytest.mark.parametrize("unused_days", [1, 30])
def test_rollup_heatmap_equals_the_direct_one(known, alice, bob, who, unused_days):  # noqa: F811
    actor = actor_for({"alice": alice, "bob": bob}[who])
    direct, rolled = _both(heatmap.memory_heatmap, actor, unused_days=unused_days)
    assert rolled == direct
    assert rolled["hottest"]  # not two empty answers
    if unused_days == 1:  # the two-day-old memories not sent since yesterday
        assert rolled["unused"]["count"] > 0 and rolled["unused"]["memories"]
    scoped, rolled_scoped = _both(
        heatmap.memory_heatmap, actor, scope_keys=[f"user:{bob.pk}"], kinds=["preference"]
    )
    assert rolled_scoped == scoped


@pytest.mark.parametrize("who", ["alice", "bob"])
def test_two_query_quality_equals_the_direct_one(known, alice, bob, rated, who):  # noqa: F811
    actor = actor_for({"alice": alice, "bob": bob}[who])
    direct, counted = _both(quality.memory_quality, actor)
    assert counted == direct
    values = {f["key"]: f["value"] for f in counted["figures"]}
    assert values["exact_duplicate_rate"] == round(1 / 6, 4) or who == "alice"
    for days in (1, 7):
        assert (
            _both(quality.memory_quality, actor, days=days)[1]
            == (_both(quality.memory_quality, actor, days=days)[0])
        )


def test_rollup_follows_new_records_feedback_updates_and_deletes(
    known,  # noqa: F811
    alice,
    bob,
):
    org = alice.organization
    assert _rollup() == _from_items() and _rollup()
    _assert_kept()
    assert any(row[-1] for row in _last_sent_kept().values())  # sends, not all None
    actor = actor_for(bob)
    now = timezone.now()
    # A new call (one item at a time, as the ORM writes them) and a bulk write of items.
    _call(org, "104", at=now, items=[(known["office"], SENT), (known["tea"], SENT)])
    record = ContextRecord.objects.create(
        organization=org, kind=ContextRecord.Kind.MODEL_CALL, run_id="105", created_at=now
    )
    ContextRecordItem.objects.bulk_create(
        ContextRecordItem(
            context=record, memory=memory, memory_version=1, rank=rank, score=1.0, status=SENT
        )
        for rank, memory in enumerate([known["rule"], known["office"]], start=1)
    )
    _assert_kept()
    assert _both(heatmap.memory_heatmap, actor)[0] == _both(heatmap.memory_heatmap, actor)[1]
    # Feedback: rating the new runs changes the recall figure the same way on both paths.
    ratings = {"test": lambda org, runs: {"104": "success", "105": "failure"}}
    with ports.RUN_OUTCOMES.overridden(ratings):
        direct, counted = _both(quality.memory_quality, actor)
    assert counted == direct
    recall = {f["key"]: f for f in counted["figures"]}["recall_hit_rate"]
    assert (recall["numerator"], recall["denominator"]) == (1, 2)
    # An item's status changed, and a record moved to another day.
    ContextRecordItem.objects.filter(context=record, memory=known["rule"]).update(
        status=ContextRecordItem.Status.WITHHELD
    )
    ContextRecord.objects.filter(pk=record.pk).update(created_at=now - timedelta(days=3))
    _assert_kept()
    # A record deleted (its items cascade), a memory soft-deleted, a memory removed for good.
    ContextRecord.objects.filter(run_id="104").delete()
    services.memory_delete(actor=actor_for(alice), memory=Memory.objects.get(pk=known["rule"].pk))
    _assert_kept()
    assert _both(heatmap.memory_heatmap, actor)[0] == _both(heatmap.memory_heatmap, actor)[1]
    # What a memory is counted under changes (kind, status, creation time): its row follows.
    Memory.objects.filter(pk=known["tea"].pk).update(
        kind="fact", status="archived", created_at=now - timedelta(days=40)
    )
    _assert_kept()
    Memory.objects.filter(pk=known["office"].pk).delete()
    _assert_kept()
    assert not MemoryLastSent.objects.filter(memory_id=known["office"].pk).exists()
    assert not MemoryUsageDay.objects.filter(memory_id=known["office"].pk).exists()
    for member in (alice, bob):
        direct, rolled = _both(heatmap.memory_heatmap, actor_for(member))
        assert rolled == direct


def test_a_new_memory_used_today_is_counted_once(org_a, bob):
    actor = actor_for(bob)
    memory = _add(actor, "Bob parks on level two")
    now = timezone.now()
    for run in ("201", "202"):
        _call(org_a, run, at=now, items=[(memory, SENT)])
    row = MemoryUsageDay.objects.get(memory=memory)
    assert (row.day, row.retrieved, row.sent) == (now.astimezone(UTC).date(), 2, 2)
    assert MemoryLastSent.objects.get(memory_id=memory.pk).last_sent == now
    hottest = heatmap.memory_heatmap(actor)["hottest"]
    assert [(r["id"], r["retrieved"], r["sent"]) for r in hottest] == [(memory.pk, 2, 2)]
