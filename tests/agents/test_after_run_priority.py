"""Answering comes before learning: the after-run hooks of a finished run are queued at the
broker's lowest priority, so a worker takes a newer run's execution first."""

from __future__ import annotations

import uuid

import pytest
from kombu import Exchange, Queue

from cadre.agents.runtime.lifecycle import execution as engine
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.celery import app
from cadre.tenancy.actors import member_actor

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def queue(settings):
    name = f"cadre-agents-priority-{uuid.uuid4().hex[:8]}"  # nobody consumes it
    # One queue for runs and after-run hooks (CADRE_AFTER_RUN_QUEUE set to the runs queue):
    # the priority alone orders them.
    settings.CADRE_QUEUES = {**settings.CADRE_QUEUES, "runs": name, "after": name}
    with app.connection_for_write() as connection:
        Queue(name, Exchange(name, "direct"), routing_key=name)(
            connection.default_channel
        ).declare()
    yield name
    with app.connection_for_write() as connection:
        connection.default_channel.queue_delete(name)


def _take(queue: str) -> list[tuple[str, str]]:
    """(task name, args) of every message in the queue, in the order a worker gets them."""
    taken = []
    with app.connection_for_read() as connection:
        channel = connection.default_channel
        while (message := channel.basic_get(queue, no_ack=True)) is not None:
            taken.append((message.headers["task"], message.headers["argsrepr"]))
    return taken


def test_a_new_run_is_taken_before_the_previous_runs_after_hooks(queue, bob, bob_agent):
    first = runtime.run_start(actor=member_actor(bob), agent=bob_agent, text="hello")
    assert _take(queue) == [("cadre.agents.tasks.run_execute", f"({first.pk},)")]
    assert engine.run_execute(first.pk) == "completed"  # queues its after-run hooks
    second = runtime.run_start(
        actor=member_actor(bob), agent=bob_agent, text="and now?", session=first.session
    )
    assert _take(queue) == [
        ("cadre.agents.tasks.run_execute", f"({second.pk},)"),
        ("cadre.agents.tasks.run_after", f"({first.pk},)"),
    ]
