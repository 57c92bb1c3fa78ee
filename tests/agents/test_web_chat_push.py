# ruff: noqa: F811 - the fixtures imported from tests.console.agents_setup are parameters here
"""The chat websocket is pushed to: events the runtime writes reach the socket through the
session's Channels group as they commit. The consumer reads `RunEvent` rows once, on connect,
to catch up from its cursor; afterwards nothing arrives twice or out of order."""

from __future__ import annotations

from unittest import mock

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer

from cadre.agents import consumers, live
from cadre.agents.models import RunEvent
from tests.agents.test_web_chat import TIMEOUT, browser, eager, socket  # noqa: F401 - fixture
from tests.console.agents_setup import (  # noqa: F401 - fixtures (offline, no embedding hooks)
    bob_agent,
    deployment,
    owner,
    published,
    sales,
    template,
)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def finished_run(eager, bob, bob_agent):
    from cadre.agents.runtime.lifecycle import services as runtime
    from cadre.tenancy.actors import member_actor

    return runtime.run_start(actor=member_actor(bob), agent=bob_agent, text="hi")


@database_sync_to_async
def write(run, kind: str, data: dict) -> RunEvent:
    return RunEvent.objects.create(run=run, kind=kind, data=data)


def test_events_reach_the_socket_through_the_group_without_polling(bob, finished_run):
    client = browser(bob)
    reads = mock.Mock(wraps=consumers._events_after)

    async def scenario():
        communicator = socket(client, finished_run.session_id)
        assert (await communicator.connect(timeout=TIMEOUT))[0]
        ready = await communicator.receive_json_from(timeout=TIMEOUT)
        assert await communicator.receive_nothing(timeout=1)  # the finished run is not replayed
        event = await write(finished_run, "status", {"status": "running"})
        frame = await communicator.receive_json_from(timeout=TIMEOUT)
        await communicator.disconnect()
        return ready, event, frame

    with mock.patch.object(consumers, "_events_after", reads):
        ready, event, frame = async_to_sync(scenario)()
    assert frame == {
        "type": "event",
        "id": event.pk,
        "run": finished_run.pk,
        "kind": "status",
        "data": {"status": "running"},
    }
    assert ready["after"] < event.pk
    # One read of the rows, to catch up on connect; the event itself came through the group.
    assert reads.call_count == 1


def test_a_reconnect_catches_up_from_its_cursor_and_nothing_arrives_twice(bob, finished_run):
    client = browser(bob)
    seen = RunEvent.objects.filter(run=finished_run).order_by("id").last()
    missed = [
        RunEvent.objects.create(run=finished_run, kind="delta", data={"text": text})
        for text in ("a", "b")
    ]

    async def scenario():
        communicator = socket(client, finished_run.session_id, f"after={seen.pk}")
        assert (await communicator.connect(timeout=TIMEOUT))[0]
        await communicator.receive_json_from(timeout=TIMEOUT)  # ready
        caught_up = [await communicator.receive_json_from(timeout=TIMEOUT) for _ in missed]
        # The same events pushed again (a push racing the catch-up read) are dropped.
        await get_channel_layer().group_send(
            live.session_group(finished_run.session_id),
            {"type": live.MESSAGE_TYPE, "events": [live.event_frame(e) for e in missed]},
        )
        newer = await write(finished_run, "reply", {"text": "ab"})
        pushed = await communicator.receive_json_from(timeout=TIMEOUT)
        assert await communicator.receive_nothing(timeout=1)
        await communicator.disconnect()
        return caught_up, newer, pushed

    caught_up, newer, pushed = async_to_sync(scenario)()
    assert [f["id"] for f in caught_up] == [e.pk for e in missed]
    assert [f["data"]["text"] for f in caught_up] == ["a", "b"]
    assert pushed["id"] == newer.pk and pushed["kind"] == "reply"


def test_events_written_in_one_transaction_are_pushed_after_commit_in_order(finished_run):
    from django.db import transaction

    with mock.patch.object(live, "publish") as publish, transaction.atomic():
        events = RunEvent.objects.bulk_create(
            [RunEvent(run=finished_run, kind="step", data={"index": i}) for i in range(3)]
        )
        RunEvent.objects.create(run=finished_run, kind="status", data={"status": "x"})
        assert not publish.called  # nothing leaves before the commit
    pushed = [call.args[0] for call in publish.call_args_list]
    assert [list(by_session) for by_session in pushed] == [[finished_run.session_id]] * 2
    ids = [frame["id"] for by_session in pushed for frame in by_session[finished_run.session_id]]
    assert ids[:3] == [e.pk for e in events] and ids == sorted(ids)
