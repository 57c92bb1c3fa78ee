"""Governed long-term memory."""

from django.apps import AppConfig


class MemoryConfig(AppConfig):
    name = "cadre.memory"
    label = "memory"
    verbose_name = "Memory"

    def ready(self):
        from cadre.memory.viewer.cache import connect_signals

        connect_signals()
