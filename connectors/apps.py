"""IM connectors: Feishu/Lark, WeCom, DingTalk, Slack, webhooks."""

from django.apps import AppConfig


class ConnectorsConfig(AppConfig):
    name = "connectors"
    label = "connectors"
    verbose_name = "Connectors"

    def ready(self) -> None:
        from cadre import im
        from connectors.base import registry

        for platform in registry().values():
            im.platforms.register(platform.name, platform.label)
