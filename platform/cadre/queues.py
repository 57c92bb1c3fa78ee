"""Enqueue a Celery task by its name.

A service that starts background work names the task instead of importing its module, so a
task module imports its service and never the reverse (as Zulip's actions publish to a queue
its workers consume). The task is looked up in the Celery app when it is registered in this
process, so `task_always_eager` (the tests, `make up`'s in-process mode) runs it here and now,
and a test that replaces a task's `apply_async` sees the call; otherwise the name is sent to
the broker for a worker that has it.
"""

from __future__ import annotations

from typing import Any

from celery import current_app


def enqueue(task_name: str, *args: Any, **kwargs: Any):
    """`task.delay(*args, **kwargs)` for the task called ``task_name``."""
    return enqueue_with(task_name, args=args, kwargs=kwargs)


def enqueue_with(
    task_name: str,
    args: tuple | list = (),
    kwargs: dict | None = None,
    **options: Any,
):
    """`task.apply_async(args, kwargs, **options)` for the task called ``task_name``
    (``countdown``, ``eta``, ``priority``, ``queue`` …)."""
    if kwargs:
        options["kwargs"] = kwargs
    task = current_app.tasks.get(task_name)
    if task is not None:
        return task.apply_async(args=tuple(args), **options)
    return current_app.send_task(task_name, args=tuple(args), **options)
