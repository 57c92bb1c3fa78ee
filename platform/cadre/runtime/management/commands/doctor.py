"""Check the installation (database, pgvector, Redis, migrations, keys, extras)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from cadre.runtime.doctor import failed, render, run_checks


class Command(BaseCommand):
    help = "Check the database, pgvector, Redis, migrations and encryption keys; explain fixes."

    def handle(self, *args, **options):
        checks = run_checks()
        render(checks, self.stdout.write)
        if failed(checks):
            raise CommandError("doctor found problems (the FAIL lines above say how to fix them)")
