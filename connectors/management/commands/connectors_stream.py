"""Run the long-connection (stream) worker of one connector: Feishu long connection or
DingTalk Stream mode (`cadre up` starts one per stream-mode connector)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from connectors.base import registry
from connectors.inbound import streams
from connectors.models import Connector


class Command(BaseCommand):
    help = "Hold a connector's long connection (for installs without a public callback URL)."

    def add_arguments(self, parser):
        parser.add_argument("public_id", help="the connector's public id (from its callback URL)")

    def handle(self, *args, public_id: str, **options):
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
        self.stdout.write(f"Connecting {connector} …")
        self.stdout.flush()
        streams.run(connector)
