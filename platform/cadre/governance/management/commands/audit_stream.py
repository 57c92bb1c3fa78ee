"""Stream audit events as JSON lines to stdout or syslog, for SIEM collectors."""

from __future__ import annotations

import logging
import logging.handlers
import sys
import time
from datetime import datetime

from django.core.management.base import BaseCommand, CommandError

from cadre.governance.audit import seal
from cadre.governance.export import TextMasker, export_rows, masked
from cadre.tenancy.models import Organization


class _SyslogOut:
    """A write()-able that sends each JSON line as one syslog message."""

    def __init__(self, address: str):
        host, _, port = address.partition(":")
        target = host if host.startswith("/") else (host, int(port or 514))
        self.logger = logging.getLogger("cadre.audit.stream")
        self.logger.propagate = False
        self.logger.addHandler(logging.handlers.SysLogHandler(address=target))
        self.logger.setLevel(logging.INFO)

    def write(self, line: str) -> None:
        self.logger.info(line.rstrip("\n"))

    def flush(self) -> None:
        pass


class Command(BaseCommand):
    help = (
        "Write an organization's audit events as JSON lines (free text masked) to stdout or "
        "syslog; --follow keeps polling for new events (resumes from --after-sequence)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--org", required=True, help="organization slug")
        parser.add_argument("--since", help="ISO 8601 time to start from")
        parser.add_argument("--after-sequence", type=int, default=0)
        parser.add_argument("--syslog", help="host:port or /dev/log (default: stdout)")
        parser.add_argument("--follow", action="store_true")
        parser.add_argument("--interval", type=float, default=2.0)
        parser.add_argument("--no-mask", action="store_true")

    def handle(self, *args, **options):
        import json

        organization = Organization.objects.filter(slug=options["org"]).first()
        if organization is None:
            raise CommandError(f"no organization with slug {options['org']!r}")
        since = datetime.fromisoformat(options["since"]) if options["since"] else None
        out = _SyslogOut(options["syslog"]) if options["syslog"] else sys.stdout
        masker = None if options["no_mask"] else TextMasker(organization)
        last = options["after_sequence"]
        while True:
            seal(organization=organization)  # the stream carries sealed (chained) events only
            for row in export_rows(organization, since=since):
                if row["sequence"] <= last:
                    continue
                row = masked(row, masker) if masker is not None else row
                out.write(json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n")
                last = row["sequence"]
            out.flush()
            if not options["follow"]:
                return
            time.sleep(options["interval"])
