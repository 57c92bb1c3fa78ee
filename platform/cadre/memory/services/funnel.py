"""The asynchronous dedup stages (near duplicate + judge, conflict rule) and organization."""

from __future__ import annotations

import json

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext
from opentelemetry import trace

from cadre.errors import InvalidInput
from cadre.governance import audit
from cadre.memory import dedup, embeddings, turns
from cadre.memory.models import (
    Kind,
    Memory,
    MemoryEmbedding,
    MemoryVersion,
    SourceKind,
    Verification,
)
from cadre.memory.services.common import (
    NEAR_REASON,
    audit_view,
    capped_provenance,
    lock,
    write_version,
)
from cadre.memory.services.writes import memory_add, memory_supersede, memory_update
from cadre.memory.statements import is_question
from cadre.tenancy.actors import system_actor

tracer = trace.get_tracer(__name__)
OBSERVATIONS = (Kind.EXPERIENCE, Kind.TOOL_TRAJECTORY)


# --- dedup (asynchronous stage) --------------------------------------------------------------


@tracer.start_as_current_span("memory.dedup")
def memory_dedup(*, memory: Memory, judge=None) -> dict:
    """Near-duplicate and judge stages for one memory (the exact stage ran at write time).

    duplicate -> the new item is merged into the older one (both provenances kept);
    update    -> the conflict rule decides which one supersedes the other;
    new       -> nothing changes.
    """
    memory = Memory.objects.select_related("organization").get(pk=memory.pk)
    if memory.status != Memory.Status.ACTIVE:
        return {"decision": "skipped", "reason": f"memory is {memory.status}"}
    if memory.verification != Verification.VERIFIED:
        # Waiting for review (or refused): it must not absorb, supersede or archive a memory
        # models are sent. Dedup runs when it is accepted (services.memory_verify).
        return {"decision": "skipped", "reason": f"memory is {memory.verification}"}
    if memory.kind in OBSERVATIONS:
        # One run's record: two runs that went alike are two cases for distillation, and a
        # later call does not "update" an earlier one (the exact stage still merges repeats).
        return {"decision": "skipped", "reason": f"{memory.kind} records are kept one per run"}
    if turns.turn_position(memory) is not None:
        # A conversation turn's vector holds the turn before it (turns.py): its similarity to
        # another memory no longer says the two texts say the same, and a turn said again later
        # is another turn of the conversation (the exact stage still merges a repeated write).
        return {"decision": "skipped", "reason": "conversation turns are kept one per position"}
    model = embeddings.active_model(memory.organization_id)
    row = MemoryEmbedding.objects.filter(memory=memory, model=model).first()
    if row is None:
        embeddings.embed_memories([memory], model)
        row = MemoryEmbedding.objects.filter(memory=memory, model=model).first()
        if row is None:
            return {"decision": "skipped", "reason": "memory could not be embedded"}
    # Like with like: a question (stored before questions were refused, or through the API)
    # never merges with, updates or archives a statement, nor a statement a question.
    asks = is_question(memory.content)
    candidates = [
        candidate
        for candidate in dedup.near_candidates(memory, list(row.embedding), model)
        if candidate.memory.verification == Verification.VERIFIED
        and is_question(candidate.memory.content) == asks
    ]
    decision = (judge or dedup.judge()).judge(memory, candidates)
    outcome = decision.as_dict()
    outcome["candidates"] = [
        {"id": c.memory.pk, "similarity": round(c.similarity, 4)} for c in candidates
    ]
    if decision.decision == dedup.NEW or decision.target is None:
        return outcome
    actor = system_actor(memory.organization, label="memory dedup")
    with transaction.atomic():
        target = lock(decision.target)
        memory = lock(memory)
        if target.status != Memory.Status.ACTIVE or memory.status != Memory.Status.ACTIVE:
            return {**outcome, "decision": "skipped", "reason": "changed meanwhile"}
        if decision.decision == dedup.DUPLICATE:
            memory_merge(
                actor=actor,
                survivor=target,
                absorbed=memory,
                reason=decision.reason,
                judge=decision.judge,
            )
            outcome["kept"] = target.pk
        else:
            newer, older = (memory, target) if dedup.outranks(memory, target) else (target, memory)
            rule = (
                f"{newer.source_kind} over {older.source_kind}"
                if dedup.authority(newer.source_kind) != dedup.authority(older.source_kind)
                else f"newer {newer.source_kind} over older"
            )
            if newer.pk == memory.pk:
                memory_supersede(
                    actor=actor,
                    old=target,
                    new=memory,
                    change=MemoryVersion.Change.STATE_CHANGE,
                    reason=f"updated by memory {memory.pk} ({rule}; "
                    f"judge {decision.judge}: {decision.reason})",
                    audit_reason=f"dedup update: {rule}",
                )
            else:
                _archive_weaker(
                    actor=actor, weaker=memory, stronger=target, rule=rule, judge=decision.judge
                )
            outcome["kept"] = newer.pk
            outcome["rule"] = rule
    return outcome


def _archive_weaker(*, actor, weaker: Memory, stronger: Memory, rule: str, judge: str) -> None:
    """A lower-authority claim that contradicts a stronger one is kept, archived, not used."""
    before = audit_view(weaker)
    weaker.status = Memory.Status.ARCHIVED
    weaker.superseded_by = stronger
    weaker.version += 1
    weaker.updated_at = timezone.now()
    weaker.save(update_fields=["status", "superseded_by", "version", "updated_at"])
    write_version(
        weaker,
        change=MemoryVersion.Change.STATE_CHANGE,
        actor=actor,
        reason=f"conflicts with memory {stronger.pk}, which wins ({rule}; judge {judge})",
        old_status=Memory.Status.ACTIVE,
        related=stronger,
    )
    audit.record(
        actor=actor,
        action="memory.supersede",
        target=weaker,
        before=before,
        after={**audit_view(weaker), "superseded_by": stronger.pk},
        reason=f"dedup conflict: {rule}",
    )


def memory_merge(*, actor, survivor: Memory, absorbed: Memory, reason: str, judge: str) -> Memory:
    """Merge a duplicate into the surviving item, keeping both provenances; both get a
    `merge` version and the merge is audited (ids only). A statement and a derived record
    (dedup.comparable) never merge."""
    if not dedup.comparable(absorbed, survivor):
        raise InvalidInput(
            gettext("A %(kind)s memory cannot merge into a %(kind2)s memory.")
            % {"kind": absorbed.kind, "kind2": survivor.kind},
            code="derived_memory",
        )
    survivor.provenance = capped_provenance([*survivor.provenance, *absorbed.provenance])
    survivor.tags = list(dict.fromkeys([*survivor.tags, *absorbed.tags]))
    survivor.observed_at = max(survivor.observed_at, absorbed.observed_at)
    survivor.confidence = max(survivor.confidence, absorbed.confidence)
    survivor.version += 1
    survivor.updated_at = timezone.now()
    survivor.save(
        update_fields=["provenance", "tags", "observed_at", "confidence", "version", "updated_at"]
    )
    write_version(
        survivor,
        change=MemoryVersion.Change.MERGE,
        actor=actor,
        reason=f"merged memory {absorbed.pk} ({judge}: {reason})",
        old_status=survivor.status,
        related=absorbed,
    )
    absorbed.status = Memory.Status.SUPERSEDED
    absorbed.superseded_by = survivor
    absorbed.valid_to = None
    absorbed.version += 1
    absorbed.updated_at = timezone.now()
    absorbed.save(update_fields=["status", "superseded_by", "version", "updated_at"])
    write_version(
        absorbed,
        change=MemoryVersion.Change.MERGE,
        actor=actor,
        reason=f"{NEAR_REASON} memory {survivor.pk} ({judge}: {reason})",
        old_status=Memory.Status.ACTIVE,
        related=survivor,
    )
    audit.record(
        actor=actor,
        action="memory.merge",
        target=survivor,
        changes={
            "decision": "duplicate",
            "judge": judge,
            "kept": survivor.pk,
            "absorbed": absorbed.pk,
            "survivor": audit_view(survivor),
            "provenance_count": len(survivor.provenance),
        },
        reason="near duplicate",
    )
    return survivor


# --- organization (asynchronous) ---------------------------------------------------------------

ORGANIZE_MIN_CALLS = 3


def memory_organize(*, memory: Memory) -> dict:
    """Keep one `summary` memory per tool and scope once a tool has several recorded calls:
    how often it was called, how often it failed, which runs — so a later run finds "how this
    tool behaves here" in one item instead of many trajectories."""
    memory = Memory.objects.select_related("organization").get(pk=memory.pk)
    tool = (memory.attributes or {}).get("tool")
    if memory.kind != Kind.TOOL_TRAJECTORY or not tool:
        return {"organized": False, "reason": "nothing to organize for this kind"}
    calls = list(
        Memory.objects.filter(
            organization=memory.organization,
            scope_key=memory.scope_key,
            kind=Kind.TOOL_TRAJECTORY,
            status=Memory.Status.ACTIVE,
            # The summary is written verified: only calls already verified may feed it.
            verification=Verification.VERIFIED,
            attributes__tool=tool,
        ).order_by("observed_at", "pk")
    )
    if len(calls) < ORGANIZE_MIN_CALLS:
        return {"organized": False, "reason": f"{len(calls)} calls so far"}
    failures = sum(1 for call in calls if not call.attributes.get("ok", True))
    last_parameters = json.dumps(
        calls[-1].attributes.get("parameters", {}), ensure_ascii=False, sort_keys=True
    )
    content = (
        f"Tool {tool}: {len(calls)} recorded calls in this scope, {failures} failed. "
        f"Most recent parameters: {last_parameters[:800]}"
    )
    attributes = {
        "tool": tool,
        "calls": len(calls),
        "failures": failures,
        "summary_of": [call.pk for call in calls][-200:],
        "keywords": [tool],
    }
    actor = system_actor(memory.organization, label="memory organizer")
    scope_name, _, raw_id = memory.scope_key.partition(":")
    with transaction.atomic():
        summary = (
            Memory.objects.select_for_update()
            .filter(
                organization=memory.organization,
                scope_key=memory.scope_key,
                kind=Kind.SUMMARY,
                status=Memory.Status.ACTIVE,
                attributes__tool=tool,
                source_kind=SourceKind.SYSTEM,
            )
            .first()
        )
        if summary is None:
            summary = memory_add(
                actor=actor,
                scope=scope_name,
                scope_id=int(raw_id) if raw_id else None,
                kind=Kind.SUMMARY,
                content=content,
                attributes=attributes,
                source_kind=SourceKind.SYSTEM,
                tags=[f"tool:{tool}"[:64]],
            )
        elif summary.content != content:
            summary = memory_update(
                actor=actor,
                memory=summary,
                expected_version=summary.version,
                content=content,
                attributes=attributes,
                reason="tool summary refreshed",
            )
    return {"organized": True, "summary_id": summary.pk, "calls": len(calls)}
