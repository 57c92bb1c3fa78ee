"""The audit tasks: sealing (enqueued by `audit` after each commit, and by beat as a net) and
the signed chain-head digests (beat)."""

from __future__ import annotations

from celery import shared_task
from django.db import OperationalError

from cadre.governance.audit import digest_all, seal


@shared_task(
    autoretry_for=(ConnectionError, OSError, OperationalError),
    retry_backoff=True,
    retry_jitter=True,
    max_retries=5,
)
def audit_seal(organization_id: int | None = None) -> int:
    """Seal committed audit events into their hash chain: one organization's (enqueued after
    its commits) or every organization's (beat safety net). Idempotent; returns how many."""
    return seal(organization=organization_id)


@shared_task(
    autoretry_for=(ConnectionError, OSError, OperationalError),
    retry_backoff=True,
    retry_jitter=True,
    max_retries=5,
)
def audit_digest() -> dict:
    """Sign a digest of every organization's chain head into the digest log (beat)."""
    return digest_all()
