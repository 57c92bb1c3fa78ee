"""DingTalk Stream mode: stream messages go through the same parse, dedupe and store."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import async_to_sync

from connectors.dingtalk import stream
from connectors.models import InboundEvent
from connectors.tests.helpers import make_connector

pytestmark = pytest.mark.django_db
dingtalk_stream = pytest.importorskip("dingtalk_stream")


def frame(data: dict) -> dingtalk_stream.CallbackMessage:
    return dingtalk_stream.CallbackMessage.from_dict(
        {
            "specVersion": "1.0",
            "type": "CALLBACK",
            "headers": {"topic": dingtalk_stream.ChatbotMessage.TOPIC, "messageId": "m-1"},
            "data": json.dumps(data),
        }
    )


def test_stream_message_is_stored_once(alice):
    connector = make_connector(
        alice, "dingtalk", {"app_key": "k", "app_secret": "s"}, {"mode": "stream"}
    )
    handler = stream.handler_for(connector.pk)
    message = {
        "msgId": "stream-1",
        "msgtype": "text",
        "text": {"content": "hi"},
        "senderStaffId": "staff-1",
        "conversationType": "1",
        "conversationId": "c",
    }
    status, answer = async_to_sync(handler.process)(frame(message))
    assert status == dingtalk_stream.AckMessage.STATUS_OK and answer == {
        "ok": True,
        "duplicate": False,
    }
    _, again = async_to_sync(handler.process)(frame(message))
    assert again["duplicate"] is True
    assert InboundEvent.objects.get().payload["text"] == "hi"


def test_unreadable_stream_message_is_acknowledged_not_stored(alice):
    connector = make_connector(alice, "dingtalk", {"app_key": "k", "app_secret": "s"})
    assert stream.receive(connector.pk, {"msgtype": "text"})["ok"] is False
    assert not InboundEvent.objects.exists()
