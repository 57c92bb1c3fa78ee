"""Slack inbound contract: v0 signing, 5-minute window, url_verification, retries, block_actions."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from urllib.parse import urlencode

import pytest
from django.test import Client

from connectors.models import InboundEvent
from connectors.slack import inbound
from connectors.tests.helpers import make_connector

pytestmark = pytest.mark.django_db

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"


def slack_headers(body: bytes, *, timestamp: int | None = None, secret: str = SECRET, **extra):
    ts = str(int(time.time()) if timestamp is None else timestamp)
    mac = hmac.new(secret.encode(), f"v0:{ts}:".encode() + body, hashlib.sha256).hexdigest()
    return {"HTTP_X_SLACK_REQUEST_TIMESTAMP": ts, "HTTP_X_SLACK_SIGNATURE": f"v0={mac}", **extra}


def event_callback(
    event_id="Ev1",
    text="<@UBOT> hello",
    channel="D1",
    channel_type="im",
    ts="1700000000.000100",
    **event,
):
    return {
        "token": "x",
        "team_id": "T1",
        "api_app_id": "A1",
        "type": "event_callback",
        "event_id": event_id,
        "event_time": 1700000000,
        "event": {
            "type": "message",
            "user": "U123",
            "text": text,
            "channel": channel,
            "channel_type": channel_type,
            "ts": ts,
            **event,
        },
    }


@pytest.fixture
def connector(alice):
    return make_connector(alice, "slack", {"bot_token": "xoxb-1", "signing_secret": SECRET})


def post_json(connector, data: dict, **headers):
    body = json.dumps(data).encode()
    return Client().post(
        connector.callback_path,
        data=body,
        content_type="application/json",
        **slack_headers(body),
        **headers,
    )


def test_slack_documented_signature_example():
    # Slack's "Verifying requests" example (secret, timestamp and body from their docs).
    body = (
        b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&"
        b"channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&"
        b"command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2F"
        b"commands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id="
        b"398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
    )
    assert (
        inbound.v0_signature(SECRET, "1531420618", body)
        == "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
    )
    assert inbound.signature_valid(
        SECRET,
        "1531420618",
        body,
        "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503",
        now=1531420618 + 10,
    )


def test_url_verification(connector):
    response = post_json(
        connector, {"type": "url_verification", "challenge": "3eZbrw1aB", "token": "x"}
    )
    assert response.status_code == 200 and response.json() == {"challenge": "3eZbrw1aB"}


def test_direct_message_is_stored_without_the_mention(connector):
    assert post_json(connector, event_callback()).status_code == 200
    event = InboundEvent.objects.get()
    assert (event.sender_id, event.chat_id, event.payload["text"]) == ("U123", "D1", "hello")
    assert event.payload["chat_type"] == "p2p"


def test_retry_with_retry_num_is_deduplicated(connector):
    post_json(connector, event_callback())
    response = post_json(
        connector,
        event_callback(),
        HTTP_X_SLACK_RETRY_NUM="1",
        HTTP_X_SLACK_RETRY_REASON="http_timeout",
    )
    assert response.status_code == 200
    assert InboundEvent.objects.count() == 1


def test_app_mention_and_message_for_one_post_count_once(connector):
    post_json(connector, event_callback("EvA", channel="C1", channel_type="channel"))
    mention = event_callback("EvB", channel="C1", channel_type="channel")
    mention["event"]["type"] = "app_mention"
    post_json(connector, mention)
    assert InboundEvent.objects.filter(kind="message").count() == 1


def test_bot_messages_are_not_messages(connector):
    post_json(connector, event_callback("EvBot", bot_id="B1"))
    assert InboundEvent.objects.get().kind == "event"


def test_bad_signature_and_stale_timestamp_are_401(connector):
    body = json.dumps(event_callback()).encode()
    bad = Client().post(
        connector.callback_path,
        data=body,
        content_type="application/json",
        **slack_headers(body, secret="other"),
    )
    stale = Client().post(
        connector.callback_path,
        data=body,
        content_type="application/json",
        **slack_headers(body, timestamp=int(time.time()) - 301),
    )
    assert (bad.status_code, stale.status_code) == (401, 401)
    connector.refresh_from_db()
    assert connector.signature_rejections == 2


def test_block_actions_form_payload_is_a_card_action(connector, django_capture_on_commit_callbacks):
    payload = {
        "type": "block_actions",
        "user": {"id": "U123"},
        "team": {"id": "T1"},
        "container": {"type": "message", "message_ts": "1700.1", "channel_id": "D1"},
        "channel": {"id": "D1"},
        "response_url": "https://hooks.slack.test/actions/1",
        "actions": [
            {
                "action_id": "cadre_approve",
                "block_id": "cadre_confirmation",
                "value": json.dumps({"cadre_token": "bogus", "decision": "approve"}),
                "action_ts": "1700000001.1",
            }
        ],
    }
    body = urlencode({"payload": json.dumps(payload)}).encode()
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = Client().post(
            connector.callback_path,
            data=body,
            content_type="application/x-www-form-urlencoded",
            **slack_headers(body),
        )
    assert response.status_code == 200
    event = InboundEvent.objects.get()
    assert event.kind == "card_action" and event.status == "ignored"
    assert event.payload["context"]["response_url"].endswith("/actions/1")
    assert len(callbacks) == 1  # the refusal notice, not the processing task
