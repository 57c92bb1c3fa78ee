"""Masking API (test bench) under /api/v1/masking/."""

from __future__ import annotations

urlpatterns: list = []
