"""Celery tasks of evaluation: thin adapters over its services."""

from __future__ import annotations

from celery import shared_task
from django.db import OperationalError

from cadre.agents.evaluation import services


@shared_task(
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    autoretry_for=(OperationalError,),
    retry_backoff=True,
    retry_jitter=True,
    max_retries=5,
    ignore_result=True,
)
def eval_run_execute(self, run_id: int) -> str:
    """Replay a suite (resumes after the last stored case result when redelivered)."""
    return services.eval_run_execute(run_id)
