"""The runtime's own progress records: the transaction they commit in, and run events."""

from __future__ import annotations

from contextlib import contextmanager

from django.db import connection, transaction

from cadre.agents.models import RunEvent


@contextmanager
def bookkeeping():
    """A transaction for the runtime's own progress records (steps, events, run status).

    It commits without waiting for the WAL flush (`synchronous_commit` off for this
    transaction only): other sessions see it at once and a killed worker loses nothing; only
    a crash of PostgreSQL itself can lose its last fraction of a second, and then the lost
    steps are executed again — tool side effects still happen once, because their ToolEffect
    records (and waits) commit with full durability. One commit fewer to wait for per write
    is most of a run's overhead on a busy disk.
    """
    with transaction.atomic():
        relaxed_durability()
        yield


def relaxed_durability() -> None:
    """Inside a transaction: commit it without waiting for the WAL flush (see `bookkeeping`)."""
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL synchronous_commit TO OFF")


def emit(run_id: int, kind: str, data: dict | None = None) -> None:
    """Record a run event now (in the caller's transaction, if any)."""
    RunEvent.objects.create(run_id=run_id, kind=kind, data=data or {})
