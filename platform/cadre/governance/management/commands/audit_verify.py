"""Recompute an organization's audit hash chain and report the first broken link."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from cadre.governance import audit_digest
from cadre.governance.audit import seal, verify_chain
from cadre.governance.audit_models import AuditEvent
from cadre.tenancy.models import Organization

# Beat signs a digest every CADRE_AUDIT_DIGEST_INTERVAL seconds; a chain whose first event is
# older than this many intervals has been through several without one.
UNANCHORED_INTERVALS = 3


class Command(BaseCommand):
    help = (
        "Verify the audit hash chain of one organization (or all with --all), and that it "
        "still has the hashes of the signed chain-head digests (the audit_anchors storage). "
        "With CADRE_CLUSTER set, no digest at all fails. Events not "
        "sealed yet are counted, not checked; --seal seals them first."
    )

    def add_arguments(self, parser):
        parser.add_argument("--org", help="organization slug")
        parser.add_argument("--all", action="store_true", help="verify every organization")
        parser.add_argument(
            "--seal", action="store_true", help="seal committed events into the chain first"
        )

    def handle(self, *args, org=None, all=False, **options):
        if not org and not all:
            raise CommandError("give --org SLUG or --all")
        organizations = Organization.objects.order_by("slug")
        if org:
            organizations = organizations.filter(slug=org)
            if not organizations.exists():
                raise CommandError(f"no organization with slug {org!r}")
        failed = False
        if settings.CLUSTER and not audit_digest.any_written() and _any_sealed(organizations):
            # On several machines the anchors are the one thing a database writer cannot
            # rewrite; none at all means they are written where this machine does not read.
            failed = True
            self.stdout.write(
                f"UNANCHORED: CADRE_CLUSTER is set but there is no signed digest at all in "
                f"{audit_digest.location()}: the anchor storage is not the one beat writes "
                "to (check CADRE_S3_ANCHOR_BUCKET / CADRE_S3_BUCKET on every machine), was "
                "emptied, or beat has never run; no chain is anchored"
            )
        for organization in organizations:
            if options["seal"]:
                seal(organization=organization)
            result = verify_chain(organization)
            waiting = (
                f" ({result['unsealed']} newer events not sealed yet)" if result["unsealed"] else ""
            )
            unanchored = result["ok"] and _should_be_anchored(organization, result["digests"])
            if unanchored:
                failed = True
                other = result["digests"]["other_key"]
                others = (
                    f" ({other} digest(s) are signed by another key: another installation's "
                    "anchors, a restore without this installation's CADRE_SIGNING_KEY, or a key "
                    "rotated less than one digest interval ago)"
                    if other
                    else ""
                )
                self.stdout.write(
                    f"{organization.slug}: UNANCHORED{others}, {result['checked']} events "
                    "verified but "
                    f"no signed digest anchors them, though its first event is older than "
                    f"{UNANCHORED_INTERVALS} digest intervals: the signed digests "
                    f"({audit_digest.location()}) are missing or not this installation's "
                    "(on several machines every one must read the same object storage), or "
                    "beat is not running; the chain is checked against nothing but itself"
                )
            elif result["ok"]:
                self.stdout.write(
                    f"{organization.slug}: OK, {result['checked']} events verified{waiting}"
                    f"{_anchored(result['digests'])}"
                )
            else:
                failed = True
                broken = result["broken"]
                self.stdout.write(
                    f"{organization.slug}: BROKEN at position {broken['position']} "
                    f"(event id {broken['event_id']}): {broken['problem']}; "
                    f"{result['checked']} events before it are intact{waiting}"
                )
        if failed:
            raise CommandError("audit chain verification failed")


def _any_sealed(organizations) -> bool:
    return AuditEvent.objects.filter(
        organization__in=organizations, sequence__isnull=False
    ).exists()


def _should_be_anchored(organization, digests: dict) -> bool:
    """No signed digest, and the chain's first sealed event is older than several of beat's
    digest intervals: the anchors were lost (or were never where this machine reads them)."""
    if digests["last"] is not None:  # digests by another key anchor nothing (audit_digest)
        return False
    first = (
        AuditEvent.objects.filter(organization=organization, sequence__isnull=False)
        .order_by("sequence")
        .values_list("created_at", flat=True)
        .first()
    )
    interval = settings.CELERY_BEAT_SCHEDULE["governance-audit-digest"]["schedule"]
    horizon = timedelta(seconds=UNANCHORED_INTERVALS * float(interval))
    return first is not None and first < timezone.now() - horizon


def _anchored(digests: dict) -> str:
    last = digests["last"]
    if last is None:
        return "; no signed digest yet (only the unkeyed chain was checked)"
    other = f", {digests['other_key']} by another key not checked" if digests["other_key"] else ""
    return (
        f"; {digests['trusted']} signed digest(s) match, the last at position "
        f"{last['sequence']} ({last['signed_at']}){other}"
    )
