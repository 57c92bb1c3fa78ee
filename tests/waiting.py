"""Waiting for a condition, never for a time: what tests that start real processes share."""

from __future__ import annotations

import time


def wait_until(condition, seconds: float, what: str, *, interval: float = 0.1):
    """The first truthy value of `condition()` within `seconds`; AssertionError naming `what`
    when there is none."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"not within {seconds} s: {what}")
