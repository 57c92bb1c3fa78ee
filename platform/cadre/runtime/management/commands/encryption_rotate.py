"""Re-encrypt every stored secret under the newest key of CADRE_ENCRYPTION_KEY."""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from cadre.crypto import rotate_stored_values


class Command(BaseCommand):
    help = (
        "Re-encrypt stored secrets under the first key of CADRE_ENCRYPTION_KEY. Rotation: "
        "prepend a new key, run this, check `doctor`, then remove the old key."
    )

    def handle(self, *args, **options):
        keys = len(settings.CADRE_ENCRYPTION_KEYS)
        reports = rotate_stored_values()
        for report in reports:
            line = f"{report.label}: {report.rotated} rotated, {report.current} already current"
            if report.unreadable:
                line += f", {report.unreadable} unreadable (ids {report.unreadable_ids})"
            self.stdout.write(line)
        rotated = sum(r.rotated for r in reports)
        current = sum(r.current for r in reports)
        unreadable = sum(r.unreadable for r in reports)
        self.stdout.write(
            f"{len(reports)} encrypted field(s), {keys} key(s): {rotated} value(s) rotated, "
            f"{current} already under the newest key, {unreadable} unreadable"
        )
        if unreadable:
            raise CommandError(
                "some values cannot be decrypted with any key in CADRE_ENCRYPTION_KEY: add the "
                "key that encrypted them, then run this again"
            )
