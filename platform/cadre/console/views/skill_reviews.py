"""Console pages for skill candidates and their reviews (routes listed in `urlpatterns`)."""

from __future__ import annotations

urlpatterns: list = []
