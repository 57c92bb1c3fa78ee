"""Audit trail, masking, policy chain, confirmations, alerting, budgets and export."""

from django.apps import AppConfig


class GovernanceConfig(AppConfig):
    name = "cadre.governance"
    label = "governance"
    verbose_name = "Governance"

    def ready(self) -> None:
        # The built-in policy plugins register themselves on import.
        from cadre.governance.budgets import METER
        from cadre.governance.masking.directory import connect_signals
        from cadre.governance.policy import plugins  # noqa: F401
        from cadre.llm.metering import METERS

        connect_signals()
        # Every model call charged to an account is reserved and settled against budgets.
        METERS.register("budgets", METER)
