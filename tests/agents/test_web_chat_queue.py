# ruff: noqa: F811 - the fixtures imported from tests.console.agents_setup are parameters here
"""A queued message over the chat's websocket: `queue` says how it waits (no worker runs in
this test, so none takes it), `retry` queues it again and `cancel` cancels it, both audited;
another conversation's run is not found."""

from __future__ import annotations

from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from django.utils import timezone

from cadre.agents.models import Run, RunEvent
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.governance.models import AuditEvent
from cadre.tenancy.actors import member_actor
from tests.agents.test_web_chat import TIMEOUT, _next_non_event, browser, socket
from tests.console.agents_setup import (  # noqa: F401 - fixtures (offline, no embedding hooks)
    alice_agent,
    bob_agent,
    deployment,
    owner,
    published,
    sales,
    template,
)

pytestmark = pytest.mark.django_db(transaction=True)


def test_queue_retry_and_cancel_over_the_socket(bob, alice, bob_agent, alice_agent):
    run = runtime.run_start(actor=member_actor(bob), agent=bob_agent, text="hi")
    then = timezone.now() - timedelta(minutes=3)
    Run.objects.filter(pk=run.pk).update(created_at=then)
    RunEvent.objects.filter(run=run).update(created_at=then)
    other = runtime.run_start(actor=member_actor(alice), agent=alice_agent, text="mine")
    client = browser(bob)

    async def scenario():
        communicator = socket(client, run.session_id)
        assert (await communicator.connect(timeout=TIMEOUT))[0]
        await communicator.receive_json_from(timeout=TIMEOUT)  # ready
        replies = []
        for frame in (
            {"type": "queue", "run": run.pk},
            {"type": "queue", "run": other.pk},
            {"type": "cancel", "run": other.pk},
            {"type": "retry", "run": run.pk},
            {"type": "cancel", "run": run.pk},
            {"type": "retry", "run": run.pk},
        ):
            await communicator.send_json_to(frame)
            replies.append(await _next_non_event(communicator))
        await communicator.disconnect()
        return replies

    waiting, foreign, foreign_cancel, retried, cancelled, too_late = async_to_sync(scenario)()
    assert waiting["type"] == "queue" and waiting["run"] == run.pk
    assert waiting["status"] == "queued" and waiting["workers"] == "none"
    assert waiting["waited"] >= 180
    assert foreign["code"] == foreign_cancel["code"] == "not_found"
    assert Run.objects.get(pk=other.pk).status == Run.Status.QUEUED
    # Queued again just now: too early to judge the workers.
    assert retried["status"] == "queued" and retried["workers"] == ""
    assert cancelled == {"type": "queue", "run": run.pk, "status": "cancelled"}
    assert too_late["type"] == "error" and too_late["code"] == "run_not_queued"
    assert Run.objects.get(pk=run.pk).status == Run.Status.CANCELLED
    actions = list(
        AuditEvent.objects.filter(target_id=str(run.pk), action__startswith="run.")
        .order_by("id")
        .values_list("action", flat=True)
    )
    assert actions == ["run.requeue", "run.cancel"]
