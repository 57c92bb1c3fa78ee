"""The Cadre Hub API (/api/v1/hub/) and the ClawHub-compatible API (/api/v1/…)."""
