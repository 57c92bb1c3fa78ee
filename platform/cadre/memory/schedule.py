"""Celery beat entries for memory. No Django imports, so settings.py can import it."""

from __future__ import annotations

from celery.schedules import crontab

BEAT_SCHEDULE = {
    "memory-retention-sweep": {
        "task": "cadre.memory.tasks.memory_retention_sweep",
        "schedule": crontab(minute="*/15"),
    },
}
