"""Agents API routes under /api/v1/: templates and versions, presets, providers, deployments,
rollouts, agents, sessions, runs, event triggers, agent subscriptions and MCP servers."""

from __future__ import annotations

from django.urls import path
from rest_framework.routers import SimpleRouter

from cadre.agents.api import mcp_servers, subscriptions, views

router = SimpleRouter()
router.register("templates", views.TemplateViewSet, basename="agent-template")
router.register("template-versions", views.TemplateVersionViewSet, basename="template-version")
router.register("model-providers", views.ProviderConfigViewSet, basename="model-provider")
router.register("mcp-servers", mcp_servers.McpServerViewSet, basename="mcp-server")
router.register("deployments", views.DeploymentViewSet, basename="deployment")
router.register("rollouts", views.RolloutViewSet, basename="rollout")
router.register("agents", views.AgentViewSet, basename="agent")
router.register("sessions", views.SessionViewSet, basename="session")
router.register("runs", views.RunViewSet, basename="run")
router.register("triggers", views.EventTriggerViewSet, basename="event-trigger")
router.register(
    "agent-subscriptions", subscriptions.AgentSubscriptionViewSet, basename="agent-subscription"
)

urlpatterns = [
    path("template-presets/", views.PresetView.as_view(), name="template-presets"),
    path(
        "triggers/<int:trigger_id>/events/",
        views.TriggerInboundView.as_view(),
        name="trigger-inbound",
    ),
    *router.urls,
]
