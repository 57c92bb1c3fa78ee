"""Skill outcomes: each run's skill usages succeed or fail, and each version's success rate.

A usage's outcome is the user's feedback on the run when there is one, else the run's own
status (completed → success, failed → failure; anything else has no outcome yet). Rates are
computed from the usages on read, so feedback given later simply changes them. Only versions
that were actually loaded into a context count (a version skipped by the integrity check was
never used).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import timedelta
from itertools import pairwise

from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from cadre.governance import audit
from cadre.tenancy.actors import Actor
from hub.models import SkillUsage, SkillVersion
from hub.versions import parse_version, sort_key

SUCCESS = Q(feedback=SkillUsage.Outcome.SUCCESS) | Q(feedback="", run__status="completed")
FAILURE = Q(feedback=SkillUsage.Outcome.FAILURE) | Q(feedback="", run__status="failed")


def usage_outcome(usage: SkillUsage) -> str:
    """ "success", "failure" or "" (not known yet) for one usage."""
    if usage.feedback:
        return usage.feedback
    return {"completed": "success", "failed": "failure"}.get(usage.run.status, "")


def _rate(successes: int, failures: int) -> float | None:
    decided = successes + failures
    return round(successes / decided, 4) if decided else None


def success_rates(usages: QuerySet[SkillUsage], by: str = "version_id") -> dict[int, dict]:
    """{key: {"uses", "successes", "failures", "success_rate"}} in one aggregate query."""
    rows = (
        usages.filter(loaded=True)
        .values(by)
        .annotate(
            uses=Count("pk"),
            successes=Count("pk", filter=SUCCESS),
            failures=Count("pk", filter=FAILURE),
        )
    )
    return {
        row[by]: {
            "uses": row["uses"],
            "successes": row["successes"],
            "failures": row["failures"],
            "success_rate": _rate(row["successes"], row["failures"]),
        }
        for row in rows
    }


def version_success_rates(version_ids: Iterable[int]) -> dict[int, dict]:
    """Success rate per version across every organization that ran it."""
    return success_rates(SkillUsage.objects.filter(version_id__in=list(version_ids)))


def package_success_rates(package_ids: Iterable[int]) -> dict[int, dict]:
    return success_rates(SkillUsage.objects.filter(package_id__in=list(package_ids)), "package_id")


EMPTY_RATE = {"uses": 0, "successes": 0, "failures": 0, "success_rate": None}


def skills_rated(*, actor: Actor, run, outcome: str, note: str = "") -> None:
    """A rated run's skills get its outcome: the user's feedback on the run (a listener of the
    agents' `run_rate`, in its transaction; the Hub's feedback endpoint rates the run). Each
    changed usage is audited as `skill.outcome` (the alert rules read it)."""
    usages = list(
        SkillUsage.objects.select_for_update(of=("self",))
        .filter(run=run, loaded=True)
        .select_related("version__package__namespace", "run")
    )
    now = timezone.now()
    for usage in usages:
        before = usage_outcome(usage)
        usage.feedback, usage.feedback_note, usage.feedback_at = outcome, note[:500], now
        usage.save(update_fields=["feedback", "feedback_note", "feedback_at"])
        audit.record(
            actor=actor,
            action="skill.outcome",
            target=("skillusage", usage.pk, str(usage.version)),
            organization=run.organization,
            changes={
                "skill": usage.version.package.full_name,
                "version": usage.version.version,
                "run": run.pk,
                "success": outcome == SkillUsage.Outcome.SUCCESS,
                "before": before or None,
            },
            reason=note,
        )


# --- the success-rate drop -----------------------------------------------------------------


def version_success_drops(
    organization, *, min_uses: int = 20, drop: float = 0.2, days: int = 30
) -> list[dict]:
    """Versions whose success rate (in the organization's runs of the last `days`) is at least
    `drop` below the previous version's, both with `min_uses` decided outcomes or more."""
    since = timezone.now() - timedelta(days=days)
    rates = success_rates(
        SkillUsage.objects.filter(organization=organization, created_at__gte=since)
    )
    versions = SkillVersion.objects.filter(pk__in=list(rates)).select_related("package__namespace")
    by_package: dict[int, list[SkillVersion]] = defaultdict(list)
    for version in versions:
        stats = rates[version.pk]
        if stats["successes"] + stats["failures"] >= min_uses:
            by_package[version.package_id].append(version)
    drops = []
    for line in by_package.values():
        line.sort(key=lambda v: sort_key(parse_version(v.version)))
        for previous, current in pairwise(line):
            before, after = rates[previous.pk], rates[current.pk]
            if before["success_rate"] - after["success_rate"] >= drop:
                drops.append(
                    {
                        "skill": current.package.full_name,
                        "version": current.version,
                        "previous_version": previous.version,
                        "success_rate": after["success_rate"],
                        "previous_success_rate": before["success_rate"],
                        "uses": after["successes"] + after["failures"],
                        "previous_uses": before["successes"] + before["failures"],
                    }
                )
    return drops


def skill_version_drop_alerts(rule, now) -> list[tuple[str, int, str, dict]]:
    """The `skill_version_drop` alert rule kind (registered in governance's ALERT_EVALUATORS):
    one firing per version that `version_success_drops` reports."""
    params = rule.params
    drops = version_success_drops(
        rule.organization,
        min_uses=int(params.get("min_uses", 20)),
        drop=float(params.get("drop", 0.2)),
        days=int(params.get("days", 30)),
    )
    return [
        (
            f"skill:{d['skill']}@{d['version']}",
            d["uses"],
            f"Skill {d['skill']} {d['version']} succeeds {d['success_rate']:.0%}, "
            f"down from {d['previous_success_rate']:.0%} in {d['previous_version']}",
            d,
        )
        for d in drops
    ]
