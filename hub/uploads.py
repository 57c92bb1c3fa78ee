"""Upload tickets of the ClawHub-compatible publish flow: asking, uploading, publishing, cleanup.

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

import hashlib
import logging
import secrets
from collections.abc import Callable
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext

from cadre.errors import InvalidInput, NotFound
from cadre.governance import audit
from cadre.tenancy.actors import Actor, system_actor
from cadre.tenancy.models import Organization
from hub import services
from hub.bundles import LIMITS, bundle_from_files, content_type_for, safe_path
from hub.models import UploadTicket

logger = logging.getLogger(__name__)

UPLOAD_TICKET_MINUTES = 30
PURGE_BATCH = 5000  # tickets per organization and transaction; the rest go in the next batch


def upload_ticket_create(
    *, actor: Actor, path: str, size, sha256: str, content_type: str = ""
) -> UploadTicket:
    """A ticket for one file of a coming publish: its path, size and SHA-256 announced."""
    actor.require("skill.publish")
    path = safe_path(path)
    sha256 = sha256.lower()
    if not isinstance(size, int) or size < 0 or size > LIMITS.max_file_bytes:
        raise InvalidInput(
            gettext("size must be 0..%(limit)s bytes.") % {"limit": LIMITS.max_file_bytes}
        )
    if len(sha256) != 64:
        raise InvalidInput(gettext("sha256 must be 64 hex characters."))
    # Expired and abandoned tickets are removed by the beat task `upload_tickets_purge`.
    return UploadTicket.objects.create(
        organization=actor.organization,
        ticket=secrets.token_urlsafe(24),
        path=path,
        size=size,
        sha256=sha256,
        content_type=(content_type or content_type_for(path))[:128],
        created_by=actor.member,
        expires_at=timezone.now() + timedelta(minutes=UPLOAD_TICKET_MINUTES),
    )


def upload_ticket_receive(
    *, actor: Actor, ticket: str, read: Callable[[int], bytes]
) -> UploadTicket:
    """Store one ticketed file's bytes, read with `read(limit)` while the ticket is locked."""
    actor.require("skill.publish")
    with transaction.atomic():
        found = (
            UploadTicket.objects.select_for_update()
            .filter(organization=actor.organization, ticket=ticket, expires_at__gt=timezone.now())
            .first()
        )
        if found is None:
            raise NotFound(gettext("Upload ticket not found or expired."))
        content = read(LIMITS.max_file_bytes + 1)
        if len(content) != found.size:
            raise InvalidInput(
                gettext("Expected %(size)s bytes, got %(received)s.")
                % {"size": found.size, "received": len(content)}
            )
        if hashlib.sha256(content).hexdigest() != found.sha256:
            raise InvalidInput(gettext("The uploaded bytes do not match the announced sha256."))
        found.content, found.uploaded_at = content, timezone.now()
        found.save(update_fields=["content", "uploaded_at"])
    return found


def upload_tickets_publish(
    *,
    actor: Actor,
    slug: str,
    version: str,
    files: list,
    namespace: str | None = None,
    changelog: str = "",
    display_name: str = "",
    tags: list[str] | tuple[str, ...] = (),
) -> services.PublishOutcome:
    """Publish a version from uploaded files (`{path, uploadTicket}` each), then consume
    their tickets."""
    actor.require("skill.publish")
    if len(files) > LIMITS.max_files:
        raise InvalidInput(
            gettext("At most %(max_files)s files.") % {"max_files": LIMITS.max_files}
        )
    tickets = {
        ticket.ticket: ticket
        for ticket in UploadTicket.objects.filter(
            organization=actor.organization,
            ticket__in=[
                str(f.get("uploadTicket") or f.get("storageId"))
                for f in files
                if isinstance(f, dict)
            ],
            uploaded_at__isnull=False,
            expires_at__gt=timezone.now(),
        )
    }
    contents: dict[str, bytes] = {}
    for entry in files:
        if not isinstance(entry, dict):
            raise InvalidInput(gettext("Each file is an object."))
        ticket = tickets.get(str(entry.get("uploadTicket") or entry.get("storageId")))
        if ticket is None or ticket.path != entry.get("path"):
            raise InvalidInput(
                gettext("No finished upload for %(path)r.") % {"path": entry.get("path")}
            )
        contents[ticket.path] = bytes(ticket.content)
    bundle = bundle_from_files(contents, folder_name=slug)
    outcome = services.package_publish(
        actor=actor,
        bundle=bundle,
        version=version,
        namespace=namespace,
        name=slug,
        changelog=changelog,
        display_name=display_name,
        tags=tags,
    )
    UploadTicket.objects.filter(pk__in=[t.pk for t in tickets.values()]).delete()
    return outcome


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
