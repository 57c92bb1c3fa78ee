"""Embedded services, the `cadre` command, health checks and process-wide set-up."""

from django.apps import AppConfig


class RuntimeConfig(AppConfig):
    name = "cadre.runtime"
    label = "runtime"
    verbose_name = "Runtime"

    def ready(self) -> None:
        from django.db.models.signals import post_migrate

        from cadre.observability import configure_tracing
        from cadre.runtime.database_roles import on_post_migrate

        configure_tracing()
        post_migrate.connect(on_post_migrate, dispatch_uid="cadre.runtime.database_roles")
