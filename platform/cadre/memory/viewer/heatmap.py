"""The memory heatmap: how often memories were retrieved and sent to model calls per day
(from the context records), the hottest and coldest, and those unused for N days."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.db.models import Count, Exists, Max, OuterRef, Q, Sum
from django.db.models.functions import Left, Trunc
from django.utils import timezone

from cadre.memory import selectors
from cadre.memory.models import ContextRecord, ContextRecordItem, Memory, MemoryUsageDay
from cadre.memory.viewer import reach
from cadre.memory.viewer.reach import as_day, day_start, viewer_memories, viewer_rows, window_days

PREVIEW_CHARS = 80
SENT = Q(status=ContextRecordItem.Status.SENT, context__kind=ContextRecord.Kind.MODEL_CALL)


def _memory_labels(ids) -> dict[int, dict]:
    rows = (
        Memory.objects.filter(pk__in=list(ids))
        .annotate(preview=Left("content", PREVIEW_CHARS))
        .values("id", "kind", "scope_key", "preview")
    )
    return {row["id"]: row for row in rows}


def memory_heatmap(
    actor,
    *,
    scope_keys: list[str] | None = None,
    kinds: list[str] | None = None,
    days: int = 30,
    unused_days: int = 30,
    top: int = 20,
    now: datetime | None = None,
) -> dict:
    """Counts are over every recorded call in the organization, for the memories the actor may
    read (numbers only: which calls they were stays behind the context records' rules).

    retrieved: context-record items of any status (sent, withheld, dropped, returned);
    sent: items of runtime `model_call` records with status `sent`."""
    now = now or timezone.now()
    since = day_start(now) - timedelta(days=days - 1)
    memories = viewer_memories(actor, scope_keys=scope_keys, kinds=kinds)
    if reach.DIRECT:
        by_kind, by_scope, hottest, coldest, per_memory, unused = _direct(
            actor, memories, since=since, now=now, unused_days=unused_days, top=top
        )
    else:
        by_kind, by_scope, hottest, coldest, per_memory, unused = _from_rollup(
            actor,
            memories,
            scope_keys=scope_keys,
            kinds=kinds,
            since=since,
            now=now,
            unused_days=unused_days,
            top=top,
        )
    unused_sample = list(unused.order_by("created_at", "pk").values_list("pk", flat=True)[:top])
    labels = _memory_labels({row["memory_id"] for row in hottest + coldest} | set(unused_sample))
    scope_names = selectors.scope_labels(
        actor.organization,
        sorted({row["memory__scope_key"] for row in by_scope}),
        viewer=selectors.acting_member(actor),
    )

    def described(row: dict) -> dict:
        return {**labels.get(row["memory_id"], {"id": row["memory_id"]}), **row}

    return {
        "days": window_days(now, days),
        "by_kind": [
            {"day": as_day(r["day"]), "kind": r["memory__kind"], **_numbers(r)} for r in by_kind
        ],
        "by_scope": [
            {
                "day": as_day(r["day"]),
                "scope_key": r["memory__scope_key"],
                "label": scope_names.get(r["memory__scope_key"], r["memory__scope_key"]),
                **_numbers(r),
            }
            for r in by_scope
        ],
        "by_memory": [
            {"memory_id": r["memory_id"], "day": as_day(r["day"]), **_numbers(r)}
            for r in per_memory
        ],
        "hottest": [described(row) for row in hottest],
        "coldest": [described(row) for row in coldest],
        "unused": {
            "days": unused_days,
            "count": unused.count(),
            "memories": [labels[pk] for pk in unused_sample],
        },
    }


def _numbers(row: dict) -> dict:
    return {"retrieved": row["retrieved"], "sent": row["sent"]}


def _direct(actor, memories, *, since, now, unused_days: int, top: int):
    """The figures straight from the context record items (the first implementation)."""
    items = ContextRecordItem.objects.filter(
        context__organization=actor.organization,
        context__created_at__gte=since,
        memory__in=memories.values("pk"),
    )
    day = Trunc("context__created_at", "day", tzinfo=UTC)
    counts = {"retrieved": Count("pk"), "sent": Count("pk", filter=SENT)}
    by_kind = (
        items.annotate(day=day)
        .values("day", "memory__kind")
        .annotate(**counts)
        .order_by("day", "memory__kind")
    )
    by_scope = (
        items.annotate(day=day)
        .values("day", "memory__scope_key")
        .annotate(**counts)
        .order_by("day", "memory__scope_key")
    )
    totals = items.values("memory_id").annotate(**counts, last_used=Max("context__created_at"))
    hottest = list(totals.order_by("-sent", "-retrieved", "memory_id")[:top])
    coldest = list(totals.order_by("sent", "retrieved", "memory_id")[:top])
    per_memory = (
        items.filter(memory_id__in=[row["memory_id"] for row in hottest])
        .annotate(day=day)
        .values("memory_id", "day")
        .annotate(**counts)
        .order_by("memory_id", "day")
    )
    cutoff = now - timedelta(days=unused_days)
    recently_sent = ContextRecordItem.objects.filter(
        SENT, context__organization=actor.organization, context__created_at__gte=cutoff
    ).values("memory_id")
    unused = memories.filter(status=Memory.Status.ACTIVE, created_at__lt=cutoff).exclude(
        pk__in=recently_sent
    )
    return list(by_kind), list(by_scope), hottest, coldest, list(per_memory), unused


def _from_rollup(actor, memories, *, scope_keys, kinds, since, now, unused_days: int, top: int):
    """The same figures from the per-day rollup (MemoryUsageDay): a row per memory and day of
    use rather than one per item, narrowed and grouped by the reader columns and kind it
    carries (no join to the memories), and sends since the cutoff by each row's last send."""
    usage = viewer_rows(
        actor, MemoryUsageDay.objects.all(), scope_keys=scope_keys, kinds=kinds
    ).filter(day__gte=since.date())
    usage = usage.exclude(memory_status__in=selectors.HIDDEN_STATUSES)
    counts = {"retrieved": Sum("retrieved"), "sent": Sum("sent")}
    by_kind = usage.values("day", "kind").annotate(**counts).order_by("day", "kind")
    by_scope = usage.values("day", "scope_key").annotate(**counts).order_by("day", "scope_key")
    totals = usage.values("memory_id").annotate(**counts, last_used=Max("last_used"))
    hottest = list(totals.order_by("-sent", "-retrieved", "memory_id")[:top])
    coldest = list(totals.order_by("sent", "retrieved", "memory_id")[:top])
    per_memory = (
        usage.filter(memory_id__in=[row["memory_id"] for row in hottest])
        .values("memory_id", "day", "retrieved", "sent")
        .order_by("memory_id", "day")
    )
    cutoff = now - timedelta(days=unused_days)
    recently_sent = MemoryUsageDay.objects.filter(
        memory_id=OuterRef("pk"),
        day__gte=cutoff.astimezone(UTC).date(),
        last_sent__gte=cutoff,
    )
    unused = memories.filter(status=Memory.Status.ACTIVE, created_at__lt=cutoff).exclude(
        Exists(recently_sent)
    )
    rename = {"kind": "memory__kind", "scope_key": "memory__scope_key"}
    return (
        [{rename.get(k, k): v for k, v in row.items()} for row in by_kind],
        [{rename.get(k, k): v for k, v in row.items()} for row in by_scope],
        hottest,
        coldest,
        list(per_memory),
        unused,
    )
