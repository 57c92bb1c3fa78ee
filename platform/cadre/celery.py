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


# The kombu release whose Redis channels `_released_redis_channel_guard` is for: checked by
# tests/runtime/test_broker_restart.py, which fails on an upgrade until the guard is re-checked.
KOMBU_RELEASED_CHANNEL_BUG = "5.7.0"


def _released_redis_channel_guard() -> None:
    """A worker that loses Redis while a task is unacknowledged keeps running (kombu 5.7.0).

    On a lost broker connection Celery collects the connection, which releases its transport
    (`transport.client = None`), and then closes it. A channel whose first close failed on the
    dead connection is closed again, which restores its unacknowledged messages through a new
    Redis pool whose address is read from the released transport: AttributeError ("'NoneType'
    object has no attribute 'hostname'"), which no close path expects, and the worker exits.
    Here a channel of a released transport raises a connection error instead, which every close
    path ignores. What it held stays in Redis's unacknowledged set; the task running meanwhile
    finishes, its acknowledgement on the released channel fails ("Couldn't ack", logged), and
    the broker's sweep puts the message back in its queue after CADRE_BROKER_VISIBILITY_TIMEOUT,
    as with any acknowledgement lost with a connection (tasks are idempotent)."""
    import kombu
    from kombu.transport import redis as kombu_redis

    if kombu.__version__ != KOMBU_RELEASED_CHANNEL_BUG:
        return
    connection_parameters = kombu_redis.Channel._connparams

    def _connparams(channel, asynchronous=False):
        transport = channel.connection
        if transport is None or transport.client is None:
            raise kombu_redis.redis.exceptions.ConnectionError("the broker connection is closed")
        return connection_parameters(channel, asynchronous=asynchronous)

    kombu_redis.Channel._connparams = _connparams


_released_redis_channel_guard()

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


# A task that sends another while the broker restarts (a run's after-run hooks or its reply,
# the next drain) waits for the broker instead of failing after Celery's default of four tries
# within a second: the run it belongs to would otherwise end failed or lose its follow-up work
# though everything it did is committed. About 30 s, longer than a Redis restart; a worker
# process only: the web process keeps the default, so a request never hangs on Redis.
WORKER_PUBLISH_RETRY_POLICY = {
    "max_retries": 30,
    "interval_start": 0.5,
    "interval_step": 0.5,
    "interval_max": 1.0,
}


@worker_process_init.connect(weak=False)
def _publish_retry_in_workers(**_kwargs) -> None:
    app.conf.task_publish_retry_policy = WORKER_PUBLISH_RETRY_POLICY


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
