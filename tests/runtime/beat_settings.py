"""Settings of the beat processes that tests/runtime/test_cluster.py starts: Cadre's own, with
a schedule of one fast probe sent to a queue no worker reads, and a short lock."""

from __future__ import annotations

import os

from cadre.settings import *  # noqa: F403

BEAT_PROBE_QUEUE = "beat-probe"
CELERY_BEAT_SCHEDULE = {
    "beat-probe": {
        "task": "tests.beat_probe",
        "schedule": float(os.environ.get("CADRE_TEST_BEAT_INTERVAL", "1")),
        "options": {"queue": BEAT_PROBE_QUEUE},
    }
}
CELERY_BEAT_MAX_LOOP_INTERVAL = 1
CELERY_REDBEAT_LOCK_TIMEOUT = 4
CELERY_REDBEAT_KEY_PREFIX = "cadre-test:beat:"  # the same in the test and its children
