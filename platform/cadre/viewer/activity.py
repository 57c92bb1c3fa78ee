"""Memories added and history events per bucket, for the timeline and the quality dashboard:
whole UTC days summed from the daily rollup (MemoryActivityDay, kept by triggers), the partial
days at a window's edges — and hour buckets — counted from the memories and versions
themselves, so every window gives the numbers a count of the rows would."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, date, datetime, timedelta

from django.db.models import CharField, Count, DateField, Exists, F, Func, OuterRef, Q, Sum
from django.db.models.functions import Trunc

from cadre.memory.models import Memory, MemoryActivityDay, MemoryActivityScopeDay, MemoryVersion
from cadre.viewer.reach import day_start, viewer_memories, viewer_rollup_parts

# By the memory's creation time; every other event is by its version's time.
MEMORY_EVENTS = ("created", "created_deleted", "created_corrected")
# The rollup's version classes as the timeline shows them (one merge counts once: the
# absorbed side of a near-duplicate merge is "superseded", every other merge "merged").
TIMELINE_EVENT = {
    "addition": "added",
    "updated": "updated",
    "correction": "corrected",
    "superseded": "superseded",
    "merge_near": "superseded",
    "merge_exact": "merged",
    "merge": "merged",
    "deletion": "deleted",
}
# The SQL function the triggers classify versions with (migration 0009): one definition.
VERSION_EVENT = Func(
    F("change"),
    F("reason"),
    F("new_status"),
    function="memory_version_event",
    output_field=CharField(),
)
CORRECTED = Exists(
    MemoryVersion.objects.filter(memory=OuterRef("pk"), change=MemoryVersion.Change.CORRECTION)
)

Key = tuple[datetime, str, str]  # (bucket start in UTC, kind, event)


def _as_moment(value) -> datetime:
    if isinstance(value, datetime):
        return value.astimezone(UTC)
    return datetime(value.year, value.month, value.day, tzinfo=UTC)


def activity_counts(
    actor,
    *,
    scope_keys: list[str] | None,
    kinds: list[str] | None,
    since: datetime,
    until: datetime,
    bucket: str,
) -> Counter[Key]:
    """Counts per (bucket, kind, event) for [since, until) over what the actor may read."""
    counts: Counter[Key] = Counter()
    first = day_start(since)
    if first < since:
        first += timedelta(days=1)
    last = day_start(until)
    if bucket == "hour" or first >= last:
        edges = [(since, until)]
    else:
        _add_rollup(counts, actor, scope_keys, kinds, first.date(), last.date(), bucket)
        edges = [(since, first), (last, until)]
    for start, end in edges:
        if start < end:
            _add_rows(counts, actor, scope_keys, kinds, start, end, bucket)
    return counts


class DayBucket(Func):
    """A date's bucket start as a date: `date_trunc` on the date as a plain timestamp (on a
    date alone PostgreSQL converts it to the session's time zone first, row by row)."""

    output_field = DateField()

    def __init__(self, expression, bucket: str):
        if bucket not in ("week", "month"):
            raise ValueError(bucket)
        super().__init__(
            expression, template=f"date_trunc('{bucket}', %(expressions)s::timestamp)::date"
        )


def _add_rollup(counts, actor, scope_keys, kinds, first: date, last: date, bucket: str) -> None:
    parts = viewer_rollup_parts(
        actor,
        MemoryActivityDay.objects.all(),
        MemoryActivityScopeDay.objects.all(),
        scope_keys=scope_keys,
        kinds=kinds,
    )
    moment = F("day") if bucket == "day" else DayBucket("day", bucket)
    for rows in parts:
        summed = (
            rows.filter(day__gte=first, day__lt=last)
            .annotate(t=moment)
            .values_list("t", "kind", "event")
            .annotate(n=Sum("count"))
            .order_by()
        )
        for t, kind, event, n in summed:
            counts[(_as_moment(t), kind, event)] += n


def _add_rows(counts, actor, scope_keys, kinds, start: datetime, end: datetime, bucket: str):
    everything = viewer_memories(actor, scope_keys=scope_keys, kinds=kinds, with_deleted=True)
    moment = Trunc("created_at", bucket, tzinfo=UTC)
    added = (
        everything.filter(created_at__gte=start, created_at__lt=end)
        .annotate(t=moment)
        .values("t", "kind")
        .annotate(
            created=Count("pk"),
            created_deleted=Count("pk", filter=Q(status=Memory.Status.DELETED)),
            created_corrected=Count("pk", filter=Q(CORRECTED)),
        )
        .order_by()
    )
    for row in added:
        for event in MEMORY_EVENTS:
            if row[event]:
                counts[(_as_moment(row["t"]), row["kind"], event)] += row[event]
    # A partial day's versions are few: each checked against the readable memories by its
    # memory's key (not the readable set built whole, as `memory__in` plans it).
    versions = (
        MemoryVersion.objects.filter(created_at__gte=start, created_at__lt=end)
        .filter(Exists(everything.filter(pk=OuterRef("memory_id"))))
        .annotate(t=moment, event=VERSION_EVENT)
        .values("t", "memory__kind", "event")
        .annotate(n=Count("pk"))
        .order_by()
    )
    for row in versions:
        counts[(_as_moment(row["t"]), row["memory__kind"], row["event"])] += row["n"]


def by_event(counts: Counter[Key], events) -> dict[str, dict[datetime, int]]:
    """{event: {bucket: count}} for the given rollup events, summed over kinds."""
    result: dict[str, dict[datetime, int]] = {event: {} for event in events}
    for (moment, _, event), count in counts.items():
        if event in result and count:
            result[event][moment] = result[event].get(moment, 0) + count
    return result
