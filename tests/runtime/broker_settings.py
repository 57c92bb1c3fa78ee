"""Settings of the worker and beat processes that tests/runtime/test_broker_restart.py starts:
Cadre's own, plus a task that waits for the test (tests.runtime.broker_tasks) and a beat
schedule of one probe every second to a queue no worker reads."""

from __future__ import annotations

from cadre.settings import *  # noqa: F403

CELERY_IMPORTS = ["tests.runtime.broker_tasks"]
BEAT_PROBE_QUEUE = "beat-probe"
CELERY_BEAT_SCHEDULE = {
    "beat-probe": {
        "task": "tests.beat_probe",
        "schedule": 1.0,
        "options": {"queue": BEAT_PROBE_QUEUE},
    }
}
CELERY_BEAT_MAX_LOOP_INTERVAL = 1
CELERY_REDBEAT_LOCK_TIMEOUT = 4
