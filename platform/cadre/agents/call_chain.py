"""A run's call chain: input → policy decisions → memories sent → model calls → tool calls and
their results → confirmations → reply, then the runs it delegated to, all under one trace id.
Read by the API (`GET /api/v1/runs/{id}/call-chain/`) and the console's call chain page."""

from __future__ import annotations

from datetime import UTC, datetime

from django.db.models import Prefetch
from django.utils.translation import gettext as _

from cadre.agents.models import Run, Step, ToolEffect
from cadre.agents.selectors import transcripts_readable
from cadre.errors import NotFound
from cadre.governance.models import AuditEvent, Confirmation, PolicyDecision
from cadre.identifiers import parse_pk, parse_pks
from cadre.memory.models import ContextRecord, ContextRecordItem
from cadre.tenancy.actors import Actor

# Where an event without a time sorts: the input first, the reply last, the rest by time.
_ORDER = {"inbound": 0, "reply": 2}
_EARLIEST = datetime.min.replace(tzinfo=UTC)


def _ms(start, end) -> int | None:
    if start is None or end is None:
        return None
    return int((end - start).total_seconds() * 1000)


def run_call_chain(actor: Actor, run: Run) -> dict:
    """Everything one run did, in order, and the same for every run it delegated to.

    Returns {"trace_id", "run": {...}, "events": [...], "children": [{"run", "events"}, ...],
    "hidden_children"}: each event is {"kind": inbound|policy|context|model_call|tool_call|
    hook|wait|confirmation|reply, "at", "duration_ms", "step", ...}; children are the
    delegated runs (at any depth, parents first) the actor may see, `hidden_children` how
    many others there are. The actor must be able to read the run's transcript (its
    subject, the agent's owner, or `memory.personal`: `selectors.transcripts_readable`):
    another organization's run, or a colleague's, is NotFound.
    """
    visible = transcripts_readable(actor, Run.objects.all())
    if not visible.filter(pk=run.pk).exists():
        raise NotFound(_("No such run."))
    descendants = _descendants(run)
    ids = [child.pk for child in descendants]
    shown = set(visible.filter(pk__in=ids).values_list("pk", flat=True))
    return {
        "trace_id": run.trace_id,
        **_one_run(run),
        "children": [_one_run(child) for child in descendants if child.pk in shown],
        "hidden_children": len(descendants) - len(shown),
    }


def _descendants(run: Run) -> list[Run]:
    """The runs `run` delegated to, breadth by breadth (delegation depth is bounded)."""
    found: list[Run] = []
    parents = [run.pk]
    while parents:
        level = list(
            Run.objects.filter(organization_id=run.organization_id, parent_id__in=parents)
            .exclude(pk__in=[run.pk, *(child.pk for child in found)])
            .order_by("created_at", "pk")
        )
        found += level
        parents = [child.pk for child in level]
    return found


def _one_run(run: Run) -> dict:
    events = [
        {
            "kind": "inbound",
            "at": run.created_at,
            "duration_ms": None,
            "step": None,
            "trigger": run.trigger,
            "input": run.input,
        },
        *_policy_events(run),
        *_context_events(run),
        *_step_events(run),
        *_confirmation_events(run),
    ]
    if run.output:
        events.append(
            {
                "kind": "reply",
                "at": run.finished_at,
                "duration_ms": None,
                "step": None,
                "output": run.output,
            }
        )
    events.sort(key=lambda event: (_ORDER.get(event["kind"], 1), event["at"] or _EARLIEST))
    audit_count = AuditEvent.objects.filter(
        organization_id=run.organization_id, target_type="run", target_id=str(run.pk)
    ).count()
    return {
        "run": {
            "id": run.pk,
            "status": run.status,
            "trace_id": run.trace_id,
            "agent": run.agent_id,
            "member": run.member_id,
            "session": run.session_id,
            "parent": run.parent_id,
            "depth": run.depth,
            "trigger": run.trigger,
            "created_at": run.created_at,
            "finished_at": run.finished_at,
            "duration_ms": _ms(run.started_at or run.created_at, run.finished_at),
            "tokens_in": run.tokens_in,
            "tokens_out": run.tokens_out,
            "cost": str(run.cost),
            "audit_events": audit_count,
        },
        "events": events,
    }


def _policy_events(run: Run) -> list[dict]:
    decisions = PolicyDecision.objects.filter(
        organization_id=run.organization_id, run_id=run.pk
    ).order_by("created_at", "id")
    return [
        {
            "kind": "policy",
            "at": decision.created_at,
            "duration_ms": None,
            "step": decision.step_index,
            "stage": decision.stage,
            "plugin": decision.plugin,
            "action": decision.action,
            "reason": decision.reason,
        }
        for decision in decisions
    ]


def _context_events(run: Run) -> list[dict]:
    records = (
        ContextRecord.objects.filter(organization_id=run.organization_id, run_id=str(run.pk))
        .prefetch_related(Prefetch("items", queryset=ContextRecordItem.objects.order_by("rank")))
        .order_by("created_at")
    )
    return [
        {
            "kind": "context",
            "at": record.created_at,
            "duration_ms": None,
            "step": parse_pk(str(record.step_id)),
            "query": record.query,
            "tokens": record.total_tokens,
            "record_kind": record.kind,
            "skills": record.skills,
            "memories": [
                {
                    "memory": item.memory_id,
                    "version": item.memory_version,
                    "rank": item.rank,
                    "score": item.score,
                    "tokens": item.tokens,
                    "status": item.status,
                    "source": item.source,
                    "reason": item.reason,
                    "components": item.components,
                }
                for item in record.items.all()
            ],
        }
        for record in records
    ]


def _step_events(run: Run) -> list[dict]:
    steps = list(Step.objects.filter(run=run).order_by("index"))
    effects = {
        effect.key: effect
        for effect in ToolEffect.objects.filter(key__in=[step.idempotency_key for step in steps])
    }
    events = []
    for step in steps:
        effect = effects.get(step.idempotency_key)
        status, error = _step_outcome(step, effect)
        events.append(
            {
                "kind": step.kind,
                "at": step.started_at,
                "duration_ms": step.duration_ms
                if step.duration_ms is not None
                else _ms(step.started_at, step.completed_at),
                "step": step.index,
                "name": step.name,
                "status": status,
                "tokens_in": step.tokens_in,
                "tokens_out": step.tokens_out,
                "error": error,
                "input": step.input,
                "output": step.output,
                "effect": effect.result if effect is not None else None,
            }
        )
    return events


def _step_outcome(step: Step, effect: ToolEffect | None) -> tuple[str, str]:
    """A step's status and error as the chain badges it: a tool call whose effect failed
    after the step completed (an IM message its platform refused later) is failed too."""
    result = effect.result if effect is not None and isinstance(effect.result, dict) else {}
    if step.status == Step.Status.COMPLETED and result.get("status") == "failed":
        return Step.Status.FAILED, str(result.get("reason") or "the effect failed")
    return step.status, step.error


def _confirmation_events(run: Run) -> list[dict]:
    confirmations = Confirmation.objects.filter(
        organization_id=run.organization_id, run_id=run.pk
    ).order_by("created_at")
    return [
        {
            "kind": "confirmation",
            "at": confirmation.created_at,
            "duration_ms": _ms(confirmation.created_at, confirmation.decided_at),
            "step": confirmation.step_index,
            "confirmation": confirmation.pk,
            "tool": confirmation.tool,
            "summary": confirmation.summary,
            "risk": confirmation.risk_level,
            "status": confirmation.status,
            "decided_via": confirmation.decided_via,
            "decided_by": confirmation.decided_by_id,
        }
        for confirmation in confirmations
    ]


def call_chain_runs(actor: Actor, *, run_ids=(), trace_ids=()) -> tuple[set[int], dict[str, int]]:
    """For links to call chains (audit log, confirmations): which of `run_ids` the actor may
    open, and for each of `trace_ids` the first run of that trace they may open. Two queries."""
    visible = transcripts_readable(actor, Run.objects.all())
    ids = set(parse_pks(str(pk) for pk in run_ids))
    runs = set(visible.filter(pk__in=ids).values_list("pk", flat=True)) if ids else set()
    traces: dict[str, int] = {}
    wanted = {trace for trace in trace_ids if trace}
    if wanted:
        rows = visible.filter(trace_id__in=wanted).order_by("depth", "created_at", "pk")
        for trace, pk in rows.values_list("trace_id", "pk"):
            traces.setdefault(trace, pk)
    return runs, traces
