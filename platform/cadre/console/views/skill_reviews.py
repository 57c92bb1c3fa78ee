"""Console pages for skill candidates and their reviews (routes collected by `cadre.console.urls`)."""

from __future__ import annotations

urlpatterns: list = []
