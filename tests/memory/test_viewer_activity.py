"""The daily activity rollup (MemoryActivityDay, kept by triggers on memories and versions, and
its sum per kind of scope, MemoryActivityScopeDay, kept from it): it equals a count of the rows
after every kind of write, and the timeline and quality figures read from it equal the first
build's direct counts for any window, bucket and selection. Context record items carry their
memory's reader columns through every change of the memory."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.utils import timezone

from cadre.memory import services
from cadre.memory.models import (
    ContextRecordItem,
    Memory,
    MemoryActivityDay,
    MemoryActivityScopeDay,
    MemoryUsageDay,
    MemoryVersion,
)
from cadre.memory.services.common import EXACT_REASON, NEAR_REASON
from cadre.viewer import quality, reach, timeline
from tests.conftest import actor_for
from tests.memory.test_viewer import known  # noqa: F401 - the fixture
from tests.memory.test_viewer_rollup import _both, rated  # noqa: F401 - the fixture


def _version_event(version: MemoryVersion) -> str:
    """A version's class, written out in Python (the triggers use the SQL function)."""
    if version.change in ("addition", "correction", "deletion"):
        return version.change
    if version.change == "merge":
        if version.reason.startswith(NEAR_REASON):
            return "merge_near"
        return "merge_exact" if version.reason.startswith(EXACT_REASON) else "merge"
    return "superseded" if version.new_status == "superseded" else "updated"


def _from_rows() -> Counter:
    """The rollup as a count of the memories and versions would give it."""
    expected: Counter = Counter()
    corrected = set(
        MemoryVersion.objects.filter(change="correction").values_list("memory_id", flat=True)
    )
    memories = {memory.pk: memory for memory in Memory.objects.all()}

    def key(memory, moment, event):
        day = moment.astimezone(UTC).date()
        subject = memory.subject_id or 0
        return (memory.organization_id, day, memory.scope_key, subject, memory.kind, event)

    for memory in memories.values():
        expected[key(memory, memory.created_at, "created")] += 1
        if memory.status == Memory.Status.DELETED:
            expected[key(memory, memory.created_at, "created_deleted")] += 1
        if memory.pk in corrected:
            expected[key(memory, memory.created_at, "created_corrected")] += 1
    for version in MemoryVersion.objects.all():
        memory = memories[version.memory_id]
        expected[key(memory, version.created_at, _version_event(version))] += 1
    return expected


def _rollup() -> Counter:
    rows = MemoryActivityDay.objects.exclude(count=0)
    return Counter(
        {
            (r.organization_id, r.day, r.scope_key, r.subject_id, r.kind, r.event): r.count
            for r in rows
        }
    )


def _by_scope() -> Counter:
    """MemoryActivityScopeDay as kept by its trigger, and as MemoryActivityDay summed per
    kind of scope gives it."""
    kept: Counter = Counter()
    for r in MemoryActivityScopeDay.objects.exclude(count=0):
        kept[(r.organization_id, r.day, r.scope, r.kind, r.event)] = r.count
    summed: Counter = Counter()
    for r in MemoryActivityDay.objects.all():
        summed[(r.organization_id, r.day, r.scope, r.kind, r.event)] += r.count
    return kept, +summed


def _assert_kept() -> None:
    assert _rollup() == _from_rows()
    kept, summed = _by_scope()
    assert kept == summed


def test_the_migrations_merge_prefixes_are_the_dedup_stages(db):
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT memory_version_event('merge', %s, ''), memory_version_event('merge', %s, '')",
            [f"{EXACT_REASON}: same hash", f"{NEAR_REASON} memory 7"],
        )
        assert cursor.fetchone() == ("merge_exact", "merge_near")


def test_rollup_equals_the_rows_after_every_kind_of_write(known, alice, bob):  # noqa: F811
    _assert_kept()
    assert any(key[5] == "created_corrected" for key in _rollup())  # not two empty sets
    assert {key[2] for key in _by_scope()[0]} >= {"user", "organization"}
    b = actor_for(bob)
    tea = Memory.objects.get(pk=known["tea"].pk)
    # A second correction: still corrected once on its creation day.
    services.memory_update(
        actor=b, memory=tea, expected_version=tea.version, content="Bob prefers jasmine tea"
    )
    _assert_kept()
    # Moved to another day, another kind and another scope (the history's days move too).
    Memory.objects.filter(pk=known["office"].pk).update(
        created_at=timezone.now() - timedelta(days=9), kind="experience"
    )
    Memory.objects.filter(pk=known["rule"].pk).update(
        scope="user", scope_key=f"user:{bob.pk}", subject=bob
    )
    _assert_kept()
    # Bulk-created memories, one already deleted.
    now = timezone.now()
    Memory.objects.bulk_create(
        Memory(
            organization=alice.organization,
            scope="organization",
            scope_key="organization",
            kind=kind,
            content=f"bulk {n}",
            content_hash=f"bulk-{n}",
            status=status,
            created_at=now - timedelta(days=n),
        )
        for n, (kind, status) in enumerate(
            [("fact", "active"), ("fact", "deleted"), ("summary", "active")]
        )
    )
    _assert_kept()
    # A soft delete, then a memory removed for good with its history (the ORM's cascade).
    services.memory_delete(actor=actor_for(alice), memory=Memory.objects.get(pk=known["rule"].pk))
    _assert_kept()
    Memory.objects.filter(pk=known["tea"].pk).delete()
    _assert_kept()
    # Unrelated updates touch nothing.
    before = list(MemoryActivityDay.objects.order_by("pk").values_list("pk", "count"))
    Memory.objects.update(confidence=0.5, updated_at=timezone.now())
    assert list(MemoryActivityDay.objects.order_by("pk").values_list("pk", "count")) == before


def test_a_recount_gives_what_the_triggers_kept(known, alice):  # noqa: F811
    kept = _rollup()
    org = alice.organization_id
    days = sorted({key[1] for key in kept})
    MemoryActivityDay.objects.all().delete()
    with connection.cursor() as cursor:
        cursor.execute("SELECT memory_activity_recount(%s, %s::date[])", [org, days])
    assert _rollup() == kept
    kept_by_scope, summed = _by_scope()
    assert kept_by_scope == summed and summed


def test_an_admin_reads_personal_and_agent_scopes_from_the_sum_per_kind_of_scope(
    known,  # noqa: F811
    alice,
    bob,
):
    parts = reach.viewer_rollup_parts(
        actor_for(alice), MemoryActivityDay.objects.all(), MemoryActivityScopeDay.objects.all()
    )
    assert [part.model for part in parts] == [MemoryActivityDay, MemoryActivityScopeDay]
    # The per-key part leaves out the kinds of scope the sum serves: nothing counted twice.
    assert not parts[0].filter(scope__in=["user", "agent"]).exists()
    assert set(parts[1].values_list("scope", flat=True)) == {"user"}
    # A member reads scope by scope; naming scopes narrows an admin to them.
    for actor, options in ((actor_for(bob), {}), (actor_for(alice), {"scope_keys": ["user:1"]})):
        parts = reach.viewer_rollup_parts(
            actor, MemoryActivityDay.objects.all(), MemoryActivityScopeDay.objects.all(), **options
        )
        assert [part.model for part in parts] == [MemoryActivityDay]


def _item_columns() -> dict:
    return {
        i.pk: (i.scope, i.scope_key, i.subject_id, i.kind) for i in ContextRecordItem.objects.all()
    }


def _memory_columns() -> dict:
    return {
        i.pk: (i.memory.scope, i.memory.scope_key, i.memory.subject_id or 0, i.memory.kind)
        for i in ContextRecordItem.objects.select_related("memory")
    }


def test_context_items_carry_their_memorys_reader_columns(known, alice, bob):  # noqa: F811
    assert _item_columns() == _memory_columns()
    assert {scope for scope, *_ in _item_columns().values()} >= {"user"}  # filled, not ""
    usage = list(MemoryUsageDay.objects.order_by("pk").values_list("pk", "retrieved", "sent"))
    tea = known["tea"]
    Memory.objects.filter(pk=tea.pk).update(
        scope="organization", scope_key="organization", subject=None, kind="fact"
    )
    assert _item_columns() == _memory_columns()
    moved = ContextRecordItem.objects.filter(memory=tea)
    assert moved.exists() and set(moved.values_list("scope_key", "subject_id", "kind")) == {
        ("organization", 0, "fact")
    }
    # The copy is not a change of use: the usage rollup keeps its rows and counts.
    assert (
        list(MemoryUsageDay.objects.order_by("pk").values_list("pk", "retrieved", "sent")) == usage
    )
    # Python cannot write other columns: the trigger copies the memory's at insert.
    item = ContextRecordItem.objects.filter(memory=tea).first()
    copy = ContextRecordItem.objects.create(
        context=item.context,
        memory=item.memory,
        memory_version=1,
        rank=99,
        score=0.1,
        scope="user",
        scope_key=f"user:{bob.pk}",
        kind="preference",
    )
    copy.refresh_from_db()
    assert (copy.scope, copy.scope_key, copy.subject_id, copy.kind) == (
        "organization",
        "organization",
        0,
        "fact",
    )


WINDOWS = [
    {},  # the last 30 days, hour-aligned edges
    {"bucket": "day"},
    {"bucket": "hour", "since_hours": 60},
    {"bucket": "week", "since_hours": 24 * 400},
    {"bucket": "month", "since_hours": 24 * 800},
    {"bucket": "day", "since_hours": 50, "until_hours": 20},  # both edges mid-day
    {"bucket": "day", "since_hours": 30, "until_hours": 29},  # inside one day
]


@pytest.mark.parametrize("who", ["alice", "bob"])
@pytest.mark.parametrize("window", WINDOWS)
def test_timeline_from_the_rollup_equals_the_direct_one(known, alice, bob, who, window):  # noqa: F811
    actor = actor_for({"alice": alice, "bob": bob}[who])
    now = timezone.now()
    options = {"bucket": window.get("bucket"), "until": now}
    if "since_hours" in window:
        options["since"] = now - timedelta(hours=window["since_hours"])
        options["until"] = now - timedelta(hours=window.get("until_hours", 0))
    direct, rolled = _both(timeline.memory_timeline, actor, **options)
    direct["by_event"].sort(key=lambda row: (row["t"], row["event"]))
    rolled["by_event"].sort(key=lambda row: (row["t"], row["event"]))
    assert rolled == direct
    if not window.get("until_hours"):
        assert rolled["by_kind"] and rolled["by_event"]  # not two empty answers
    narrowed = {"scope_keys": [f"user:{bob.pk}"], "kinds": ["preference", "fact"]}
    direct, rolled = _both(timeline.memory_timeline, actor, **options, **narrowed)
    assert sorted(rolled["by_event"], key=str) == sorted(direct["by_event"], key=str)
    assert (rolled["by_kind"], rolled["points_total"]) == (
        direct["by_kind"],
        direct["points_total"],
    )


@pytest.mark.parametrize("who", ["alice", "bob"])
@pytest.mark.parametrize("days", [1, 2, 30])
def test_quality_from_the_rollup_equals_the_direct_one(known, alice, bob, rated, who, days):  # noqa: F811
    actor = actor_for({"alice": alice, "bob": bob}[who])
    direct, rolled = _both(quality.memory_quality, actor, days=days)
    assert rolled == direct
    direct, rolled = _both(quality.memory_quality, actor, days=days, kinds=["preference"])
    assert rolled == direct


def test_old_days_come_from_the_rollup(known, bob):  # noqa: F811
    """Whole days are read from the rollup: a row written there shows in the timeline (and a
    count of the memories would not give it)."""
    actor = actor_for(bob)
    day = (timezone.now() - timedelta(days=5)).astimezone(UTC).date()
    MemoryActivityDay.objects.create(
        organization=bob.organization,
        day=day,
        scope="user",
        scope_key=f"user:{bob.pk}",
        subject_id=bob.pk,
        kind="fact",
        event="created",
        count=7,
    )
    body = timeline.memory_timeline(actor, since=timezone.now() - timedelta(days=30), bucket="day")
    moment = datetime(day.year, day.month, day.day, tzinfo=UTC)
    assert {"t": moment, "kind": "fact", "count": 7} in body["by_kind"]


ROWS = {
    "TimelinePointSerializer": {
        "id": 7,
        "kind": "fact",
        "status": "active",
        "scope_key": "user:3",
        "created_at": datetime(2026, 11, 30, 8, 15, 1, 123456, tzinfo=UTC),
        "valid_from": datetime(2026, 11, 30, 8, 15, tzinfo=UTC),
        "valid_to": None,
        "preview": "Bob prefers tea",
    },
    "KindUsageSerializer": {
        "day": datetime(2026, 11, 30).date(),
        "retrieved": 3,
        "sent": 2,
        "kind": "fact",
    },
    "MemoryUsageSerializer": {
        "memory_id": 7,
        "id": 7,
        "retrieved": 3,
        "sent": 1,
        "last_used": datetime(2026, 11, 30, 9, tzinfo=UTC),
    },
    "SeriesPointSerializer": {"day": datetime(2026, 11, 30).date(), "value": None},
    "EventCountSerializer": {
        "t": datetime(2026, 11, 30, tzinfo=UTC),
        "event": "merged",
        "count": 2,
    },
}


@pytest.mark.parametrize("name", sorted(ROWS))
def test_row_serializers_write_what_drf_fields_would(name, settings):
    """The viewer's fast row serializers against plain DRF serializers of the same fields
    (optional fields left out, None kept, date-times in the current time zone)."""
    from django.utils import timezone as django_timezone
    from rest_framework import serializers

    from cadre.viewer import serializers as viewer_serializers

    fast = getattr(viewer_serializers, name)
    plain = type("Plain", (serializers.Serializer,), {k: v for k, v in fast().fields.items()})
    for zone in ("UTC", "Asia/Shanghai"):
        with django_timezone.override(zone):
            rows = [ROWS[name], {**ROWS[name]}]
            assert fast(rows, many=True).data == plain(rows, many=True).data


def test_the_heatmap_lists_the_busiest_scopes_and_counts_the_rest(known, alice):  # noqa: F811
    from cadre.viewer import heatmap

    actor = actor_for(alice)
    whole = heatmap.memory_heatmap(actor)
    assert whole["scopes_total"] == len({row["scope_key"] for row in whole["by_scope"]}) >= 2
    direct, rolled = _both(heatmap.memory_heatmap, actor, top=1)
    assert rolled == direct
    assert rolled["scopes_total"] == whole["scopes_total"]
    sent = {}
    for row in whole["by_scope"]:
        sent[row["scope_key"]] = sent.get(row["scope_key"], 0) + row["sent"]
    assert {row["scope_key"] for row in rolled["by_scope"]} == {max(sent, key=sent.get)}
