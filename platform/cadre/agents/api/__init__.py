"""Agents REST API under /api/v1/ (routes in `urls.py`)."""
