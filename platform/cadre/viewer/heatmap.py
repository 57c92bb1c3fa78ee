"""The memory heatmap: how often memories were retrieved and sent to model calls per day
(from the context records), the hottest and coldest, and those unused for N days."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.db import connection, transaction
from django.db.models import Count, Max, Q
from django.db.models.functions import Left, Trunc
from django.utils import timezone

from cadre.memory import selectors
from cadre.memory.models import (
    ContextRecord,
    ContextRecordItem,
    Memory,
    MemoryLastSent,
    MemoryUsageDay,
)
from cadre.viewer import reach
from cadre.viewer.reach import as_day, day_start, viewer_memories, viewer_rows, window_days

PREVIEW_CHARS = 80
SENT = Q(status=ContextRecordItem.Status.SENT, context__kind=ContextRecord.Kind.MODEL_CALL)


def _memory_labels(actor, ids) -> dict[int, dict]:
    """Previews of the memories the figures name, read through the memory gate."""
    rows = (
        selectors.memory_queryset(actor, with_deleted=True)
        .filter(pk__in=list(ids))
        .annotate(preview=Left("content", PREVIEW_CHARS))
        .values("id", "kind", "scope_key", "preview")
    )
    return {row["id"]: row for row in rows}


@selectors.scope_keys_memo()
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
    sent: items of runtime `model_call` records with status `sent`. By scope: the `top`
    scopes with the most sends, `scopes_total` of them used in the window."""
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
    by_scope, scopes_total = by_scope
    by_scope = busiest_scopes(by_scope, top)
    unused_sample = list(unused.order_by("created_at", "pk").values_list("pk", flat=True)[:top])
    labels = _memory_labels(
        actor, {row["memory_id"] for row in hottest + coldest} | set(unused_sample)
    )
    # Scopes by the names the page's scope filter shows ("You", "Member: Bob", an agent's
    # name), for the scope rows and for each memory named: rows read as names, not ids.
    scope_names = selectors.scope_labels(
        actor.organization,
        sorted(
            {row["memory__scope_key"] for row in by_scope}
            | {row["scope_key"] for row in labels.values()}
        ),
        viewer=selectors.acting_member(actor),
    )
    for row in labels.values():
        row["scope_label"] = scope_names.get(row["scope_key"], row["scope_key"])

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
        "scopes_total": scopes_total,
        "by_memory": [
            {"memory_id": r["memory_id"], "day": as_day(r["day"]), **_numbers(r)}
            for r in per_memory
        ],
        "hottest": [described(row) for row in hottest],
        "coldest": [described(row) for row in coldest],
        "unused": {
            "days": unused_days,
            "count": unused.count(),
            "memories": [labels.get(pk, {"id": pk}) for pk in unused_sample],
        },
    }


def busiest_scopes(rows: list[dict], top: int) -> list[dict]:
    """The rows of the `top` scopes with the most sends (then retrievals, then key)."""
    totals: dict[str, list[int]] = {}
    for row in rows:
        total = totals.setdefault(row["memory__scope_key"], [0, 0])
        total[0] += row["sent"]
        total[1] += row["retrieved"]
    ranked = sorted(totals, key=lambda key: (-totals[key][0], -totals[key][1], key))
    keep = set(ranked[:top])
    return [row for row in rows if row["memory__scope_key"] in keep]


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
    by_scope = list(by_scope)
    scopes_total = len({row["memory__scope_key"] for row in by_scope})
    return list(by_kind), (by_scope, scopes_total), hottest, coldest, list(per_memory), unused


def _from_rollup(actor, memories, *, scope_keys, kinds, since, now, unused_days: int, top: int):
    """The same figures from the per-day rollup (MemoryUsageDay): a row per memory and day of
    use rather than one per item, narrowed and grouped by the reader columns and kind it
    carries (no join to the memories), and sends since the cutoff by each row's last send."""
    usage = viewer_rows(
        actor, MemoryUsageDay.objects.all(), scope_keys=scope_keys, kinds=kinds
    ).filter(day__gte=since.date())
    usage = usage.exclude(memory_status__in=selectors.HIDDEN_STATUSES)
    by_kind, by_scope, hottest, coldest, scopes_total = _summed(usage, top)
    per_memory = (
        usage.filter(memory_id__in=[row["memory_id"] for row in hottest])
        .values("memory_id", "day", "retrieved", "sent")
        .order_by("memory_id", "day")
    )
    # Unused: from one narrow row per memory with its newest send (no join to the memories).
    cutoff = now - timedelta(days=unused_days)
    unused = (
        viewer_rows(actor, MemoryLastSent.objects.all(), scope_keys=scope_keys, kinds=kinds)
        .filter(status=Memory.Status.ACTIVE, created_at__lt=cutoff)
        .filter(Q(last_sent__isnull=True) | Q(last_sent__lt=cutoff))
    )
    return by_kind, (by_scope, scopes_total), hottest, coldest, list(per_memory), unused


# The rollup rows read once (a materialized CTE), summed four ways in one statement: by day
# and kind, by day for the `top` busiest scopes (and how many scopes were used), and the `top`
# hottest and coldest memories over the window.
_SUMMED = """
WITH u AS MATERIALIZED ({rows}),
     t AS MATERIALIZED (
         SELECT memory_id, sum(retrieved) AS retrieved, sum(sent) AS sent,
                max(last_used) AS last_used
         FROM u GROUP BY memory_id),
     s AS MATERIALIZED (
         SELECT scope_key, sum(retrieved) AS retrieved, sum(sent) AS sent
         FROM u GROUP BY scope_key)
SELECT 'kind', day, kind, NULL::bigint, sum(retrieved), sum(sent), NULL::timestamptz
FROM u GROUP BY day, kind
UNION ALL
SELECT 'scope', day, scope_key, NULL, sum(retrieved), sum(sent), NULL FROM u
WHERE scope_key IN (
    SELECT scope_key FROM s
    ORDER BY sent DESC, retrieved DESC, scope_key COLLATE "C" LIMIT %s)
GROUP BY day, scope_key
UNION ALL
SELECT 'scopes', NULL, NULL, count(*), 0, 0, NULL FROM s
UNION ALL
(SELECT 'hot', NULL, NULL, memory_id, retrieved, sent, last_used FROM t
 ORDER BY sent DESC, retrieved DESC, memory_id LIMIT %s)
UNION ALL
(SELECT 'cold', NULL, NULL, memory_id, retrieved, sent, last_used FROM t
 ORDER BY sent, retrieved, memory_id LIMIT %s)
"""
# Enough for the window's rows to stay in memory (the default 4 MB spills them to disk at
# about 50k rows), for this statement only.
_WORK_MEM = "SET LOCAL work_mem = '32MB'"


def _summed(usage, top: int):
    rows, params = (
        usage.values("memory_id", "day", "kind", "scope_key", "retrieved", "sent", "last_used")
        .order_by()
        .query.sql_with_params()
    )
    parts: dict[str, list] = {"kind": [], "scope": [], "scopes": [], "hot": [], "cold": []}
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(_WORK_MEM)
        cursor.execute(_SUMMED.format(rows=rows), [*params, top, top, top])
        for part, day, key, memory_id, retrieved, sent, last_used in cursor.fetchall():
            numbers = {"retrieved": int(retrieved), "sent": int(sent)}
            if part == "kind":
                parts[part].append({"day": day, "memory__kind": key, **numbers})
            elif part == "scope":
                parts[part].append({"day": day, "memory__scope_key": key, **numbers})
            elif part == "scopes":
                parts[part].append(memory_id)
            else:
                parts[part].append({"memory_id": memory_id, **numbers, "last_used": last_used})
    parts["kind"].sort(key=lambda row: (row["day"], row["memory__kind"]))
    parts["scope"].sort(key=lambda row: (row["day"], row["memory__scope_key"]))
    return parts["kind"], parts["scope"], parts["hot"], parts["cold"], parts["scopes"][0]
