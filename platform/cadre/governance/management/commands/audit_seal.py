"""Seal committed audit events into their organization's hash chain now."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from cadre.governance.audit import seal
from cadre.tenancy.models import Organization


class Command(BaseCommand):
    help = (
        "Seal the committed, not yet sealed audit events of one organization (--org) or of "
        "every organization (--all) into the hash chain. Safe to run at any time."
    )

    def add_arguments(self, parser):
        parser.add_argument("--org", help="organization slug")
        parser.add_argument("--all", action="store_true", help="seal every organization")

    def handle(self, *args, org=None, all=False, **options):
        if not org and not all:
            raise CommandError("give --org SLUG or --all")
        if org:
            organization = Organization.objects.filter(slug=org).first()
            if organization is None:
                raise CommandError(f"no organization with slug {org!r}")
            sealed = seal(organization=organization)
        else:
            sealed = seal()
        self.stdout.write(f"sealed {sealed} events")
