"""The quality dashboard: each figure with its definition, its value over the window and its
daily series; a figure without a recorded signal says so and shows no number."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.db.models import Count, Exists, OuterRef
from django.db.models.functions import Trunc, TruncDate
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from cadre.agents.ratings import run_outcomes
from cadre.memory import selectors
from cadre.memory.models import ContextRecord, ContextRecordItem, Memory, MemoryVersion
from cadre.memory.services.common import EXACT_REASON, NEAR_REASON
from cadre.viewer import activity, reach
from cadre.viewer.reach import as_day, day_start, viewer_memories, window_days
from cadre.viewer.vector_map import map_history
from hub.models import SkillUsage
from hub.outcomes import FAILURE, SUCCESS

# The definitions the dashboard shows next to each figure (docs/memory.md repeats them).
DEFINITIONS = {
    "exact_duplicate_rate": (
        gettext_lazy("Exact duplicate rate"),
        gettext_lazy(
            "Writes absorbed because the same content already existed in the same scope, divided "
            "by items received (memories added + exact duplicates absorbed), per day of the write."
        ),
    ),
    "near_duplicate_rate": (
        gettext_lazy("Near-duplicate rate"),
        gettext_lazy(
            "Memories merged into another by the near-duplicate stage (embedding similarity, then "
            "a judge), divided by items received, per day of the merge."
        ),
    ),
    "merge_count": (
        gettext_lazy("Dedup merges"),
        gettext_lazy("Exact duplicates absorbed plus near-duplicate merges, per day."),
    ),
    "compression_rate": (
        gettext_lazy("Dedup compression"),
        gettext_lazy(
            "(exact + near-duplicate merges) / items received: the share of what arrived that "
            "dedup folded into an existing memory."
        ),
    ),
    "association_strength": (
        gettext_lazy("Association strength"),
        gettext_lazy(
            "Mean cosine similarity of each memory's embedding to the centroid of its cluster on "
            "the latest vector map of the same selection (1 = every memory sits on its cluster's "
            "centre). One value per computed map."
        ),
    ),
    "recall_hit_rate": (
        gettext_lazy("Recall hit rate"),
        gettext_lazy(
            "Of the model calls that were sent at least one of these memories and whose run a "
            "person rated (run feedback), the share rated a success. Unrated calls are not "
            "counted: with no rating there is no signal, and no number is shown."
        ),
    ),
    "correction_rate": (
        gettext_lazy("Correction rate"),
        gettext_lazy(
            "Of the memories added on a day, the share that has since been corrected (a "
            "correction version: edited content or superseded by a correction)."
        ),
    ),
    "deletion_rate": (
        gettext_lazy("Deletion rate"),
        gettext_lazy("Of the memories added on a day, the share that has since been deleted."),
    ),
    "skill_success_rate": (
        gettext_lazy("Skill success rate"),
        gettext_lazy(
            "Per skill version: runs that used it and succeeded (the person's rating, else the "
            "run finished) / runs with a known outcome, from the Hub's usage records."
        ),
    ),
    "memories_added": (
        gettext_lazy("Extraction volume"),
        gettext_lazy(
            "Memories added per day (every source: extraction from conversations, the API, "
            "tool results, imports)."
        ),
    ),
    "extraction_cost": (
        gettext_lazy("Extraction model cost"),
        gettext_lazy(
            "The model cost of extracting memories. Extraction model calls are not priced in the "
            "memory records, so there is no signal and no number."
        ),
    ),
}


def _figure(key: str, *, value, series, unit: str, signal: bool = True, note: str = "", **more):
    name, definition = (str(text) for text in DEFINITIONS[key])  # in the reader's language
    return {
        "key": key,
        "name": name,
        "definition": definition,
        "unit": unit,
        "signal": signal,
        "value": value if signal else None,
        "note": note,
        "series": series if signal else [],
        **more,
    }


def _per_day(rows, field: str) -> dict:
    counted = (
        rows.annotate(day=Trunc(field, "day", tzinfo=UTC))
        .values("day")
        .annotate(count=Count("pk"))
        .order_by()
    )
    return {as_day(row["day"]): row["count"] for row in counted}


def _ratio(numerator: int, denominator: int) -> float | None:
    return round(numerator / denominator, 4) if denominator else None


def _ratio_series(days, numerators: dict, denominators: dict) -> list[dict]:
    return [
        {
            "day": day,
            "value": _ratio(numerators.get(day, 0), denominators.get(day, 0)),
            "numerator": numerators.get(day, 0),
            "denominator": denominators.get(day, 0),
        }
        for day in days
    ]


def _count_series(days, counts: dict) -> list[dict]:
    return [{"day": day, "value": counts.get(day, 0)} for day in days]


def _ratio_figure(key: str, days, numerators: dict, denominators: dict, **more) -> dict:
    top, bottom = sum(numerators.values()), sum(denominators.values())
    return _figure(
        key,
        value=_ratio(top, bottom),
        series=_ratio_series(days, numerators, denominators),
        unit="ratio",
        numerator=top,
        denominator=bottom,
        **more,
    )


@selectors.scope_keys_memo()
def memory_quality(
    actor,
    *,
    scope_keys: list[str] | None = None,
    kinds: list[str] | None = None,
    days: int = 30,
    now: datetime | None = None,
) -> dict:
    now = now or timezone.now()
    since = day_start(now) - timedelta(days=days - 1)
    window = window_days(now, days)
    everything = viewer_memories(actor, scope_keys=scope_keys, kinds=kinds, with_deleted=True)
    added_rows = everything.filter(created_at__gte=since)
    if reach.DIRECT:
        added, corrected, deleted, exact, near = _direct_counts(everything, added_rows, since)
    else:
        added, corrected, deleted, exact, near = _rollup_counts(
            actor, scope_keys, kinds, since, now
        )
    received = {day: added.get(day, 0) + exact.get(day, 0) for day in window}
    merged = {day: exact.get(day, 0) + near.get(day, 0) for day in window}
    figures = [
        _ratio_figure("exact_duplicate_rate", window, exact, received),
        _ratio_figure("near_duplicate_rate", window, near, received),
        _figure(
            "merge_count",
            value=sum(merged.values()),
            series=_count_series(window, merged),
            unit="count",
        ),
        _ratio_figure("compression_rate", window, merged, received),
        association_figure(actor, scope_keys=scope_keys, kinds=kinds, since=since),
        recall_figure(
            actor, everything, scope_keys=scope_keys, kinds=kinds, since=since, window=window
        ),
        _ratio_figure("correction_rate", window, corrected, added),
        _ratio_figure("deletion_rate", window, deleted, added),
        skill_figure(actor, since=since, window=window),
        _figure(
            "memories_added",
            value=sum(added.values()),
            series=_count_series(window, added),
            unit="count",
        ),
        _figure(
            "extraction_cost",
            value=None,
            series=[],
            unit="currency",
            signal=False,
            note=_("Not recorded: extraction calls carry no price in memory records."),
        ),
    ]
    return {"since": since, "days": days, "figures": figures}


_CORRECTED = Exists(
    MemoryVersion.objects.filter(memory=OuterRef("pk"), change=MemoryVersion.Change.CORRECTION)
)


def _direct_counts(everything, added_rows, since):
    """(added, corrected, deleted, exact, near) per day, one query each (the first build)."""
    versions = MemoryVersion.objects.filter(
        memory__in=everything.values("pk"), created_at__gte=since
    )
    merges = versions.filter(change=MemoryVersion.Change.MERGE)
    return (
        _per_day(added_rows, "created_at"),
        _per_day(added_rows.filter(_CORRECTED), "created_at"),
        _per_day(added_rows.filter(status=Memory.Status.DELETED), "created_at"),
        _per_day(merges.filter(reason__startswith=EXACT_REASON), "created_at"),
        _per_day(merges.filter(reason__startswith=NEAR_REASON), "created_at"),
    )


def _rollup_counts(actor, scope_keys, kinds, since, until):
    """The same per-day counts from the daily activity rollup (and today's rows so far)."""
    counts = activity.activity_counts(
        actor, scope_keys=scope_keys, kinds=kinds, since=since, until=until, bucket="day"
    )
    daily = activity.by_event(
        counts, ("created", "created_corrected", "created_deleted", "merge_exact", "merge_near")
    )

    def per_day(event):
        return {as_day(moment): count for moment, count in daily[event].items()}

    return (
        per_day("created"),
        per_day("created_corrected"),
        per_day("created_deleted"),
        per_day("merge_exact"),
        per_day("merge_near"),
    )


def recall_figure(actor, memories, *, scope_keys, kinds, since: datetime, window) -> dict:
    sent = ContextRecordItem.objects.filter(
        context=OuterRef("pk"), status=ContextRecordItem.Status.SENT
    )
    if reach.DIRECT:  # the first build: each item's memory checked against the readable set
        sent = sent.filter(memory__in=memories.values("pk"))
    else:  # by the reader columns the items carry
        sent = reach.viewer_items(actor, sent, scope_keys=scope_keys, kinds=kinds)
    calls = (
        ContextRecord.objects.filter(
            organization=actor.organization,
            kind=ContextRecord.Kind.MODEL_CALL,
            created_at__gte=since,
        )
        .filter(Exists(sent))
        # Calls per run and UTC day: a run's calls share its rating.
        .annotate(day=TruncDate("created_at", tzinfo=UTC))
        .values_list("run_id", "day")
        .annotate(calls=Count("pk"))
        .order_by()
    )
    counted = reach.fetch_rows(calls)
    calls = sum(n for _, _, n in counted)
    runs = sorted({run for run, _, _ in counted if run})
    outcomes = run_outcomes(actor.organization.pk, runs)
    successes: dict = {}
    rated: dict = {}
    for run_id, day, n in counted:
        outcome = outcomes.get(run_id)
        if outcome not in ("success", "failure"):
            continue
        rated[day] = rated.get(day, 0) + n
        if outcome == "success":
            successes[day] = successes.get(day, 0) + n
    if not rated:
        return _figure(
            "recall_hit_rate",
            value=None,
            series=[],
            unit="ratio",
            signal=False,
            note=_(
                "No signal: of %(calls)s model calls sent these memories, none belongs to a "
                "run a person rated."
            )
            % {"calls": calls},
            calls=calls,
        )
    return _ratio_figure("recall_hit_rate", window, successes, rated, calls=calls)


def skill_outcomes(actor, since: datetime) -> list[dict]:
    """Success rate per skill version used since `since` (Hub skill usages), with daily
    successes and failures, over the usages the actor may see."""
    usages = SkillUsage.objects.restrict(actor, "view").filter(loaded=True, created_at__gte=since)
    daily = (
        usages.annotate(day=Trunc("created_at", "day", tzinfo=UTC))
        .values("version_id", "day")
        .annotate(
            successes=Count("pk", filter=SUCCESS),
            failures=Count("pk", filter=FAILURE),
            uses=Count("pk"),
        )
        .order_by("version_id", "day")
    )
    names = dict(usages.values_list("version_id", "version__package__name").distinct())
    numbers = dict(usages.values_list("version_id", "version__version").distinct())
    versions: dict[int, dict] = {}
    for row in daily:
        entry = versions.setdefault(
            row["version_id"],
            {
                "skill": names.get(row["version_id"], ""),
                "version": numbers.get(row["version_id"], ""),
                "uses": 0,
                "successes": 0,
                "failures": 0,
                "series": [],
            },
        )
        entry["uses"] += row["uses"]
        entry["successes"] += row["successes"]
        entry["failures"] += row["failures"]
        entry["series"].append(
            {
                "day": row["day"].date(),
                "successes": row["successes"],
                "failures": row["failures"],
            }
        )
    for entry in versions.values():
        decided = entry["successes"] + entry["failures"]
        entry["success_rate"] = round(entry["successes"] / decided, 4) if decided else None
    return list(versions.values())


def skill_figure(actor, *, since: datetime, window) -> dict:
    versions = skill_outcomes(actor, since)
    successes = sum(row["successes"] for row in versions)
    failures = sum(row["failures"] for row in versions)
    if not successes + failures:
        return _figure(
            "skill_success_rate",
            value=None,
            series=[],
            unit="ratio",
            signal=False,
            note=_("No signal: no skill version has a known outcome in this window."),
            versions=versions,
        )
    daily_successes: dict = {}
    daily_decided: dict = {}
    for row in versions:
        for point in row["series"]:
            day = point["day"]
            daily_successes[day] = daily_successes.get(day, 0) + point["successes"]
            daily_decided[day] = daily_decided.get(day, 0) + point["successes"] + point["failures"]
    return _ratio_figure(
        "skill_success_rate", window, daily_successes, daily_decided, versions=versions
    )


def association_figure(actor, *, scope_keys, kinds, since: datetime) -> dict:
    maps = map_history(actor, scope_keys=scope_keys, kinds=kinds, since=since)
    if not maps:
        return _figure(
            "association_strength",
            value=None,
            series=[],
            unit="cosine",
            signal=False,
            note=_("No signal yet: compute the vector map of this selection (Memory → Map)."),
        )
    series = [{"day": as_day(row.created_at), "value": row.association_strength} for row in maps]
    return _figure(
        "association_strength", value=maps[-1].association_strength, series=series, unit="cosine"
    )
