"""Check the installation (database, pgvector, Redis, migrations, keys, extras)."""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError
from django.utils import translation

from cadre.runtime.doctor import failed, render, run_checks
from cadre.runtime.language import installer_language


class Command(BaseCommand):
    help = "Check the database, pgvector, Redis, migrations and encryption keys; explain fixes."

    def handle(self, *args, **options):
        try:
            language = installer_language()
        except ImproperlyConfigured as error:
            raise CommandError(str(error)) from None
        with translation.override(language):  # printed in the installer's language
            checks = run_checks()
            render(checks, self.stdout.write)
        if failed(checks):
            raise CommandError("doctor found problems (the FAIL lines above say how to fix them)")
