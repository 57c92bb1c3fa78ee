"""Embed every package's `latest` text under the active embedding model (backfill)."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from hub.models import SkillPackage
from hub.semantic import package_embed


class Command(BaseCommand):
    help = "Embed Hub packages for semantic search (skips unchanged ones)."

    def handle(self, *args, **options):
        done = failed = 0
        for package in SkillPackage.objects.iterator(chunk_size=200):
            if package_embed(package):
                done += 1
            else:
                failed += 1
        self.stdout.write(f"embedded {done} packages, {failed} not embedded")
