"""The Mem0- and MemOS-compatible memory APIs."""

from django.apps import AppConfig


class CompatConfig(AppConfig):
    name = "cadre.compat"
    label = "compat"
    verbose_name = "Compatible memory APIs"
