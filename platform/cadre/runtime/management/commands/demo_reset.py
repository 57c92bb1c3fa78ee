"""Remove the demo data `make up` seeded into Demo Co, keeping the organization's own data."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError
from django.utils import translation
from django.utils.translation import gettext as _

from cadre.runtime.demo import DEMO_SLUG
from cadre.runtime.demo_data import demo_reset
from cadre.runtime.language import installer_language
from cadre.tenancy.models import Organization


class Command(BaseCommand):
    help = (
        "Remove the sample data labelled '(demo)' (templates, their agents and conversations, "
        "the demo colleague, sample memories, the sample Hub skill, the demo policy chain). "
        "Members, templates and everything else the organization created stay."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--organization", default=DEMO_SLUG, help=f"organization slug ({DEMO_SLUG})"
        )

    def handle(self, *args, organization, **options):
        with translation.override(installer_language()):  # the installer's language
            self._reset(organization)

    def _reset(self, organization: str) -> None:
        found = Organization.objects.filter(slug=organization).first()
        if found is None:
            raise CommandError(
                _("No organization with the slug %(slug)s.") % {"slug": repr(organization)}
            )
        removed = demo_reset(organization=found)
        if removed is None:
            self.stdout.write(
                _("No demo data in %(name)s (never seeded, or removed already).")
                % {"name": found.name}
            )
            return
        summary = ", ".join(f"{count} {name}" for name, count in removed.items())
        self.stdout.write(
            _("Demo data removed from %(name)s: %(summary)s.")
            % {"name": found.name, "summary": summary}
        )
