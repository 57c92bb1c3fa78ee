"""Read paths of evaluation: suites with their counts and newest replay, the cases and results
a reader may see, a replay's side labels, and who overrode a gate (from the audit trail).

`evaluation.view` opens the area; a case is personal data besides when it is a person's turn
or reads memory scopes: it (and its results) shows only to a reader who may read every scope
it reads and, for a turn, is its person or holds `memory.personal`. Elsewhere it is not there
(404), as the memory it would show is not."""

from __future__ import annotations

from django.db.models import Count, OuterRef, Q, QuerySet, Subquery

from cadre.agents.evaluation.models import EvalCase, EvalResult, EvalRun, EvalSuite
from cadre.agents.models import TemplateVersion
from cadre.governance.models import AuditEvent
from cadre.memory import selectors as memory_selectors


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


def hidden_case_ids(actor) -> set[int]:
    """The actor's organization's cases it may not see although it holds `evaluation.view`:
    another person's turn (without `memory.personal`), or a case reading a scope it may not
    read."""
    if actor is None or actor.organization is None:
        return set()
    member = memory_selectors.acting_member(actor)
    personal = actor.has(memory_selectors.PERSONAL_PERMISSION)
    rows = (
        EvalCase.objects.filter(organization=actor.organization)
        .filter(Q(source=EvalCase.Source.TURN) | ~Q(scopes=[]))
        .values_list("pk", "source", "member_id", "scopes")
    )
    hidden: set[int] = set()
    with memory_selectors.scope_keys_memo():  # the actor's reach computed once, not per case
        for pk, source, member_id, scopes in rows.iterator(chunk_size=500):
            someone_elses = (
                source == EvalCase.Source.TURN
                and member_id is not None
                and not personal
                and (member is None or member_id != member.pk)
            )
            if someone_elses or not all(_may_read(actor, key) for key in scopes or []):
                hidden.add(pk)
    return hidden


def _may_read(actor, key) -> bool:
    """May the actor read this stored scope key (a malformed one, stored before keys were
    checked, is no one's)?"""
    if not isinstance(key, str):
        return False
    try:
        return memory_selectors.can_read_scope(actor, key)
    except ValueError:
        return False


def cases_for(actor) -> QuerySet[EvalCase]:
    """The cases the actor may read."""
    return EvalCase.objects.restrict(actor, "view").exclude(pk__in=hidden_case_ids(actor))


def results_for(actor, run: EvalRun) -> QuerySet[EvalResult]:
    """A replay's per-case results the actor may read (those of the cases it may read), in
    case order."""
    if not actor.has("evaluation.view") or run.organization_id != actor.organization.pk:
        return EvalResult.objects.none()
    return (
        EvalResult.objects.filter(run=run)
        .exclude(case_id__in=hidden_case_ids(actor))
        .order_by("case_id")
    )


def side_label(spec: dict) -> str:
    """A side of a replay as people read it."""
    kind = (spec or {}).get("kind", "current")
    if kind == "template_version":
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
