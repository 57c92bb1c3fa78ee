"""The Hub's figures for the Memory Viewer's quality dashboard: skill outcomes."""

from __future__ import annotations

from datetime import UTC, datetime

from django.db.models import Count
from django.db.models.functions import Trunc

from hub.models import SkillUsage
from hub.outcomes import FAILURE, SUCCESS


def skill_outcomes(actor, since: datetime) -> list[dict]:
    """Success rate per skill version used since `since`, with daily successes and failures,
    over the usages the actor may see."""
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
