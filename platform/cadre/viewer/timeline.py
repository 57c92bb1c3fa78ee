"""The memory timeline: memories added per bucket by kind, events by type, validity spans,
and the set as it was at a moment (`as_of`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.db.models import Case, CharField, Count, Min, Q, Value, When
from django.db.models.functions import Left, Trunc
from django.utils import timezone

from cadre.errors import InvalidInput
from cadre.memory import selectors
from cadre.memory.models import Memory, MemoryVersion
from cadre.memory.services.common import NEAR_REASON
from cadre.viewer import activity, reach
from cadre.viewer.reach import viewer_memories

BUCKETS = ("hour", "day", "week", "month")
EVENTS = ("added", "updated", "corrected", "superseded", "merged", "deleted", "expired")
POINT_LIMIT = 2000
PREVIEW_CHARS = 80
# The default range's shortest and longest span (see `fitted_since`).
MIN_SPAN = timedelta(minutes=15)
MAX_SPAN = timedelta(days=365)

# A version's change, as the event the timeline shows. The absorbed side of a near-duplicate
# merge is "superseded" (it stops being active); the kept side is "merged", so one merge
# counts once.
_EVENT = Case(
    When(change=MemoryVersion.Change.ADDITION, then=Value("added")),
    When(change=MemoryVersion.Change.CORRECTION, then=Value("corrected")),
    When(change=MemoryVersion.Change.DELETION, then=Value("deleted")),
    When(
        change=MemoryVersion.Change.MERGE,
        reason__startswith=NEAR_REASON,
        then=Value("superseded"),
    ),
    When(change=MemoryVersion.Change.MERGE, then=Value("merged")),
    When(new_status=Memory.Status.SUPERSEDED, then=Value("superseded")),
    default=Value("updated"),
    output_field=CharField(),
)


def auto_bucket(since: datetime, until: datetime) -> str:
    """Hours for up to two days, days up to four months, weeks up to two years, else months."""
    span = until - since
    if span <= timedelta(days=2):
        return "hour"
    if span <= timedelta(days=120):
        return "day"
    return "week" if span <= timedelta(days=731) else "month"


def fitted_since(rows, until: datetime) -> datetime:
    """The default start of the range: the oldest memory written before `until`, less a
    twentieth of the span, so the data fills the axis rather than sitting at the right edge
    of a month; at least MIN_SPAN before `until` (all data written in the last minutes: a
    quarter of an hour, in hours) and at most MAX_SPAN (a year, in weeks). With no memory:
    the last 30 days."""
    oldest = rows.filter(created_at__lt=until).aggregate(oldest=Min("created_at"))["oldest"]
    if oldest is None:
        return until - timedelta(days=30)
    span = until - oldest
    since = oldest - span / 20
    return max(min(since, until - MIN_SPAN), until - MAX_SPAN)


@selectors.scope_keys_memo()
def memory_timeline(
    actor,
    *,
    scope_keys: list[str] | None = None,
    kinds: list[str] | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    bucket: str | None = None,
    as_of: datetime | None = None,
    limit: int = POINT_LIMIT,
) -> dict:
    """Series and points for [since, until) in UTC buckets. Without `since`, the range fits the
    data (`fitted_since`): from a little before the oldest memory to `until` (default now)."""
    everything = viewer_memories(actor, scope_keys=scope_keys, kinds=kinds, with_deleted=True)
    until = until or timezone.now()
    since = since or fitted_since(everything, until)
    if since >= until:
        raise InvalidInput("since must be before until.", details={"since": ["Before until."]})
    if bucket is not None and bucket not in BUCKETS:
        raise InvalidInput(f"Unknown bucket {bucket!r}.", details={"bucket": list(BUCKETS)})
    bucket = bucket or auto_bucket(since, until)
    added = everything.filter(created_at__gte=since, created_at__lt=until)
    if reach.DIRECT:
        by_kind, by_event, points_total = _direct_counts(everything, added, since, until, bucket)
    else:
        by_kind, by_event, points_total = _rollup_counts(
            actor, scope_keys, kinds, since, until, bucket
        )
    expired = (
        everything.filter(expires_at__gte=since, expires_at__lt=min(until, timezone.now()))
        .annotate(t=Trunc("expires_at", bucket, tzinfo=UTC))
        .values("t")
        .annotate(count=Count("pk"))
        .order_by("t")
    )
    by_event += [{"t": row["t"], "event": "expired", "count": row["count"]} for row in expired]
    by_event.sort(key=lambda row: (row["t"], EVENTS.index(row["event"])))
    visible = added.exclude(status=Memory.Status.DELETED)
    points = list(
        visible.order_by("-created_at", "-pk")
        .annotate(preview=Left("content", PREVIEW_CHARS))
        .values(
            "id",
            "kind",
            "status",
            "scope_key",
            "created_at",
            "valid_from",
            "valid_to",
            "preview",
        )[:limit]
    )
    result = {
        "since": since,
        "until": until,
        "bucket": bucket,
        "by_kind": by_kind,
        "by_event": by_event,
        "points": points,
        "points_total": points_total,
        "as_of": None,
    }
    if as_of is not None:
        result["as_of"] = memory_set_as_of(everything, as_of)
    return result


def _direct_counts(everything, added, since, until, bucket):
    """(by kind, by event, points total) counted from the memories and versions (the first
    build; bench/memory_viewer.py measures it beside the rollup)."""
    by_kind = (
        added.annotate(t=Trunc("created_at", bucket, tzinfo=UTC))
        .values("t", "kind")
        .annotate(count=Count("pk"))
        .order_by("t", "kind")
    )
    versions = (
        MemoryVersion.objects.filter(
            memory__in=everything.values("pk"), created_at__gte=since, created_at__lt=until
        )
        .annotate(t=Trunc("created_at", bucket, tzinfo=UTC), event=_EVENT)
        .values("t", "event")
        .annotate(count=Count("pk"))
        .order_by("t", "event")
    )
    total = added.exclude(status=Memory.Status.DELETED).count()
    return [dict(row) for row in by_kind], [dict(row) for row in versions], total


def _rollup_counts(actor, scope_keys, kinds, since, until, bucket):
    """The same from the daily rollup (whole days) and the rows of the partial days."""
    counts = activity.activity_counts(
        actor, scope_keys=scope_keys, kinds=kinds, since=since, until=until, bucket=bucket
    )
    by_kind = [
        {"t": moment, "kind": kind, "count": count}
        for (moment, kind, event), count in sorted(counts.items())
        if event == "created" and count
    ]
    events: dict[tuple, int] = {}
    for (moment, _, event), count in counts.items():
        shown = activity.TIMELINE_EVENT.get(event)
        if shown and count:
            events[(moment, shown)] = events.get((moment, shown), 0) + count
    by_event = [{"t": t, "event": event, "count": n} for (t, event), n in events.items()]
    created = sum(n for (_, _, event), n in counts.items() if event == "created")
    deleted = sum(n for (_, _, event), n in counts.items() if event == "created_deleted")
    return by_kind, by_event, created - deleted


def memory_set_as_of(rows, moment: datetime, *, limit: int = POINT_LIMIT) -> dict:
    """How many memories were valid at `moment`: written by then, their validity interval
    covering it, not deleted before it — by kind; and which (`memory_ids`, the newest
    `limit`; a memory deleted since is counted but not listed)."""
    valid = rows.filter(created_at__lte=moment, valid_from__lte=moment).filter(
        Q(valid_to__isnull=True) | Q(valid_to__gt=moment),
        Q(deleted_at__isnull=True) | Q(deleted_at__gt=moment),
    )
    kinds = dict(valid.values_list("kind").annotate(count=Count("pk")).order_by("kind"))
    ids = list(
        valid.exclude(status=Memory.Status.DELETED)
        .order_by("-created_at", "-pk")
        .values_list("pk", flat=True)[:limit]
    )
    return {"at": moment, "count": sum(kinds.values()), "by_kind": kinds, "memory_ids": ids}
