"""Shared REST API pieces (registers the OpenAPI authentication extensions)."""

from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "cadre.api"
    label = "cadre_api"
    verbose_name = "API"

    def ready(self) -> None:
        # lazy: ready() — registers the OpenAPI extensions, which read DRF's settings.
        from cadre.api import schema  # noqa: F401
