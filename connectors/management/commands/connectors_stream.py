"""Run the long-connection (stream) worker of one connector: Feishu long connection or
DingTalk Stream mode (`cadre up` starts one per stream-mode connector).

`--standby` prepares everything short of the connection (Django, the connector, the SDK's
import: seconds of CPU) and then waits for one line on stdin: `go` connects, anything else or
the end of input exits without connecting. A `cadre streams` replica keeps such a standby for
each connector another replica holds, so a takeover costs a line instead of a process start.
"""

from __future__ import annotations

import sys

from django.core.management.base import BaseCommand, CommandError
from django.db import connections

from connectors.base import registry
from connectors.inbound import streams
from connectors.models import Connector

GO = "go"


class Command(BaseCommand):
    help = "Hold a connector's long connection (for installs without a public callback URL)."

    def add_arguments(self, parser):
        parser.add_argument("public_id", help="the connector's public id (from its callback URL)")
        parser.add_argument(
            "--standby",
            action="store_true",
            help="prepare, then connect only after reading 'go' on stdin (else exit)",
        )

    def handle(self, *args, public_id: str, standby: bool = False, **options):
        connector = Connector.objects.filter(
            public_id=public_id, status=Connector.Status.ACTIVE
        ).first()
        if connector is None:
            raise CommandError(f"No active connector with public id {public_id!r}.")
        platform = registry()[connector.platform]
        if connector.platform not in streams.stream_platforms():
            raise CommandError(f"{platform.label} has no long-connection worker.")
        if not platform.extra_installed():
            raise CommandError(
                f"{platform.label} stream mode needs the {platform.extra_module} package: "
                f"pip install 'cadre[{platform.extra}]'"
            )
        hold = platform.part(platform.stream_module).prepare(connector)
        if standby:
            # A standby may wait for hours: it keeps no database connection meanwhile (the
            # event handlers open their own when events come).
            connections.close_all()
            self.stdout.write(f"Standing by for {connector} …")
            self.stdout.flush()
            if sys.stdin.readline().strip() != GO:
                return  # the supervisor stopped or changed its mind: never connect
        self.stdout.write(f"Connecting {connector} …")
        self.stdout.flush()
        hold()
