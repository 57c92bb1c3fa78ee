"""Embedded services, the `cadre` command, health checks and process-wide set-up."""

from django.apps import AppConfig


class RuntimeConfig(AppConfig):
    name = "cadre.runtime"
    label = "runtime"
    verbose_name = "Runtime"

    def ready(self) -> None:
        from cadre.observability import configure_tracing

        configure_tracing()
