"""The ContextRecord of one model call: exactly which memories and skill versions it was sent,
and which were withheld by policy or dropped by the context budget."""

from __future__ import annotations

from django.db import transaction

from cadre.memory.models import ContextRecord, ContextRecordItem, Memory
from cadre.observability import current_trace_id

STATUSES = set(ContextRecordItem.Status.values)
SOURCES = set(ContextRecordItem.Source.values)


@transaction.atomic
def context_record_for_model_call(
    *,
    actor,
    run_id: int,
    step_index: int,
    query: str,
    memories: list[dict],
    skills: list[dict],
    trace_id: str = "",
    retried: bool = False,
    passed_over: list[dict] | None = None,
) -> ContextRecord:
    """Record one model call's context (an operational record: ids, versions, ranks, scores
    and token estimates; memory text is never copied into it).

    `memories`: {"id", "version"?, "rank", "score", "components", "tokens", "source",
    "status": sent | withheld | dropped, "reason"}. A memory deleted meanwhile is left out;
    a memory without a version gets its current one. `retried`: the model call is done again
    after a crash — its record, if written, is returned instead of a second one.
    `passed_over`: the candidates retrieval's diversity (MMR) passed over, {"id", "version",
    "score", "components", "reason"}; None when retrieval did not report them.
    """
    run_id, step_id = str(run_id)[:64], str(step_index)[:64]
    if retried:
        existing = ContextRecord.objects.filter(
            organization=actor.organization,
            kind=ContextRecord.Kind.MODEL_CALL,
            run_id=run_id,
            step_id=step_id,
        ).first()
        if existing is not None:
            return existing
    ids = {
        item["id"] for item in [*memories, *(passed_over or [])] if isinstance(item.get("id"), int)
    }
    versions = dict(
        Memory.objects.filter(organization=actor.organization, pk__in=ids).values_list(
            "pk", "version"
        )
    )
    items = [
        item for item in memories if item.get("id") in versions and item.get("status") in STATUSES
    ]
    record = ContextRecord.objects.create(
        organization=actor.organization,
        kind=ContextRecord.Kind.MODEL_CALL,
        run_id=run_id,
        step_id=step_id,
        trace_id=str(trace_id or current_trace_id())[:32],
        actor_type=actor.kind,
        actor_id=str(actor.actor_id)[:64],
        query=query,
        total_tokens=sum(
            int(item.get("tokens") or 0)
            for item in items
            if item["status"] == ContextRecordItem.Status.SENT
        ),
        skills=[
            {
                "name": str(skill.get("name", ""))[:200],
                "version": str(skill.get("version") or "")[:64],
                "part": skill.get("part", "description"),
                "status": skill.get("status", "sent"),
            }
            for skill in skills
        ],
        passed_over=None
        if passed_over is None
        else [
            {
                "id": item["id"],
                "version": item.get("version") or versions[item["id"]],
                "score": float(item.get("score") or 0.0),
                "components": item.get("components") or {},
                "reason": str(item.get("reason") or "")[:500],
            }
            for item in passed_over
            if item.get("id") in versions
        ],
    )
    ContextRecordItem.objects.bulk_create(
        ContextRecordItem(
            context=record,
            memory_id=item["id"],
            memory_version=item.get("version") or versions[item["id"]],
            rank=max(int(item.get("rank") or 0), 0),
            score=float(item.get("score") or 0.0),
            tokens=int(item.get("tokens") or 0),
            status=item["status"],
            source=item.get("source") if item.get("source") in SOURCES else "retrieval",
            reason=str(item.get("reason") or "")[:500],
            components=item.get("components") or {},
        )
        for item in items
    )
    return record
