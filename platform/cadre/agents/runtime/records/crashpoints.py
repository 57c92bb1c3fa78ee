"""Crash points for tests: make a step fail after its work and before it is marked completed,
as a killed worker would. None is set in production."""

from __future__ import annotations

from contextlib import contextmanager


class SimulatedCrash(BaseException):
    """Raised at a crash point in tests: after a step's work, before it is marked completed.

    A BaseException, so no `except Exception` on the way can swallow it — like a killed worker.
    """


# Test crash points: {(kind, name or None): remaining count}. Empty in production.
_crash_points: dict[tuple[str, str | None], int] = {}


@contextmanager
def crash_after(kind: str, name: str | None = None, times: int = 1):
    """Make the next `times` steps of `kind` (and `name`) crash after their work (tests)."""
    _crash_points[(kind, name)] = times
    try:
        yield
    finally:
        _crash_points.pop((kind, name), None)


def maybe_crash(kind: str, name: str) -> None:
    for key in ((kind, name), (kind, None)):
        remaining = _crash_points.get(key, 0)
        if remaining > 0:
            _crash_points[key] = remaining - 1
            raise SimulatedCrash(f"simulated crash after {kind}:{name}")
