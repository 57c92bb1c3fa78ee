"""Audit trail, masking, policy chain, confirmations, alerting, budgets and export."""

from django.apps import AppConfig


class GovernanceConfig(AppConfig):
    name = "cadre.governance"
    label = "governance"
    verbose_name = "Governance"

    def ready(self) -> None:
        # Every import here is lazy: ready() — the modules need the loaded apps (the models);
        # the built-in policy plugins register themselves on import.
        from cadre.checks import APP_CHECKS  # lazy: ready()
        from cadre.governance import checks  # lazy: ready()
        from cadre.governance.budgets import METER  # lazy: ready()
        from cadre.governance.masking.directory import connect_signals  # lazy: ready()
        from cadre.governance.policy import plugins  # lazy: ready()  # noqa: F401
        from cadre.llm.metering import METERS  # lazy: ready()

        connect_signals()
        # Every model call charged to an account is reserved and settled against budgets.
        METERS.register("budgets", METER)
        APP_CHECKS.register("governance", checks.doctor_checks)
