"""Create the demo organization and its owner once (what `make up` runs on every start)."""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError

from cadre.runtime.demo import demo_setup, describe


class Command(BaseCommand):
    help = (
        "Create the 'Demo Co' organization (slug demo) with an owner account from "
        "CADRE_DEMO_EMAIL / CADRE_DEMO_PASSWORD, plus a few departments and positions. "
        "Idempotent: does nothing when it exists."
    )

    def handle(self, *args, **options):
        try:
            account = demo_setup()
        except ImproperlyConfigured as error:
            raise CommandError(str(error)) from None
        for line in describe(account):
            self.stdout.write(line)
