"""Create the demo organization, its owner and the demo data once (what `make up` runs on every
start)."""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError
from django.utils import translation

from cadre.runtime.demo import demo_setup, describe
from cadre.runtime.language import installer_language


class Command(BaseCommand):
    help = (
        "Create the 'Demo Co' organization (slug demo) with an owner account from "
        "CADRE_DEMO_EMAIL / CADRE_DEMO_PASSWORD, plus a few departments and positions and "
        "labelled demo data (see --no-demo-data). Idempotent: does nothing when it exists."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--no-demo-data",
            action="store_true",
            help="the organization only: no sample templates, agents, colleague, memories, "
            "skill, policy chain or confirmation (a production install's first organization)",
        )

    def handle(self, *args, no_demo_data=False, **options):
        try:
            language = installer_language()
            account = demo_setup(samples=not no_demo_data, language=language)
        except ImproperlyConfigured as error:
            raise CommandError(str(error)) from None
        with translation.override(language):  # printed in the installer's language
            for line in describe(account):
                self.stdout.write(line)
