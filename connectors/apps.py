"""IM connectors: Feishu/Lark, WeCom, DingTalk, Slack, webhooks (built in their own issue)."""

from django.apps import AppConfig


class ConnectorsConfig(AppConfig):
    name = "connectors"
    label = "connectors"
    verbose_name = "Connectors"
