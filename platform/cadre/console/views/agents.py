"""Console pages for the agents area (routes collected by `cadre.console.urls`)."""

from __future__ import annotations

urlpatterns: list = []
