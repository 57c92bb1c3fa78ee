"""IM connectors: Feishu/Lark, WeCom, DingTalk, Slack, webhooks."""

from django.apps import AppConfig


class ConnectorsConfig(AppConfig):
    name = "connectors"
    label = "connectors"
    verbose_name = "Connectors"

    def ready(self) -> None:
        from connectors import decisions, delivery

        delivery.register()  # each platform: an IM platform and the runtime's delivery channel
        decisions.register()  # confirmation cards: sent when created, updated when decided
