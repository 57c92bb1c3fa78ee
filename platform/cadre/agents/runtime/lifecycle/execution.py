"""Executing a run: one worker at a time, the run marked running, the engine's loop, the finish.

One worker executes a run at a time: a PostgreSQL session advisory lock on the run is held
while executing (and while its after-run hooks run); a killed worker's connection closes and
releases it.
"""

from __future__ import annotations

from contextlib import contextmanager

from django.db import connection
from django.utils import timezone, translation

from cadre.agents.models import Run
from cadre.agents.runtime import engine
from cadre.agents.runtime.lifecycle.finish import finish_run
from cadre.agents.runtime.records import delivery
from cadre.agents.runtime.records.runs import load_run, run_refusal, run_trace
from cadre.agents.runtime.steps.run_context import RunContext
from cadre.observability import tracer

LOCK_NAMESPACE = 71001  # pg advisory lock class for runs


class RunBusy(Exception):
    """Another worker is executing this run right now."""


@contextmanager
def run_lock(run_id: int):
    """Try the run's advisory lock; yields whether this session holds it."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [LOCK_NAMESPACE, run_id])
        locked = cursor.fetchone()[0]
    try:
        yield locked
    finally:
        if locked:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [LOCK_NAMESPACE, run_id])


def run_execute(run_id: int) -> str:
    """Execute (or resume) a run; returns its status afterwards. Safe to call again."""
    with run_lock(run_id) as locked:
        if not locked:
            raise RunBusy(run_id)
        run = load_run(run_id, "agent__deployment")
        if run is None or run.is_terminal:
            return run.status if run else "missing"
        refusal = run_refusal(run)
        if refusal:
            finish_run(run, None, Run.Status.CANCELLED, error=refusal, notice="unavailable")
            return run.status
        now = timezone.now()
        # One statement, committed at once (the attempt counts even if this worker dies); its
        # event goes with the run's next write.
        Run.objects.filter(pk=run.pk).update(
            status=Run.Status.RUNNING,
            attempts=run.attempts + 1,
            heartbeat_at=now,
            started_at=run.started_at or now,
        )
        ctx = RunContext(run, first_attempt=run.attempts == 0)
        ctx.record_event("status", {"status": Run.Status.RUNNING, "attempt": run.attempts + 1})
        # What the run tells its person (notices, refusals, the offline model's lines) is
        # written in their language; the prompts the model reads are not translated.
        with (
            translation.override(delivery.run_language(run)),
            run_trace(run),
            tracer().start_as_current_span(
                "agent.run", attributes={"cadre.run_id": run.pk, "cadre.agent_id": run.agent_id}
            ),
        ):
            outcome = engine.execute(ctx)
            if outcome.status != Run.Status.WAITING:
                finish_run(
                    run,
                    ctx,
                    outcome.status,
                    text=outcome.text,
                    error=outcome.error,
                    refused=outcome.refused,
                    refused_code=outcome.refused_code,
                    notice=outcome.notice,
                )
            return outcome.status
