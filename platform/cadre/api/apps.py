"""Shared REST API pieces (registers the OpenAPI authentication extensions)."""

from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "cadre.api"
    label = "cadre_api"
    verbose_name = "API"

    def ready(self) -> None:
        from cadre.api import schema  # noqa: F401 - registers the extensions
