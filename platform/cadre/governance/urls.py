"""Governance API routes under /api/v1/: policy chains, confirmations, alerts, audit exports."""

from __future__ import annotations

from django.urls import path
from rest_framework.routers import SimpleRouter

from cadre.governance import api_alerts, api_confirmations, api_controls

router = SimpleRouter()
router.register("audit-exports", api_controls.AuditExportViewSet, basename="audit-export")
router.register("policy-chains", api_controls.PolicyChainViewSet, basename="policy-chain")
router.register("confirmations", api_confirmations.ConfirmationViewSet, basename="confirmation")

router.register("alert-rules", api_alerts.AlertRuleViewSet, basename="alert-rule")
router.register("alerts", api_alerts.AlertViewSet, basename="alert")

urlpatterns = [
    path("policy-plugins/", api_controls.PolicyPluginListView.as_view(), name="policy-plugins"),
    *router.urls,
]
