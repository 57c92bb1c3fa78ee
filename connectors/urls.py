"""Inbound IM callback routes (mounted at /connectors/) and the connectors API."""

from __future__ import annotations

urlpatterns: list = []
api_urlpatterns: list = []
