"""Console pages for the governance area (routes collected by `cadre.console.urls`)."""

from __future__ import annotations

urlpatterns: list = []
