"""End to end with a real Celery worker on the configured Redis broker: an API message is
accepted, executed by the worker with the offline provider, and the reply streams back; a
delegation crosses two worker executions under one trace id."""

from __future__ import annotations

import time
import uuid

import pytest
from celery.contrib.testing.worker import start_worker
from kombu import Exchange, Queue

from cadre.agents.models import Run
from cadre.celery import app
from tests.agents.test_api import sse_events

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def worker(settings):
    queue = f"cadre-agents-test-{uuid.uuid4().hex[:8]}"  # no other worker takes our tasks
    # Every kind of work on the test's queue: the one worker consumes them all.
    settings.CADRE_QUEUES = dict.fromkeys(settings.CADRE_QUEUES, queue)
    app.loader.import_default_modules()
    # Declare the queue (and its binding) before anything is published: on Redis a message
    # routed to a queue nobody declared yet is dropped.
    with app.connection_for_write() as connection:
        Queue(queue, Exchange(queue, "direct"), routing_key=queue)(
            connection.default_channel
        ).declare()
    with start_worker(
        app,
        queues=[queue],
        concurrency=1,
        pool="solo",
        perform_ping_check=False,
        loglevel="WARNING",
        shutdown_timeout=20,
    ):
        yield queue
    with app.connection_for_write() as connection:
        connection.default_channel.queue_delete(queue)


def wait_for(run_id: int, statuses=Run.TERMINAL, seconds: float = 30) -> Run:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        run = Run.objects.get(pk=run_id)
        if run.status in statuses:
            return run
        time.sleep(0.05)
    events = list(Run.objects.get(pk=run_id).events.values_list("kind", "data"))
    others = list(Run.objects.values_list("pk", "status", "error"))
    raise AssertionError(
        f"run {run_id} is still {Run.objects.get(pk=run_id).status}: {events} {others}"
    )


def test_api_message_runs_in_a_worker_and_replies(worker, client_for, bob, bob_agent):
    api = client_for(bob)
    accepted = api.post(
        "/api/v1/runs/",
        {"agent": bob_agent.pk, "text": "What is the standard discount?"},
        format="json",
    )
    assert accepted.status_code == 202
    run = wait_for(accepted.json()["id"])
    assert run.status == Run.Status.COMPLETED, run.error
    assert run.output["text"].startswith("Offline model: ")
    assert "5 percent" in run.output["text"]
    events = sse_events(api.get(f"/api/v1/runs/{run.pk}/events/"))
    assert ("reply", {"kind": "reply", "text": run.output["text"]}) in events


def test_delegation_through_the_worker(worker, client_for, bob, alice, deployment):
    bob_agent = deployment.agents.get(member=bob)
    alice_agent = deployment.agents.get(member=alice)
    api = client_for(bob)
    accepted = api.post(
        "/api/v1/runs/",
        {"agent": bob_agent.pk, "text": f"ask agent {alice_agent.pk}: standard discount?"},
        format="json",
    )
    run = wait_for(accepted.json()["id"])
    assert run.status == Run.Status.COMPLETED, run.error
    child = Run.objects.get(parent=run)
    assert child.trace_id == run.trace_id and child.status == Run.Status.COMPLETED
    assert "5 percent" in run.output["text"]
