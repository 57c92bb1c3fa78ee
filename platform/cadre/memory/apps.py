"""Governed long-term memory."""

from django.apps import AppConfig


class MemoryConfig(AppConfig):
    name = "cadre.memory"
    label = "memory"
    verbose_name = "Memory"
