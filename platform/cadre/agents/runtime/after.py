"""The asynchronous hooks after a completed run: process_memory, compact, post_process.

Each hook is a persisted step keyed `run:<id>:after:<point>:<hook>`; a redelivered task skips
the hooks that completed and runs the rest.
"""

from __future__ import annotations

import logging
import time

from django.db.models import Max
from django.utils import timezone

from cadre.agents.hooks.registry import ASYNC_POINTS, hooks_for
from cadre.agents.models import Run, Step
from cadre.agents.runtime.engine import _run_lock, _trace, emit

logger = logging.getLogger(__name__)


def run_after_hooks(run_id: int) -> list[str]:
    run = Run.objects.select_related("agent", "version", "member").filter(pk=run_id).first()
    if run is None or run.status != Run.Status.COMPLETED:
        return []
    done = []
    with _run_lock(run.pk) as locked, _trace(run):
        if not locked:
            from cadre.agents.runtime.engine import RunBusy

            raise RunBusy(run.pk)
        for point in ASYNC_POINTS:
            for hook, config in hooks_for(run.version.hooks, point):
                key = f"run:{run.pk}:after:{point}:{hook.name}"
                step = Step.objects.filter(idempotency_key=key).first()
                if step is not None and step.status == Step.Status.COMPLETED:
                    continue
                if step is None:
                    index = (run.steps.aggregate(top=Max("index"))["top"] or 0) + 1
                    step = Step.objects.create(
                        run=run,
                        index=index,
                        kind=Step.Kind.HOOK,
                        name=f"{point}:{hook.name}",
                        idempotency_key=key,
                    )
                started = time.monotonic()
                try:
                    output = hook.fn(run, config) or {}
                    status = Step.Status.COMPLETED
                except Exception as error:  # one failing hook does not block the others
                    logger.exception("hook %s:%s failed for run %s", point, hook.name, run.pk)
                    output = {"error": f"{type(error).__name__}: {error}"}
                    status = Step.Status.FAILED
                step.status = status
                step.output = output
                step.completed_at = timezone.now()
                step.duration_ms = int((time.monotonic() - started) * 1000)
                step.save(update_fields=["status", "output", "completed_at", "duration_ms"])
                emit(run.pk, "hook", {"name": step.name, "status": status})
                done.append(step.name)
    return done
