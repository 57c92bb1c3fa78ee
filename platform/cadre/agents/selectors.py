"""Read paths for agents: usage and cost aggregated per member, agent, template or organization."""

from __future__ import annotations

from django.db.models import Count, Sum

from cadre.agents.models import Run
from cadre.tenancy.actors import Actor

USAGE_GROUPS = {
    "member": ("member_id", "member__display_name"),
    "agent": ("agent_id", "agent__name"),
    "template": ("version__template_id", "version__template__name"),
    "organization": ("organization_id", "organization__name"),
}


def usage_summary(actor: Actor, *, by: str = "agent", since=None, until=None) -> list[dict]:
    """Runs, tokens and cost of the runs the actor may see, grouped by `by`."""
    key, label = USAGE_GROUPS[by]
    runs = Run.objects.restrict(actor, "view")
    if since is not None:
        runs = runs.filter(created_at__gte=since)
    if until is not None:
        runs = runs.filter(created_at__lt=until)
    rows = (
        runs.values(key, label)
        .annotate(
            runs=Count("id"),
            tokens_in=Sum("tokens_in"),
            tokens_out=Sum("tokens_out"),
            cost=Sum("cost"),
        )
        .order_by("-cost", key)
    )
    return [
        {
            "id": row[key],
            "label": row[label],
            "runs": row["runs"],
            "tokens_in": row["tokens_in"] or 0,
            "tokens_out": row["tokens_out"] or 0,
            "cost": str(row["cost"] or 0),
        }
        for row in rows
    ]
