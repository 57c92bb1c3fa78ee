"""Recompute an organization's audit hash chain and report the first broken link."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from cadre.governance.audit import seal, verify_chain
from cadre.tenancy.models import Organization


class Command(BaseCommand):
    help = (
        "Verify the audit hash chain of one organization (or all with --all), and that it "
        "still has the hashes of the signed chain-head digests (AUDIT_DIGEST_LOG). Events not "
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
        for organization in organizations:
            if options["seal"]:
                seal(organization=organization)
            result = verify_chain(organization)
            waiting = (
                f" ({result['unsealed']} newer events not sealed yet)" if result["unsealed"] else ""
            )
            if result["ok"]:
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


def _anchored(digests: dict) -> str:
    last = digests["last"]
    if last is None:
        return "; no signed digest yet (only the unkeyed chain was checked)"
    other = f", {digests['other_key']} by another key not checked" if digests["other_key"] else ""
    return (
        f"; {digests['trusted']} signed digest(s) match, the last at position "
        f"{last['sequence']} ({last['signed_at']}){other}"
    )
