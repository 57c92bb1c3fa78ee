"""The asynchronous hooks after a completed run: process_memory, compact, post_process.

Each hook is a persisted step keyed `run:<id>:after:<point>:<hook>`; a redelivered task skips
the hooks that completed and runs the rest. The hooks' steps and events are written together,
completed, once the last hook returned (one commit for the lot): if the worker dies before,
the redelivered task runs them again, which they allow — memory writing merges a memory it
already holds, skill backflow finds the proposal it already made.
"""

from __future__ import annotations

import logging
import time

from django.utils import timezone

from cadre.agents.hooks.registry import ASYNC_POINTS, hooks_for
from cadre.agents.models import Run, RunEvent, Step
from cadre.agents.runtime.lifecycle.execution import RunBusy, run_lock
from cadre.agents.runtime.records.bookkeeping import bookkeeping
from cadre.agents.runtime.records.runs import load_run, run_account, run_trace
from cadre.llm.metering import charged_to, purpose

logger = logging.getLogger(__name__)


def run_after_hooks(run_id: int) -> list[str]:
    """Run the completed run's hooks that have not completed yet; their step names."""
    run = load_run(run_id)
    if run is None or run.status != Run.Status.COMPLETED:
        return []
    hooks = [
        (point, hook, config)
        for point in ASYNC_POINTS
        for hook, config in hooks_for(run.version.hooks, point)
    ]
    if not hooks:
        return []
    with run_lock(run.pk) as locked, run_trace(run):
        if not locked:
            raise RunBusy(run.pk)
        known = {
            step.idempotency_key: step
            for step in run.steps.only(
                "id", "run_id", "index", "name", "idempotency_key", "status", "started_at"
            )
        }
        next_index = max((step.index for step in known.values()), default=0) + 1
        new_steps: list[Step] = []
        updated: list[Step] = []
        events: list[RunEvent] = []
        done: list[str] = []
        for point, hook, config in hooks:
            key = f"run:{run.pk}:after:{point}:{hook.name}"
            step = known.get(key)
            if step is not None and step.status == Step.Status.COMPLETED:
                continue
            started_at = timezone.now()
            started = time.monotonic()
            try:
                # Model calls of the hooks (memory extraction, compaction) are the run's
                # member's, department's and template's usage, under the hook point's name.
                with charged_to(run_account(run)), purpose(point):
                    output = hook.fn(run, config) or {}
                status = Step.Status.COMPLETED
            except Exception as error:  # one failing hook does not block the others
                logger.exception("hook %s:%s failed for run %s", point, hook.name, run.pk)
                output = {"error": f"{type(error).__name__}: {error}"}
                status = Step.Status.FAILED
            fields = {
                "status": status,
                "output": output,
                "completed_at": timezone.now(),
                "duration_ms": int((time.monotonic() - started) * 1000),
            }
            if step is None:  # the usual case: one insert, finished
                step = Step(
                    run_id=run.pk,
                    index=next_index,
                    kind=Step.Kind.HOOK,
                    name=f"{point}:{hook.name}",
                    idempotency_key=key,
                    started_at=started_at,
                    **fields,
                )
                next_index += 1
                new_steps.append(step)
            else:  # recorded (failed) by an earlier attempt
                for name, value in fields.items():
                    setattr(step, name, value)
                updated.append(step)
            events.append(
                RunEvent(run_id=run.pk, kind="hook", data={"name": step.name, "status": status})
            )
            done.append(step.name)
        if not done:
            return done
        with bookkeeping():
            Step.objects.bulk_create(new_steps)
            for step in updated:
                step.save(update_fields=["status", "output", "completed_at", "duration_ms"])
            RunEvent.objects.bulk_create(events)
    return done
