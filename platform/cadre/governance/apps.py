"""Audit trail, masking, policy chain, confirmations, alerting and export."""

from django.apps import AppConfig


class GovernanceConfig(AppConfig):
    name = "cadre.governance"
    label = "governance"
    verbose_name = "Governance"
