"""Cadre: the Django project and the namespace of its apps."""

from __future__ import annotations

from cadre.celery import app as celery_app

__all__ = ["celery_app"]
