"""Governance read paths: a run's call chain (inbound → policy → context → model → tools →
confirmations → reply, with timings) for the console and the API."""

from __future__ import annotations

from cadre.errors import NotFound
from cadre.governance.models import AuditEvent, Confirmation, PolicyDecision


def _iso(value) -> str | None:
    return value.isoformat() if value is not None else None


def _ms(start, end) -> int | None:
    if start is None or end is None:
        return None
    return int((end - start).total_seconds() * 1000)


def run_call_chain(actor, run) -> dict:
    """Everything one run did, in order, linked by run/step ids and the trace id.

    Returns {"run": {...}, "events": [...], "children": [run ids]} where each event is
    {"kind": inbound|policy|context|model_call|tool_call|hook|wait|confirmation|reply,
     "at", "duration_ms", "step", ...}. The actor must be able to see the run (agent.view,
    or their own agent); policy decisions and confirmations come with it.
    """
    from cadre.agents.models import Run

    if not Run.objects.restrict(actor, "view").filter(pk=run.pk).exists():
        raise NotFound("No such run.")
    events: list[dict] = [
        {
            "kind": "inbound",
            "at": _iso(run.created_at),
            "duration_ms": None,
            "step": None,
            "trigger": run.trigger,
            "input": run.input,
        }
    ]
    decisions = PolicyDecision.objects.filter(
        organization_id=run.organization_id, run_id=run.pk
    ).order_by("created_at", "id")
    for decision in decisions:
        events.append(
            {
                "kind": "policy",
                "at": _iso(decision.created_at),
                "duration_ms": None,
                "step": decision.step_index,
                "stage": decision.stage,
                "plugin": decision.plugin,
                "action": decision.action,
                "reason": decision.reason,
            }
        )
    try:
        from cadre.memory.models import ContextRecord
    except ImportError:  # pragma: no cover - the memory app is always installed
        ContextRecord = None
    if ContextRecord is not None:
        records = (
            ContextRecord.objects.filter(organization_id=run.organization_id, run_id=str(run.pk))
            .prefetch_related("items")
            .order_by("created_at")
        )
        for record in records:
            events.append(
                {
                    "kind": "context",
                    "at": _iso(record.created_at),
                    "duration_ms": None,
                    "step": int(record.step_id) if str(record.step_id).isdigit() else None,
                    "query": record.query,
                    "tokens": record.total_tokens,
                    "memories": [
                        {
                            "memory": item.memory_id,
                            "version": item.memory_version,
                            "rank": item.rank,
                            "score": item.score,
                        }
                        for item in record.items.all()
                    ],
                }
            )
    for step in run.steps.order_by("index"):
        events.append(
            {
                "kind": step.kind,
                "at": _iso(step.started_at),
                "duration_ms": step.duration_ms
                if step.duration_ms is not None
                else _ms(step.started_at, step.completed_at),
                "step": step.index,
                "name": step.name,
                "status": step.status,
                "tokens_in": step.tokens_in,
                "tokens_out": step.tokens_out,
                "error": step.error,
            }
        )
    confirmations = Confirmation.objects.filter(
        organization_id=run.organization_id, run_id=run.pk
    ).order_by("created_at")
    for confirmation in confirmations:
        events.append(
            {
                "kind": "confirmation",
                "at": _iso(confirmation.created_at),
                "duration_ms": _ms(confirmation.created_at, confirmation.decided_at),
                "step": confirmation.step_index,
                "confirmation": confirmation.pk,
                "tool": confirmation.tool,
                "risk": confirmation.risk_level,
                "status": confirmation.status,
                "decided_via": confirmation.decided_via,
                "decided_by": confirmation.decided_by_id,
            }
        )
    if run.output:
        events.append(
            {
                "kind": "reply",
                "at": _iso(run.finished_at),
                "duration_ms": None,
                "step": None,
                "output": run.output,
            }
        )
    order = {"inbound": 0, "reply": 2}
    events.sort(key=lambda event: (order.get(event["kind"], 1), event["at"] or ""))
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
            "parent": run.parent_id,
            "created_at": _iso(run.created_at),
            "finished_at": _iso(run.finished_at),
            "duration_ms": _ms(run.started_at or run.created_at, run.finished_at),
            "tokens_in": run.tokens_in,
            "tokens_out": run.tokens_out,
            "cost": str(run.cost),
            "audit_events": audit_count,
        },
        "events": events,
        "children": list(run.children.order_by("pk").values_list("pk", flat=True)),
    }
