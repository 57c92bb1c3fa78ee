"""Governed long-term memory."""

from django.apps import AppConfig


class MemoryConfig(AppConfig):
    name = "cadre.memory"
    label = "memory"
    verbose_name = "Memory"

    def ready(self) -> None:
        # lazy: ready() — the checks read memory's models, which need loaded apps
        from cadre.checks import APP_CHECKS
        from cadre.memory import checks

        APP_CHECKS.register("memory", checks.doctor_checks)
