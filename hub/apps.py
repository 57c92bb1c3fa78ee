"""The skill registry: packages, versions, dist-tags, bundles (built in its own issue)."""

from django.apps import AppConfig


class HubConfig(AppConfig):
    name = "hub"
    label = "hub"
    verbose_name = "Hub"
