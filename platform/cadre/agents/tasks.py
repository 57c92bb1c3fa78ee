"""Celery tasks of the agent runtime: thin adapters over its lifecycle floor. The runtime
queues them by name (cadre.queues), so only this module imports them."""

from __future__ import annotations

import logging

from celery import shared_task
from django.db import OperationalError

from cadre.agents.runtime.lifecycle import finish, prefetch, services
from cadre.agents.runtime.lifecycle.after import run_after_hooks
from cadre.agents.runtime.lifecycle.execution import RunBusy
from cadre.agents.runtime.lifecycle.execution import run_execute as execute

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
    try:
        return execute(run_id)
    except RunBusy as busy:
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
    run_after_hooks(run_id)


@shared_task(ignore_result=True)
def prefetch_next_turn(run_id: int) -> str:
    """After a reply on a new topic: retrieve the next turn's memories ahead of it."""
    return prefetch.prefetch_next_turn(run_id)


@shared_task(ignore_result=True)
def waits_expire() -> int:
    """Beat: expire overdue waits (each run then follows its wait's timeout policy)."""
    return services.waits_expire()


@shared_task(ignore_result=True)
def runs_requeue_stale() -> int:
    """Beat: queue again runs that stopped making progress without being redelivered."""
    return services.runs_requeue_stale()
