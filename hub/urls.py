"""Hub routes: the Cadre Hub API (/api/v1/hub/), the ClawHub-compatible API and discovery."""

from __future__ import annotations

api_urlpatterns: list = []  # mounted under /api/v1/hub/
clawhub_urlpatterns: list = []  # mounted under /api/v1/ (ClawHub's paths)
site_urlpatterns: list = []  # mounted at the site root (/.well-known/clawhub.json)
