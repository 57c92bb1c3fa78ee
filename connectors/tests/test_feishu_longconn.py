"""Feishu long-connection mode against a loopback endpoint + websocket speaking the SDK's
protocol: the real `lark_oapi.ws.Client` connects, receives frames and answers them; events go
through the HTTP path's parse → de-duplicate → store → enqueue."""

from __future__ import annotations

import asyncio
import io
import sys
import threading
import time

import pytest
from django.core.management import CommandError, call_command

from connectors.feishu.tests.fake_api import APP_ID, APP_SECRET, FakeFeishu
from connectors.inbound import streams
from connectors.models import InboundEvent, UnmappedIdentity
from connectors.tests.helpers import make_connector

lark = pytest.importorskip("lark_oapi")

from connectors.feishu.longconn import LongConnection  # noqa: E402
from connectors.tests.fake_longconn import FakeLongConnection  # noqa: E402


def message_event(event_id: str, text: str = "hello", open_id: str = "ou_stranger") -> dict:
    return {
        "schema": "2.0",
        "header": {
            "event_id": event_id,
            "event_type": "im.message.receive_v1",
            "tenant_key": "tenant-1",
            "app_id": APP_ID,
            "create_time": str(int(time.time() * 1000)),
        },
        "event": {
            "sender": {"sender_id": {"open_id": open_id}, "sender_type": "user"},
            "message": {
                "message_id": f"om_{event_id}",
                "chat_id": "oc_p2p",
                "chat_type": "p2p",
                "message_type": "text",
                "content": f'{{"text": "{text}"}}',
            },
        },
    }


class Running:
    """The SDK client of a connector, in a thread, as `connectors_stream` runs it."""

    def __init__(self, connector):
        from lark_oapi.ws import client as ws_client

        self.loop = ws_client.loop  # the SDK runs every client on this module-level loop
        self.connection = LongConnection(connector)
        self.client = self.connection.client()
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.client.start()
        except (RuntimeError, asyncio.CancelledError):
            pass  # stopped by the test
        except Exception as error:
            self.errors.append(error)

    def stop(self) -> None:
        def cancel_and_stop():
            for task in asyncio.all_tasks(self.loop):
                task.cancel()
            self.loop.stop()

        if self.thread.is_alive():
            self.loop.call_soon_threadsafe(cancel_and_stop)
            self.thread.join(30)
        self.connection.close()


@pytest.fixture
def feishu_api(fake_api):
    return FakeFeishu(fake_api)


@pytest.fixture
def endpoint(fake_api):
    server = FakeLongConnection(fake_api, app_id=APP_ID, app_secret=APP_SECRET).start()
    yield server
    server.stop()


@pytest.fixture
def long_connection_connector(alice, fake_api):
    return make_connector(
        alice,
        "feishu",
        {"app_id": APP_ID, "app_secret": APP_SECRET},
        {"mode": "long_connection", "api_base_url": fake_api.url},
    )


@pytest.fixture
def running():
    started: list[Running] = []

    def start(connector) -> Running:
        started.append(Running(connector))
        return started[-1]

    yield start
    for item in started:
        item.stop()


@pytest.mark.django_db(transaction=True)
def test_long_connection_message_is_stored_once_processed_and_answered(
    long_connection_connector, feishu_api, endpoint, running, celery_eager
):
    running(long_connection_connector)

    answer = endpoint.push(message_event("ev-1", "hi there"))
    again = endpoint.push(message_event("ev-1", "hi there"))  # Feishu re-delivers

    assert answer["code"] == 200 and again["code"] == 200
    event = InboundEvent.objects.get()
    assert (event.event_key, event.sender_id, event.payload["text"]) == (
        "ev-1",
        "ou_stranger",
        "hi there",
    )
    # The worker ran once (eagerly here): the stranger was queued and answered once.
    assert event.status == InboundEvent.Status.UNMAPPED
    assert UnmappedIdentity.objects.get().platform_user_id == "ou_stranger"
    sent = feishu_api.sent()
    assert len(sent) == 1 and sent[0].json()["receive_id"] == "ou_stranger"
    # The handshake used the connector's app credentials and the connector's base URL.
    assert endpoint.handshakes == 1


@pytest.mark.django_db(transaction=True)
def test_long_connection_card_click_is_answered_with_the_refusal_toast(
    long_connection_connector, endpoint, running
):
    running(long_connection_connector)
    click = {
        "schema": "2.0",
        "header": {"event_id": "ev-card", "event_type": "card.action.trigger", "app_id": APP_ID},
        "event": {
            "operator": {"open_id": "ou_someone"},
            "action": {"value": {"cadre_token": "forged", "decision": "approve"}, "tag": "button"},
            "context": {"open_message_id": "om_card", "open_chat_id": "oc_1"},
        },
    }

    answer = endpoint.push(click)

    assert answer["code"] == 200
    assert answer["data"]["toast"]["type"] == "error"
    event = InboundEvent.objects.get(event_key="ev-card")
    assert event.kind == "card_action"


@pytest.mark.django_db(transaction=True)
def test_long_connection_with_a_wrong_app_secret_stops_with_an_error(
    alice, fake_api, endpoint, running
):
    connector = make_connector(
        alice,
        "feishu",
        {"app_id": APP_ID, "app_secret": "not-the-secret"},
        {"mode": "long_connection", "api_base_url": fake_api.url},
    )
    worker = running(connector)
    worker.thread.join(60)

    assert not worker.thread.is_alive()
    assert worker.errors and "app id or secret invalid" in str(worker.errors[0])
    assert endpoint.handshakes == 0


@pytest.mark.django_db
def test_stream_workers_lists_active_stream_mode_connectors_only(alice):
    feishu = make_connector(
        alice, "feishu", {"app_id": "a", "app_secret": "s"}, {"mode": "long_connection"}, "f"
    )
    dingtalk = make_connector(
        alice, "dingtalk", {"app_key": "k", "app_secret": "s"}, {"mode": "stream"}, "d"
    )
    make_connector(alice, "feishu", {"app_id": "a", "app_secret": "s"}, {}, "webhook mode")
    disabled = make_connector(
        alice, "dingtalk", {"app_key": "k", "app_secret": "s"}, {"mode": "stream"}, "off"
    )
    disabled.status = "disabled"
    disabled.save(update_fields=["status"])

    workers = streams.stream_workers()

    assert [w.public_id for w in workers] == [feishu.public_id, dingtalk.public_id]
    assert all(not w.problem for w in workers)  # both extras are installed here


@pytest.mark.django_db
def test_stream_worker_fingerprint_changes_when_credentials_rotate(alice):
    from cadre.tenancy.actors import member_actor
    from connectors.base import services

    connector = make_connector(
        alice, "feishu", {"app_id": "a", "app_secret": "s"}, {"mode": "long_connection"}
    )
    before = streams.stream_workers()[0].fingerprint
    services.connector_rotate_credentials(
        actor=member_actor(alice),
        connector=connector,
        credentials={"app_id": "a", "app_secret": "t"},
    )
    assert streams.stream_workers()[0].fingerprint != before


@pytest.mark.django_db
def test_stream_command_refuses_unknown_and_http_only_connectors(alice):
    slack = make_connector(alice, "slack", {"bot_token": "x", "signing_secret": "y"})
    with pytest.raises(CommandError, match="No active connector"):
        call_command("connectors_stream", "no-such-id")
    with pytest.raises(CommandError, match="no long-connection worker"):
        call_command("connectors_stream", slack.public_id)


def test_a_public_id_never_looks_like_a_command_line_option(monkeypatch):
    """`connectors_stream <id>` failed ("arguments are required") for an id starting with "-"."""
    from connectors import models

    drawn = iter(["-starts-with-a-dash", "fine-id"])
    monkeypatch.setattr(models.secrets, "token_urlsafe", lambda _n: next(drawn))
    assert models.new_public_id() == "fine-id"


def stop_the_sdk_loop(thread: threading.Thread) -> None:
    """Stop the SDK's module-level loop (and with it the client running in `thread`)."""
    from lark_oapi.ws import client as ws_client

    def cancel_and_stop():
        for task in asyncio.all_tasks(ws_client.loop):
            task.cancel()
        ws_client.loop.stop()

    ws_client.loop.call_soon_threadsafe(cancel_and_stop)
    thread.join(30)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("line", ["", "no\n"])
def test_a_standby_told_nothing_but_go_exits_without_connecting(
    long_connection_connector, endpoint, monkeypatch, line
):
    monkeypatch.setattr(sys, "stdin", io.StringIO(line))  # "": the supervisor is gone (EOF)
    out = io.StringIO()

    call_command("connectors_stream", long_connection_connector.public_id, "--standby", stdout=out)

    assert "Standing by for" in out.getvalue() and "Connecting" not in out.getvalue()
    assert endpoint.handshakes == 0 and endpoint.live == 0


@pytest.mark.django_db(transaction=True)
def test_a_standby_told_go_connects_and_receives(long_connection_connector, endpoint, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO("go\n"))
    out = io.StringIO()
    errors: list[BaseException] = []

    def command() -> None:
        try:
            call_command(
                "connectors_stream", long_connection_connector.public_id, "--standby", stdout=out
            )
        except (RuntimeError, asyncio.CancelledError):
            pass  # the loop stopped by the test
        except Exception as error:
            errors.append(error)

    thread = threading.Thread(target=command, daemon=True)
    thread.start()
    try:
        answer = endpoint.push(message_event("ev-standby"))
        assert answer["code"] == 200
        assert endpoint.handshakes == 1
        assert InboundEvent.objects.filter(event_key="ev-standby").exists()
        assert "Standing by for" in out.getvalue() and "Connecting" in out.getvalue()
    finally:
        stop_the_sdk_loop(thread)
    assert not thread.is_alive() and errors == []
