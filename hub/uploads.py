"""Upload tickets of the ClawHub-compatible publish flow, and their periodic cleanup.

`clawhub publish` asks for one ticket per file (`POST /api/v1/skills/-/upload-url`), sends the
file's bytes to the ticket's URL, then publishes the version from the tickets
(`POST /api/v1/skills`), which consumes them. A ticket that is never consumed — the CLI was
interrupted, the publish was refused, the bytes never came — is abandoned; it expires
`UPLOAD_TICKET_MINUTES` after it was asked for and is no longer accepted by either step.

`upload_tickets_purge` (the beat task `hub.tasks.upload_tickets_purge`) deletes the expired
tickets together with their staged bytes. It is idempotent, and records one audit event per
organization and run with the counts — never one per ticket: tickets are transient plumbing,
and the publish that used them is audited on its own.
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from cadre.governance import audit
from cadre.tenancy.actors import system_actor
from cadre.tenancy.models import Organization
from hub.models import UploadTicket

logger = logging.getLogger(__name__)

UPLOAD_TICKET_MINUTES = 30
PURGE_BATCH = 5000  # tickets per organization and transaction; the rest go in the next batch


def expired_tickets(now: datetime | None = None):
    """Tickets past their expiry: no longer accepted for upload nor for publishing."""
    return UploadTicket.objects.filter(expires_at__lte=now or timezone.now())


def upload_tickets_purge(*, now: datetime | None = None, batch: int = PURGE_BATCH) -> int:
    """Delete every expired upload ticket and its staged bytes; the number deleted.

    Runs organization by organization, each batch in its own transaction with its audit
    event (`hub.upload_ticket.purge`, the counts only). Running it again deletes nothing and
    records nothing.
    """
    now = now or timezone.now()
    organization_ids = list(
        expired_tickets(now).order_by().values_list("organization_id", flat=True).distinct()
    )
    total = 0
    for organization_id in organization_ids:
        while True:
            removed = _purge_batch(organization_id, now, batch)
            total += removed
            if removed < batch:
                break
    if total:
        logger.info("hub: removed %d expired upload tickets", total)
    return total


@transaction.atomic
def _purge_batch(organization_id: int, now: datetime, batch: int) -> int:
    # skip_locked: a ticket whose bytes are being received right now (its row is locked by
    # the upload) is left for the next run instead of making the cleanup wait.
    rows = list(
        expired_tickets(now)
        .filter(organization_id=organization_id)
        .select_for_update(skip_locked=True)
        .order_by("pk")
        .values_list("pk", "size", "uploaded_at")[:batch]
    )
    if not rows:
        return 0
    removed, _ = UploadTicket.objects.filter(pk__in=[pk for pk, _, _ in rows]).delete()
    staged = [size for _, size, uploaded_at in rows if uploaded_at is not None]
    organization = Organization.objects.get(pk=organization_id)
    audit.record(
        actor=system_actor(organization, label="upload ticket cleanup"),
        action="hub.upload_ticket.purge",
        target=("organization", organization.pk, organization.name),
        changes={
            "removed": removed,
            "with_staged_bytes": len(staged),
            "staged_bytes": sum(staged),
            "expired_before": now.isoformat(),
        },
        reason="expired upload tickets (abandoned publishes)",
    )
    return removed
