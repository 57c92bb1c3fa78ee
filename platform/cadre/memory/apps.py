"""Governed long-term memory (built in its own issue)."""

from django.apps import AppConfig


class MemoryConfig(AppConfig):
    name = "cadre.memory"
    label = "memory"
    verbose_name = "Memory"
