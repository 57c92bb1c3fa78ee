"""The audit sealing task, enqueued by `audit` after each commit and run by beat as a net."""

from __future__ import annotations

from celery import shared_task
from django.db import OperationalError


@shared_task(
    autoretry_for=(ConnectionError, OSError, OperationalError),
    retry_backoff=True,
    retry_jitter=True,
    max_retries=5,
)
def audit_seal(organization_id: int | None = None) -> int:
    """Seal committed audit events into their hash chain: one organization's (enqueued after
    its commits) or every organization's (beat safety net). Idempotent; returns how many."""
    # Imported when run: audit imports this module to enqueue the task.
    from cadre.governance.audit import seal

    return seal(organization=organization_id)
