"""Verify an audit export bundle offline: signature, file hashes, row-level chain continuity."""

from __future__ import annotations

import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from cadre.governance.export import verify_bundle


class Command(BaseCommand):
    help = (
        "Check an audit export bundle (its directory or bundle.tar) without the database: "
        "the manifest's Ed25519 signature, every file's SHA-256 and row count, and the hash "
        "chain line by line. Exit status 1 and the tampered file/line when anything differs."
    )
    requires_system_checks: list = []

    def add_arguments(self, parser):
        parser.add_argument("bundle", help="bundle directory or .tar")
        parser.add_argument(
            "--public-key", help="PEM file of the expected signer (default: the manifest's key)"
        )

    def handle(self, *args, bundle: str, public_key: str | None = None, **options):
        path = Path(bundle)
        if not path.exists():
            raise CommandError(f"{bundle}: no such file or directory")
        pem = Path(public_key).read_text(encoding="utf-8") if public_key else None
        report = verify_bundle(path, public_key_pem=pem)
        if report.ok:
            self.stdout.write(
                f"OK: {report.rows} rows, signature by key {report.key_id[:16]}…, "
                "file hashes and chain verified"
            )
            return
        self.stdout.write(f"TAMPERED: {len(report.problems)} problem(s)")
        for problem in report.problems:
            self.stdout.write(f"  {problem}")
        sys.exit(1)
