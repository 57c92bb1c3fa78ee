"""DingTalk inbound contract: sign, 1-hour window, single-use sign, msgId dedupe, cards."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time

import pytest
from django.core.cache import cache
from django.test import Client

from connectors.dingtalk import inbound
from connectors.models import InboundEvent
from connectors.tests.helpers import make_connector, nothing_received

pytestmark = pytest.mark.django_db

SECRET = "ding-app-secret"


def dingtalk_sign(timestamp: str, secret: str = SECRET) -> str:
    mac = hmac.new(secret.encode(), f"{timestamp}\n{secret}".encode(), hashlib.sha256).digest()
    return base64.b64encode(mac).decode()


def robot_message(msg_id="msgA", text=" hello ", group=False):
    now = int(time.time() * 1000)
    return {
        "conversationId": "cid-1",
        "chatbotCorpId": "corp",
        "chatbotUserId": "bot",
        "msgId": msg_id,
        "senderNick": "Zhang San",
        "isAdmin": False,
        "senderStaffId": "staff-1",
        "sessionWebhookExpiredTime": now + 3600_000,
        "createAt": now,
        "senderCorpId": "corp-1",
        "conversationType": "2" if group else "1",
        "senderId": "$:LWCP_v1:$abc",
        "sessionWebhook": "https://oapi.dingtalk.com/robot/sendBySession?session=abc",
        "text": {"content": text},
        "robotCode": "dingtestkey",
        "msgtype": "text",
    }


@pytest.fixture
def connector(alice):
    return make_connector(alice, "dingtalk", {"app_key": "dingtestkey", "app_secret": SECRET})


def post(connector, data: dict, *, timestamp: str | None = None, sign: str | None = None):
    ts = timestamp or str(int(time.time() * 1000))
    return Client().post(
        connector.callback_path,
        data=json.dumps(data),
        content_type="application/json",
        HTTP_TIMESTAMP=ts,
        HTTP_SIGN=sign or dingtalk_sign(ts),
    )


def test_signed_robot_message_is_stored(connector):
    assert post(connector, robot_message()).status_code == 200
    event = InboundEvent.objects.get()
    assert (event.event_key, event.sender_id, event.payload["text"]) == ("msgA", "staff-1", "hello")
    assert event.payload["context"]["session_webhook"].startswith("https://oapi.dingtalk.com/")


def test_group_message_keeps_the_conversation(connector):
    post(connector, robot_message(group=True))
    event = InboundEvent.objects.get()
    assert (event.chat_id, event.payload["chat_type"]) == ("cid-1", "group")


def test_wrong_sign_is_401(connector):
    with nothing_received():
        assert post(connector, robot_message(), sign=dingtalk_sign("1", "x")).status_code == 401


def test_missing_sign_is_401(connector):
    with nothing_received():
        response = Client().post(
            connector.callback_path,
            data=json.dumps(robot_message()),
            content_type="application/json",
        )
    assert response.status_code == 401


def test_sign_older_than_an_hour_is_401(connector):
    old = str(int((time.time() - 3700) * 1000))
    with nothing_received():
        assert post(connector, robot_message(), timestamp=old).status_code == 401


def test_replayed_sign_with_another_body_is_401(connector):
    ts = str(int(time.time() * 1000))
    post(connector, robot_message(text="original"), timestamp=ts)
    # The sign does not cover the body: the same sign with a different body is refused.
    assert post(connector, robot_message(text="tampered"), timestamp=ts).status_code == 401
    event = InboundEvent.objects.get()
    assert event.payload["text"] == "original"


def test_a_sign_used_at_the_end_of_its_window_stays_marked_past_it(connector):
    """A replay checked fresh in the window's last second, then slow to reach the mark, must
    still find it: the mark outlives the window by a margin, not by a second."""
    ts = str(int((time.time() - inbound.WINDOW + 1) * 1000))
    assert post(connector, robot_message(text="original"), timestamp=ts).status_code == 200
    key = cache.make_and_validate_key(
        f"connectors:dingtalk:sign:{connector.pk}:"
        + hashlib.sha256(dingtalk_sign(ts).encode()).hexdigest()[:32]
    )
    redis = cache._cache.get_client(key)
    assert redis.ttl(key) > inbound.SIGN_MARK_MARGIN - 10


@pytest.mark.parametrize("timestamp", ["nan", "inf", "-inf", "NaN", "1e400"])
def test_non_finite_timestamp_is_401(connector, timestamp):
    response = post(connector, robot_message(), timestamp=timestamp, sign=dingtalk_sign(timestamp))
    assert response.status_code == 401
    assert not InboundEvent.objects.exists()


def test_message_without_msgid_is_400(connector):
    data = robot_message()
    del data["msgId"]
    with nothing_received():
        assert post(connector, data).status_code == 400


def test_card_callback_is_a_card_action(connector):
    data = {
        "outTrackId": "cadre-xyz",
        "corpId": "corp-1",
        "userId": "staff-1",
        "content": json.dumps(
            {
                "cardPrivateData": {
                    "actionIds": ["approve"],
                    "params": {"cadre_token": "bogus", "decision": "approve"},
                }
            }
        ),
    }
    response = post(connector, data)
    assert response.status_code == 200
    event = InboundEvent.objects.get()
    assert event.kind == "card_action" and event.status == "ignored"
