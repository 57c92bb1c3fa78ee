"""The Celery application: tasks live in each app's tasks.py as @shared_task."""

from __future__ import annotations

import os
from fnmatch import fnmatchcase

from celery import Celery
from celery.signals import task_postrun, task_prerun, worker_process_init
from celery.worker.control import inspect_command

from cadre.observability import instrument_celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cadre.settings")


def route_task(name, args, kwargs, options, task=None, **_kw) -> dict | None:
    """Celery router: the queue of a task's kind of work (settings.CADRE_TASK_QUEUES, then
    CADRE_QUEUES), read when the task is sent; a task of no listed kind goes to the default
    queue. A queue given explicitly to apply_async still wins."""
    from django.conf import settings

    for pattern, kind in settings.CADRE_TASK_QUEUES.items():
        if fnmatchcase(name, pattern):
            return {"queue": settings.CADRE_QUEUES[kind]}
    return None


def task_queue(name: str) -> str:
    """The queue a task of this name is sent to: route_task's, else the default queue."""
    from django.conf import settings

    route = route_task(name, (), {}, {})
    return route["queue"] if route else settings.CELERY_TASK_DEFAULT_QUEUE


def task_queues() -> list[str]:
    """Every queue route_task sends to, the default queue first, each once: what the workers
    of an install (or a bench's) must consume between them for no task to wait forever."""
    from django.conf import settings

    queues = [settings.CELERY_TASK_DEFAULT_QUEUE, *settings.CADRE_QUEUES.values()]
    return list(dict.fromkeys(queues))


app = Celery("cadre")
app.config_from_object("django.conf:settings", namespace="CELERY")


def _redbeat_settings() -> dict:
    """CELERY_REDBEAT_* under their bare names too: celery-redbeat tells a setting that is set
    from one left unset by looking for `redbeat_redis_url` among the configuration's keys, which
    a namespaced Django configuration never has; it would warn and take the broker's options."""
    from django.conf import settings

    return {
        name.removeprefix("CELERY_").lower(): getattr(settings, name)
        for name in dir(settings)
        if name.startswith("CELERY_REDBEAT_")
    }


app.add_defaults(_redbeat_settings)
app.autodiscover_tasks()


@inspect_command()
def cadre_install(state) -> dict:
    """The install a worker belongs to (its data folder) and the queues it takes tasks from:
    `cadre doctor` tells another install's workers on the same Redis database apart."""
    from django.conf import settings

    consumer = state.consumer.task_consumer
    queues = sorted(queue.name for queue in consumer.queues) if consumer else []
    return {"data_dir": str(settings.DATA_DIR), "queues": queues}


@worker_process_init.connect(weak=False)
def _instrument_worker(**_kwargs) -> None:
    instrument_celery()


@task_prerun.connect(weak=False)
@task_postrun.connect(weak=False)
def _database_connections(sender=None, **_kwargs) -> None:
    """Around each task a worker runs, what Django does around each request: close the
    connections that are too old (CONN_MAX_AGE), broken, or left outside autocommit; keep
    the others. A task run eagerly (in the caller's process) leaves the caller's alone."""
    if getattr(getattr(sender, "request", None), "is_eager", False):
        return
    from django.db import close_old_connections

    close_old_connections()
