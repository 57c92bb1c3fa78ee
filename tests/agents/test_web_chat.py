# ruff: noqa: F811 - the fixtures imported from tests.console.agents_setup are parameters here
"""Web chat end to end: the console starts a conversation, the websocket of the real ASGI
application (`ws/chat/<session>/`) takes the next message, the run executes in process (Celery
eager) with the offline provider, and its events stream back as frames; a high-risk tool call
is confirmed inline over the same socket. Another member's session is refused."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.test import Client
from django.urls import reverse

from cadre.agents.models import Run, Session
from cadre.governance.models import Confirmation
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
TIMEOUT = 30  # seconds per frame: the shared test machine is slow


@pytest.fixture
def eager():
    """Runs execute in the process that queues them (as a worker would, minus the broker)."""
    from cadre.celery import app

    previous = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = previous


def browser(member) -> Client:
    client = Client()
    client.force_login(member.user)
    return client


def socket(client: Client | None, session_id: int, query: str = "") -> WebsocketCommunicator:
    from cadre.asgi import application

    headers = [(b"origin", b"http://testserver"), (b"host", b"testserver")]
    if client is not None:
        name = settings.SESSION_COOKIE_NAME
        headers.append((b"cookie", f"{name}={client.cookies[name].value}".encode()))
    path = f"/ws/chat/{session_id}/" + (f"?{query}" if query else "")
    return WebsocketCommunicator(application, path, headers=headers)


async def frames_until(communicator, done) -> list[dict]:
    """Frames received until `done(frame)` is true (that frame included)."""
    frames = []
    while True:
        frame = await communicator.receive_json_from(timeout=TIMEOUT)
        frames.append(frame)
        if done(frame):
            return frames


def finished(run_id):
    return lambda frame: (
        frame.get("type") == "event"
        and frame["run"] == run_id
        and frame["kind"] == "status"
        and frame["data"]["status"] in Run.TERMINAL
    )


def test_message_over_the_websocket_streams_the_reply(eager, bob, bob_agent):
    client = browser(bob)
    started = client.post(
        reverse("console:chat_agent", args=[bob_agent.pk]), {"text": "hello there"}
    )
    session = Session.objects.get(agent=bob_agent)
    assert started["Location"] == reverse("console:chat_session", args=[session.pk])
    first = session.runs.get()
    assert first.status == Run.Status.COMPLETED  # executed eagerly when the page posted

    async def scenario():
        communicator = socket(client, session.pk)
        connected, _ = await communicator.connect(timeout=TIMEOUT)
        assert connected
        ready = await communicator.receive_json_from(timeout=TIMEOUT)
        assert ready["type"] == "ready" and ready["session"] == session.pk
        await communicator.send_json_to(
            {"type": "message", "text": "What is the standard discount?"}
        )
        frames = await frames_until(
            communicator,
            lambda f: (
                f.get("type") == "event"
                and f["kind"] == "status"
                and f["data"]["status"] in Run.TERMINAL
            ),
        )
        if not any(f["type"] == "accepted" for f in frames):
            frames.append(await communicator.receive_json_from(timeout=TIMEOUT))
        await communicator.disconnect()
        return frames

    frames = async_to_sync(scenario)()
    accepted = next(f for f in frames if f["type"] == "accepted")
    run = Run.objects.get(pk=accepted["run"])
    assert run.session_id == session.pk and run.status == Run.Status.COMPLETED
    events = [f for f in frames if f["type"] == "event"]
    assert {f["run"] for f in events} == {run.pk}  # the earlier, finished run is not replayed
    kinds = [f["kind"] for f in events]
    assert kinds[0] == "status" and "step" in kinds and "reply" in kinds
    reply = next(f for f in events if f["kind"] == "reply")["data"]["text"]
    assert reply == run.output["text"]
    assert reply.startswith("Offline model: ") and "5 percent" in reply
    assert [f["id"] for f in events] == sorted(f["id"] for f in events)


def test_a_confirmation_is_decided_inline_and_the_run_continues(eager, bob, bob_agent):
    from cadre.agents.runtime.lifecycle import services as runtime
    from cadre.tenancy.actors import member_actor

    opening = runtime.run_start(actor=member_actor(bob), agent=bob_agent, text="hi")
    client = browser(bob)

    async def scenario():
        communicator = socket(client, opening.session_id)
        connected, _ = await communicator.connect(timeout=TIMEOUT)
        assert connected
        await communicator.receive_json_from(timeout=TIMEOUT)  # ready
        await communicator.send_json_to(
            {"type": "message", "text": "send hello to group:all-staff"}
        )
        before = await frames_until(
            communicator, lambda f: f.get("type") == "event" and f["kind"] == "wait"
        )
        wait = before[-1]
        assert wait["confirmation"]["can_decide"] is True
        assert wait["confirmation"]["tool"] == "im_send"
        await communicator.send_json_to(
            {"type": "decide", "confirmation": wait["confirmation"]["id"], "decision": "approve"}
        )
        after = await frames_until(communicator, finished(wait["run"]))
        if not any(f["type"] == "decided" for f in after):
            after.append(await communicator.receive_json_from(timeout=TIMEOUT))
        await communicator.disconnect()
        return wait, after

    wait, after = async_to_sync(scenario)()
    decided = next(f for f in after if f["type"] == "decided")
    assert decided["confirmation"]["status"] == "approved"
    assert decided["confirmation"]["can_decide"] is False
    confirmation = Confirmation.objects.get(pk=wait["confirmation"]["id"])
    assert confirmation.decided_via == "console" and confirmation.decided_by_id == bob.pk
    run = Run.objects.get(pk=wait["run"])
    assert run.status == Run.Status.COMPLETED
    kinds = [f["kind"] for f in after if f["type"] == "event"]
    assert "resume" in kinds and "reply" in kinds
    assert run.steps.filter(kind="tool_call", name="im_send", status="completed").exists()


def test_another_members_session_is_refused(eager, alice, bob, charlie, bob_agent, alice_agent):
    from cadre.agents.runtime.lifecycle import services as runtime
    from cadre.tenancy.actors import member_actor

    session_id = runtime.run_start(actor=member_actor(bob), agent=bob_agent, text="hi").session_id

    async def connect(client):
        communicator = socket(client, session_id)
        connected, code = await communicator.connect(timeout=TIMEOUT)
        if connected:
            await communicator.disconnect()
        return connected, code

    # an owner of the same organization, another organization, not signed in, the owner
    clients = [browser(alice), browser(charlie), None, browser(bob)]

    async def scenario():
        return [await connect(client) for client in clients]

    colleague, outsider, anonymous, own = async_to_sync(scenario)()
    assert colleague == (False, 4404)
    assert outsider == (False, 4404)
    assert anonymous == (False, 4401)
    assert own[0] is True


def test_bad_frames_get_an_error_and_start_nothing(eager, bob, bob_agent):
    from cadre.agents.runtime.lifecycle import services as runtime
    from cadre.tenancy.actors import member_actor

    session_id = runtime.run_start(actor=member_actor(bob), agent=bob_agent, text="hi").session_id
    client = browser(bob)

    async def scenario():
        communicator = socket(client, session_id)
        assert (await communicator.connect(timeout=TIMEOUT))[0]
        await communicator.receive_json_from(timeout=TIMEOUT)  # ready
        replies = []
        for frame in ({"type": "message", "text": ""}, {"type": "dance"}):
            await communicator.send_json_to(frame)
            replies.append(await _next_non_event(communicator))
        await communicator.send_to(text_data="not json")
        replies.append(await _next_non_event(communicator))
        await communicator.send_json_to({"type": "decide", "confirmation": 999999, "decision": "x"})
        replies.append(await _next_non_event(communicator))
        await communicator.disconnect()
        return replies

    empty, unknown, not_json, missing = async_to_sync(scenario)()
    assert empty["type"] == "error" and empty["code"] == "invalid"
    assert unknown["type"] == "error" and "message" in unknown["message"]
    assert not_json == {"type": "error", "code": "invalid", "message": "Frames are JSON."}
    assert missing["code"] == "not_found"
    assert Run.objects.filter(session_id=session_id).count() == 1


async def _next_non_event(communicator) -> dict:
    while True:
        frame = await communicator.receive_json_from(timeout=TIMEOUT)
        if frame["type"] != "event":
            return frame
