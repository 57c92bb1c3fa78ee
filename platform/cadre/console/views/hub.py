"""Console pages for the hub area (routes collected by `cadre.console.urls`)."""

from __future__ import annotations

urlpatterns: list = []
