"""Skill lifecycle background work: memory-to-skill distillation per organization, and telling
the IM connectors of a new skill proposal."""

from __future__ import annotations

from celery import shared_task

from cadre.memory.embeddings import EmbeddingError
from cadre.skills import services
from cadre.tenancy.models import Organization


@shared_task(
    name="skills.memory_distill",
    autoretry_for=(EmbeddingError,),
    retry_backoff=True,
    retry_jitter=True,
    max_retries=3,
)
def memory_distill(organization_id: int | None = None) -> dict:
    """Distill skills from memory for one organization (or every active one). Idempotent:
    clusters already looked at are skipped."""
    organizations = Organization.objects.filter(status=Organization.Status.ACTIVE)
    if organization_id is not None:
        organizations = organizations.filter(pk=organization_id)
    done = {}
    for organization in organizations:
        records = services.memory_distill(organization=organization)
        done[organization.slug] = {
            "kept": sum(1 for r in records if r.kept),
            "dropped": sum(1 for r in records if not r.kept),
        }
    return done


@shared_task(
    name="skills.proposal_notify",
    autoretry_for=(ConnectionError, OSError),
    retry_backoff=True,
    retry_jitter=True,
    max_retries=5,
)
def proposal_notify(proposal_id: int) -> int:
    """Bring a new skill proposal to the employee through the IM connectors (its card)."""
    return services.proposal_send_cards(proposal_id=proposal_id)
