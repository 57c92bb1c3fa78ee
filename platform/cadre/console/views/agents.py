"""Console pages for the agents area (routes collected by `cadre.console.urls`): role
templates, deployments, agents and their sessions, and chat — each in its own module."""

from __future__ import annotations

from cadre.console.views import agents_chat, agents_deployments, agents_sessions, agents_templates

urlpatterns: list = [
    *agents_templates.urlpatterns,
    *agents_deployments.urlpatterns,
    *agents_sessions.urlpatterns,
    *agents_chat.urlpatterns,
]
