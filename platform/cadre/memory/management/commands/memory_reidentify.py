"""`manage.py memory_reidentify [--organization ID] [--dry-run]`: put the originals back into
memories stored with a session's placeholders (`<PHONE_1>`), from that session's vault.

Run once after upgrading from a version that extracted memory from the model's masked text.
Safe to run again: a memory without placeholders is not touched.
"""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from cadre.memory.services.reidentify import memory_reidentify_placeholders
from cadre.tenancy.models import Organization


class Command(BaseCommand):
    help = "Re-identify memories that hold session placeholders, from the session's vault."

    def add_arguments(self, parser):
        parser.add_argument("--organization", type=int, help="Only this organization's memories")
        parser.add_argument("--dry-run", action="store_true", help="Report, change nothing")

    def handle(self, *args, **options):
        organization = None
        if options["organization"] is not None:
            organization = Organization.objects.filter(pk=options["organization"]).first()
            if organization is None:
                raise CommandError(f"no organization {options['organization']}")
        report = memory_reidentify_placeholders(
            organization=organization, dry_run=options["dry_run"]
        )
        self.stdout.write(json.dumps(report.as_dict()))
