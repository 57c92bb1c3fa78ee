"""A task for the broker-restart tests: it says it started, waits for the test's word, and
says it finished, all through files (the broker is what the test takes away)."""

from __future__ import annotations

import time
from pathlib import Path

from celery import current_app, shared_task


def _started_then_released(folder: Path, name: str) -> None:
    """`<name>.started`, then wait (at most 120 s) for the test's `<name>.release`."""
    (folder / f"{name}.started").touch()
    release = folder / f"{name}.release"
    deadline = time.monotonic() + 120
    while not release.exists() and time.monotonic() < deadline:
        time.sleep(0.05)


@shared_task(name="tests.hold")
def hold(folder: str, name: str) -> None:
    _started_then_released(Path(folder), name)
    (Path(folder) / f"{name}.done").touch()


@shared_task(name="tests.hold_then_send")
def hold_then_send(folder: str, name: str, queue: str) -> None:
    """Waits like `hold`, then sends `hold` for `<name>-sent`: what a run does when it hands
    its after-run hooks to the broker as it finishes."""
    folder_path = Path(folder)
    _started_then_released(folder_path, name)
    (folder_path / f"{name}.sending").touch()
    current_app.send_task("tests.hold", [folder, f"{name}-sent"], queue=queue)
    (folder_path / f"{name}.done").touch()
