"""Governance API routes under /api/v1/: audit events and exports, policy chains,
confirmations, alerts, budgets and usage."""

from __future__ import annotations

from django.urls import path
from rest_framework.routers import SimpleRouter

from cadre.governance.api import alerts, audit, budgets, confirmations, controls

router = SimpleRouter()
router.register("audit-events", audit.AuditEventViewSet, basename="audit-event")
router.register("audit-exports", controls.AuditExportViewSet, basename="audit-export")
router.register("policy-chains", controls.PolicyChainViewSet, basename="policy-chain")
router.register("confirmations", confirmations.ConfirmationViewSet, basename="confirmation")
router.register("alert-rules", alerts.AlertRuleViewSet, basename="alert-rule")
router.register("alerts", alerts.AlertViewSet, basename="alert")
router.register("budgets", budgets.BudgetViewSet, basename="budget")
router.register("usage", budgets.UsageViewSet, basename="usage")

urlpatterns = [
    path("policy-plugins/", controls.PolicyPluginListView.as_view(), name="policy-plugins"),
    path("audit/public-key/", audit.AuditPublicKeyView.as_view(), name="audit-public-key"),
    *router.urls,
]
