"""Agents REST API under /api/v1/ (templates, deployments, agents, sessions, runs)."""

from __future__ import annotations

urlpatterns: list = []
