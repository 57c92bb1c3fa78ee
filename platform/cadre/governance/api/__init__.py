"""Governance REST API under /api/v1/: audit log, audit exports, policy chains, confirmations,
alerts (routes in `urls.py`)."""
