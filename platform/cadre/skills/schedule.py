"""Celery beat entries for skills. No Django imports, so settings.py can import it."""

from __future__ import annotations

from celery.schedules import crontab

BEAT_SCHEDULE = {
    # Memory-to-skill once a night: clusters already looked at are skipped, so reruns are cheap.
    "skills-memory-distill": {
        "task": "skills.memory_distill",
        "schedule": crontab(hour=3, minute=30),
    },
}
