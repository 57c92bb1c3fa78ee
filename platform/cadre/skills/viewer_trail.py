"""The skills distilled from a memory, for its provenance trail in the Memory Viewer."""

from __future__ import annotations

from cadre.skills.models import DistillationRecord


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
