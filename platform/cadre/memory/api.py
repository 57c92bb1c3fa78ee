"""Memory REST API under /api/v1/ (memories, memory-tasks)."""

from __future__ import annotations

urlpatterns: list = []
