"""A task for the broker-restart tests: it says it started, waits for the test's word, and
says it finished, all through files (the broker is what the test takes away)."""

from __future__ import annotations

import time
from pathlib import Path

from celery import shared_task


@shared_task(name="tests.hold")
def hold(folder: str, name: str) -> None:
    folder_path = Path(folder)
    (folder_path / f"{name}.started").touch()
    release = folder_path / f"{name}.release"
    deadline = time.monotonic() + 120
    while not release.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    (folder_path / f"{name}.done").touch()
