"""Embedded services, the `cadre` command, health checks and process-wide set-up."""

from django.apps import AppConfig, apps
from django.db.models.signals import post_migrate

from cadre.celery import app as celery_app
from cadre.observability import configure_tracing


class RuntimeConfig(AppConfig):
    name = "cadre.runtime"
    label = "runtime"
    verbose_name = "Runtime"

    def ready(self) -> None:
        # lazy: ready() — database_roles reads the memory app's models.
        from cadre.runtime.database_roles import on_post_migrate

        configure_tracing()
        post_migrate.connect(on_post_migrate, dispatch_uid="cadre.runtime.database_roles")
        # Every app's tasks module, in every process (as a worker does when it starts): a
        # service enqueues a task by its name (cadre.queues), so nothing else imports it, and an
        # eager app (the tests, `make up`'s in-process mode) runs only a task it has registered.
        celery_app.loader.autodiscover_tasks([config.name for config in apps.get_app_configs()])
