"""Verify an audit export bundle offline: signature against a trusted key, file hashes,
row-level chain continuity, signed chain-head digests."""

from __future__ import annotations

import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from cadre.governance.export import verify_bundle


class Command(BaseCommand):
    help = (
        "Check an audit export bundle (its directory or bundle.tar) without the database: "
        "the manifest's Ed25519 signature against a trusted key (--public-key, --key-id, or "
        "by default this instance's own key; never the key the manifest names), every file's "
        "SHA-256 and row count, the hash chain line by line and the signed chain-head digests. "
        "Exit status 1 and the tampered file/line when anything differs."
    )
    requires_system_checks: list = []

    def add_arguments(self, parser):
        parser.add_argument("bundle", help="bundle directory or .tar")
        parser.add_argument(
            "--public-key",
            help="PEM file of the signer's public key (GET /api/v1/audit/public-key/ on the "
            "instance)",
        )
        parser.add_argument(
            "--key-id",
            help="the signer's key id (SHA-256 of its public key, as the console shows it): "
            "the manifest's key is used only if it has this id",
        )

    def handle(self, *args, bundle: str, public_key=None, key_id=None, **options):
        path = Path(bundle)
        if not path.exists():
            raise CommandError(f"{bundle}: no such file or directory")
        try:
            pem = Path(public_key).read_text(encoding="utf-8") if public_key else None
        except OSError as error:
            raise CommandError(f"--public-key {public_key}: {error.strerror}") from None
        report = verify_bundle(path, public_key_pem=pem, key_id=key_id)
        if report.ok:
            digests = f", {report.digests} signed digest(s)" if report.digests else ""
            self.stdout.write(
                f"OK: {report.rows} rows, signature by key {report.key_id}, file hashes, "
                f"chain{digests} verified"
            )
            return
        self.stdout.write(f"TAMPERED: {len(report.problems)} problem(s)")
        for problem in report.problems:
            self.stdout.write(f"  {problem}")
        sys.exit(1)
