"""Governance API routes under /api/v1/: policy chains, confirmations, alerts, audit exports."""

from __future__ import annotations

urlpatterns: list = []
