"""A memory's provenance trail: where it came from, every version and merge (with the memories
merged in), every recorded model call that considered it (and those where policy withheld or
masked it), and the skills distilled from it."""

from __future__ import annotations

from django.db.models.functions import Left

from cadre.memory import selectors
from cadre.memory.models import ContextRecordItem, MemoryVersion
from cadre.skills.models import DistillationRecord

PREVIEW_CHARS = 80


def skills_from_memory(organization_id: int, memory_id: int) -> list[dict]:
    """Memory-to-skill clusters that included the memory: kept ones name their candidate."""
    records = (
        DistillationRecord.objects.filter(
            organization_id=organization_id, memory_ids__contains=[memory_id]
        )
        .select_related("candidate")
        .order_by("created_at", "pk")
    )
    return [
        {
            "kind": "distillation",
            "id": record.pk,
            "name": record.name,
            "kept": record.kept,
            "reason": record.reason,
            "candidate_id": record.candidate_id,
            "candidate_status": record.candidate.status if record.candidate else "",
            "created_at": record.created_at,
        }
        for record in records
    ]


def memory_trail(actor, memory_id) -> dict:
    """404 (NotFound) unless the actor may read the memory. Model calls are those the actor
    may see (selectors.context_record_queryset); merged-in memories are listed by id, with a
    preview only where the actor may read them."""
    memory = selectors.memory_get(actor, memory_id)
    versions = list(MemoryVersion.objects.filter(memory=memory).order_by("version", "id"))
    merged_ids = {
        entry.get("memory_id")
        for entry in memory.provenance[1:]
        if isinstance(entry, dict) and entry.get("memory_id")
    }
    merged_ids |= {
        version.related_memory_id
        for version in versions
        if version.change == MemoryVersion.Change.MERGE and version.related_memory_id
    }
    merged_ids |= set(memory.supersedes.values_list("pk", flat=True))
    merged_ids.discard(memory.pk)
    readable = {
        row["id"]: row
        for row in selectors.memory_queryset(actor)
        .filter(pk__in=merged_ids)
        .annotate(preview=Left("content", PREVIEW_CHARS))
        .values("id", "kind", "status", "preview")
    }
    items = (
        ContextRecordItem.objects.filter(
            memory=memory, context__in=selectors.context_record_queryset(actor)
        )
        .select_related("context")
        .order_by("-context__created_at", "-context_id")
    )
    calls = [
        {
            "context_record_id": item.context_id,
            "kind": item.context.kind,
            "run_id": item.context.run_id,
            "step_id": item.context.step_id,
            "created_at": item.context.created_at,
            "memory_version": item.memory_version,
            "rank": item.rank,
            "score": item.score,
            "status": item.status,
            "source": item.source,
            "reason": item.reason,
        }
        for item in items[:200]
    ]
    skills = skills_from_memory(actor.organization.pk, memory.pk)
    return {
        "memory": {
            "id": memory.pk,
            "kind": memory.kind,
            "status": memory.status,
            "scope_key": memory.scope_key,
            "version": memory.version,
            "created_at": memory.created_at,
        },
        "origin": {
            "source_kind": memory.source_kind,
            "source_ref": memory.source_ref,
            "conversation_id": memory.conversation_id,
            "author_type": memory.author_type,
            "author_id": memory.author_id,
            "author_label": memory.author_label,
            "observed_at": memory.observed_at,
        },
        "sources": [entry for entry in memory.provenance if isinstance(entry, dict)],
        "versions": versions,
        "merged": [
            readable.get(pk, {"id": pk, "kind": "", "status": "", "preview": ""})
            for pk in sorted(merged_ids)
        ],
        "merge_count": sum(v.change == MemoryVersion.Change.MERGE for v in versions),
        "model_calls": calls,
        "model_call_count": items.count(),
        "withheld": [call for call in calls if call["status"] != ContextRecordItem.Status.SENT],
        # Sent, but masked by the policy chain on the way (the reason says what was masked).
        "masked": [
            call
            for call in calls
            if call["status"] == ContextRecordItem.Status.SENT
            and call["reason"].startswith("masked")
        ],
        "skills": skills,
    }
