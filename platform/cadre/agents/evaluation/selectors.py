"""Read paths of evaluation: suites with their counts and newest replay, a replay's side labels,
and who overrode a gate (from the audit trail)."""

from __future__ import annotations

from django.db.models import Count, OuterRef, QuerySet, Subquery

from cadre.agents.evaluation.models import EvalRun, EvalSuite
from cadre.governance.models import AuditEvent


def suites_for(actor) -> QuerySet[EvalSuite]:
    """The suites the actor may read, with `case_count`, `run_count` and the newest replay's
    `latest_verdict` and `latest_status`."""
    newest = EvalRun.objects.filter(suite=OuterRef("pk")).order_by("-created_at", "-pk")
    return (
        EvalSuite.objects.restrict(actor, "view")
        .select_related("template")
        .annotate(
            case_count=Count("cases", distinct=True),
            run_count=Count("runs", distinct=True),
            latest_verdict=Subquery(newest.values("verdict")[:1]),
            latest_status=Subquery(newest.values("status")[:1]),
            latest_run=Subquery(newest.values("pk")[:1]),
        )
        .order_by("name", "pk")
    )


def side_label(spec: dict) -> str:
    """A side of a replay as people read it."""
    kind = (spec or {}).get("kind", "current")
    if kind == "template_version":
        from cadre.agents.models import TemplateVersion

        number = (
            TemplateVersion.objects.filter(pk=spec.get("version"))
            .values_list("number", flat=True)
            .first()
        )
        return f"version v{number}" if number else f"version #{spec.get('version')}"
    if kind == "model":
        settings = spec.get("model_settings") or {}
        return f"model {settings.get('model') or settings.get('provider')}"
    if kind == "embedding":
        return f"embedding model {spec.get('embedding_model')}"
    return "the published version"


def gate_overrides(organization_id: int, *, replay_id: int | None = None, limit: int = 50):
    """The newest gate overrides of the organization (or of one replay): who, when, which gate,
    on what, the replay and its verdict, and the reason — as the audit trail holds them."""
    events = AuditEvent.objects.filter(
        organization_id=organization_id, action="evaluation.gate.override"
    )
    if replay_id is not None:
        events = events.filter(changes__after__replay=replay_id)
    return [
        {
            "at": event.created_at,
            "who": event.actor_label or f"{event.actor_type} {event.actor_id}",
            "actor_type": event.actor_type,
            "gate": (event.changes.get("after") or {}).get("gate", ""),
            "replay": (event.changes.get("after") or {}).get("replay"),
            "verdict": (event.changes.get("after") or {}).get("verdict"),
            "target": event.target_label or f"{event.target_type} {event.target_id}",
            "reason": event.reason,
        }
        for event in events.order_by("-created_at", "-pk")[:limit]
    ]
