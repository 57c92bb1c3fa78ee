"""Celery tasks of the agent runtime: thin adapters over the engine and runtime services."""

from __future__ import annotations

import logging

from celery import shared_task
from django.db import OperationalError

from cadre.agents.runtime.engine import RunBusy

logger = logging.getLogger(__name__)


@shared_task(
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    max_retries=5,
    ignore_result=True,
)
def run_execute(self, run_id: int) -> str:
    """Execute or resume a run. Redelivered after a worker crash, it resumes after the last
    completed step; a second delivery while another worker holds the run retries later. A
    model endpoint's failure is not retried here: the model client retried within the call's
    time budget and the engine failed the run with the endpoint's error."""
    from cadre.agents.runtime import engine, finish

    try:
        return engine.run_execute(run_id)
    except engine.RunBusy as busy:
        raise self.retry(exc=busy, countdown=2) from None
    except OperationalError as error:
        if self.request.retries >= self.max_retries:
            finish.run_fail(run_id, f"gave up after {self.request.retries} retries: {error}")
            return "failed"
        countdown = min(60, 2 ** (self.request.retries + 1))
        raise self.retry(exc=error, countdown=countdown) from None


@shared_task(
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    autoretry_for=(OperationalError, RunBusy),
    retry_backoff=True,
    retry_jitter=True,
    max_retries=5,
    ignore_result=True,
)
def run_after(self, run_id: int) -> None:
    """The asynchronous hooks of a finished run: process_memory, compact, post_process."""
    from cadre.agents.runtime.after import run_after_hooks

    run_after_hooks(run_id)


@shared_task(ignore_result=True)
def prefetch_next_turn(run_id: int) -> str:
    """After a reply on a new topic: retrieve the next turn's memories ahead of it."""
    from cadre.agents.runtime.prefetch import prefetch_next_turn as prefetch

    return prefetch(run_id)


@shared_task(ignore_result=True)
def waits_expire() -> int:
    """Beat: expire overdue waits (each run then follows its wait's timeout policy)."""
    from cadre.agents.runtime.services import waits_expire as expire

    return expire()


@shared_task(ignore_result=True)
def runs_requeue_stale() -> int:
    """Beat: queue again runs that stopped making progress without being redelivered."""
    from cadre.agents.runtime.services import runs_requeue_stale as requeue

    return requeue()
