"""The enrichment task through a real Celery worker (a thread) and the Redis broker."""

from __future__ import annotations

import time
import uuid

import pytest
from celery.contrib.testing.worker import start_worker

from cadre.celery import app as celery_app
from cadre.memory import selectors, services
from cadre.memory.models import MemoryEmbedding, MemoryTask
from tests.memory.conftest import actor


def wait_for(condition, timeout: float = 90.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return False


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_enrichment_runs_on_a_real_worker_and_its_status_is_visible(bob, settings):
    queue = f"test-memory-{uuid.uuid4().hex[:8]}"  # never shared with another worker
    celery_app.conf.task_always_eager = False
    settings.CADRE_QUEUES = dict.fromkeys(settings.CADRE_QUEUES, queue)  # memory tasks: after
    previous_queue = celery_app.conf.task_default_queue
    celery_app.conf.task_default_queue = queue
    try:
        with start_worker(
            celery_app, pool="solo", perform_ping_check=False, queues=[queue], shutdown_timeout=20
        ):
            memory = services.memory_add(  # commits: on_commit sends the task to Redis
                actor=actor(bob),
                scope="user",
                kind="preference",
                content="I prefer morning meetings before 10am",
                source_kind="user_statement",
            )
            enrich = MemoryTask.objects.get(memory=memory, kind="enrich")
            assert enrich.status in ("waiting", "in_progress", "completed")

            assert wait_for(
                lambda: MemoryTask.objects.filter(
                    memory=memory, kind="dedup", status="completed"
                ).exists()
            ), list(MemoryTask.objects.values("kind", "status", "error"))
    finally:
        celery_app.conf.task_default_queue = previous_queue

    enrich.refresh_from_db()
    assert (enrich.status, enrich.attempts, enrich.error) == ("completed", 1, "")
    assert enrich.result["embedded"] == 1
    assert MemoryEmbedding.objects.filter(memory=memory).count() == 1
    dedup = MemoryTask.objects.get(memory=memory, kind="dedup")
    assert dedup.result["decision"] == "new"
    hits = selectors.memory_search(actor=actor(bob), query="when do I like meetings").hits
    assert hits[0].memory.pk == memory.pk
    assert hits[0].components.get("vector_rank") is not None or "vector" in str(hits[0].components)
