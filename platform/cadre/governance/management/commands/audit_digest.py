"""Sign a digest of each organization's audit chain head now (beat does it periodically)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from cadre.governance.audit import digest_all


class Command(BaseCommand):
    help = (
        "Seal committed audit events, check each chain from its last signed digest to its "
        "head, and store a signed digest of every head that moved in the audit_anchors storage."
    )

    def handle(self, *args, **options):
        result = digest_all()
        self.stdout.write(f"{result['written']} digest(s) signed")
        if result["broken"]:
            raise CommandError(
                f"no digest signed for organization(s) {result['broken']}: the chain no longer "
                "extends its last signed digest (run audit_verify --all)"
            )
