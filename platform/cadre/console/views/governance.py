"""Console pages for the governance area (routes collected by `cadre.console.urls`): policies
and the masking bench, confirmations, alerts and their rules, audit exports. Each page's views
live in a `governance_<page>.py` module next to this one."""

from __future__ import annotations

from django.urls import path

from cadre.console.views import (
    governance_alerts as alerts,
)
from cadre.console.views import (
    governance_confirmations as confirmations,
)
from cadre.console.views import (
    governance_export as exports,
)
from cadre.console.views import (
    governance_policies as policies,
)

urlpatterns: list = [
    # policies
    path("policies/", policies.policies, name="policies"),
    path("policies/chain/", policies.policy_chain_edit, name="policy_chain_edit"),
    path("policies/masking/", policies.masking_bench, name="masking_bench"),
    path("policies/masking/rules/", policies.masking_rule_create, name="masking_rule_create"),
    path(
        "policies/masking/rules/<int:pk>/toggle/",
        policies.masking_rule_toggle,
        name="masking_rule_toggle",
    ),
    path(
        "policies/masking/rules/<int:pk>/delete/",
        policies.masking_rule_delete,
        name="masking_rule_delete",
    ),
    # confirmations
    path("confirmations/", confirmations.confirmation_list, name="confirmations"),
    path(
        "confirmations/history/",
        confirmations.confirmation_history,
        name="confirmation_history",
    ),
    path("confirmations/<int:pk>/", confirmations.confirmation_detail, name="confirmation"),
    path(
        "confirmations/<int:pk>/decide/",
        confirmations.confirmation_decide_view,
        name="confirmation_decide",
    ),
    # alerts
    path("alerts/", alerts.alert_list, name="alerts"),
    path("alerts/<int:pk>/", alerts.alert_detail, name="alert"),
    path("alerts/<int:pk>/acknowledge/", alerts.alert_acknowledge, name="alert_acknowledge"),
    path("alerts/<int:pk>/resolve/", alerts.alert_resolve, name="alert_resolve"),
    path("alerts/rules/", alerts.alert_rule_list, name="alert_rules"),
    path("alerts/rules/new/", alerts.alert_rule_create, name="alert_rule_create"),
    path("alerts/rules/<int:pk>/edit/", alerts.alert_rule_edit, name="alert_rule_edit"),
    path("alerts/rules/<int:pk>/delete/", alerts.alert_rule_delete, name="alert_rule_delete"),
    # audit export (linked from the audit log)
    path("audit/exports/", exports.audit_export_list, name="audit_exports"),
    path("audit/exports/<int:pk>/", exports.audit_export_detail, name="audit_export"),
    path(
        "audit/exports/<int:pk>/download/",
        exports.audit_export_download,
        name="audit_export_download",
    ),
]
