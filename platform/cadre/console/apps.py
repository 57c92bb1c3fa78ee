"""The server-rendered admin console."""

from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    name = "cadre.console"
    label = "console"
    verbose_name = "Console"
