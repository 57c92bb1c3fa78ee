"""Authentic but malformed events, per platform: 400 `invalid` or stored clean, never a 5xx.

Each request below carries a valid signature, so the platform (or whoever holds its secret)
sent it: NUL characters and lone surrogates are removed or replaced before storing (PostgreSQL
cannot hold NUL, UTF-8 cannot encode a lone surrogate), NaN and infinities are stored as null
(jsonb has no number for them); nesting too deep for the JSON parser and fields of the wrong
type are 400 with the error envelope, and nothing is stored.
"""

from __future__ import annotations

import hashlib
import json
import time
from urllib.parse import urlencode

import pytest
from django.test import Client

from connectors.base import ParsedEvent
from connectors.dingtalk.inbound import sign as dingtalk_sign
from connectors.inbound.store import storable_event
from connectors.models import InboundEvent
from connectors.slack.inbound import v0_signature
from connectors.tests.helpers import make_connector
from connectors.webhook.inbound import sign as webhook_sign
from connectors.wecom import crypto as wecom_crypto

pytestmark = pytest.mark.django_db

NUL, LONE = "\x00", "\ud800"
DEEP = 100_000


def deep_body(prefix: dict) -> bytes:
    """`prefix` plus a field nested DEEP lists deep (about 200 kB of JSON)."""
    head = json.dumps(prefix)[:-1].encode()
    return head + b', "deep": ' + b"[" * DEEP + b"]" * DEEP + b"}"


def body_of(data: dict) -> bytes:
    return json.dumps(data).encode()  # ensure_ascii: NUL and lone surrogates as \u escapes


def assert_stored_clean():
    for event in InboundEvent.objects.all():
        for value in (event.event_key, event.sender_id, event.chat_id):
            assert NUL not in value and LONE not in value
        text = json.dumps(event.payload, ensure_ascii=False)
        assert NUL not in text and LONE not in text
        text.encode("utf-8")


def assert_refused(response):
    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] == "invalid"
    assert not InboundEvent.objects.exists()


# --- webhook -----------------------------------------------------------------------------

WEBHOOK_SECRET = "whsec-malformed"


def webhook_message(**changes) -> dict:
    data = {"event_id": "evt-1", "text": "hello", "user": {"id": "u-1"}, "chat": {"id": "c-1"}}
    data.update(changes)
    return data


def webhook_post(connector, body: bytes, timestamp: str | None = None):
    ts = timestamp or str(int(time.time()))
    return Client().post(
        connector.callback_path,
        data=body,
        content_type="application/json",
        HTTP_X_CADRE_TIMESTAMP=ts,
        HTTP_X_CADRE_SIGNATURE=webhook_sign(WEBHOOK_SECRET, ts, body),
    )


@pytest.fixture
def hook(alice):
    return make_connector(
        alice,
        "webhook",
        {"signing_secret": WEBHOOK_SECRET},
        {"callback_url": "http://127.0.0.1:9/"},
    )


@pytest.mark.parametrize(
    "body, stored",
    [
        (body_of(webhook_message(event_id=f"evt{NUL}1")), "evt1"),
        (body_of(webhook_message(text=f"hel{NUL}lo")), "evt-1"),
        (body_of(webhook_message(user={"id": f"u{NUL}1", "name": f"A{NUL}"})), "evt-1"),
        (body_of(webhook_message(text=f"bad {LONE} half")), "evt-1"),
        (body_of(webhook_message(user={"id": LONE})), "evt-1"),
    ],
    ids=["nul-id", "nul-text", "nul-user", "lone-surrogate-text", "lone-surrogate-user"],
)
def test_webhook_unstorable_characters_are_cleaned(hook, body, stored):
    assert webhook_post(hook, body).status_code == 200
    assert list(InboundEvent.objects.values_list("event_key", flat=True)) == [stored]
    assert_stored_clean()


@pytest.mark.parametrize(
    "body",
    [
        deep_body(webhook_message()),
        body_of(webhook_message(user="u-1")),
        body_of(webhook_message(user=["u-1"])),
        body_of(webhook_message(chat="c-1")),
        body_of(webhook_message(text={"a": 1})),
        body_of(webhook_message(event_id=["e"])),
        body_of(webhook_message(user={"id": {"nested": 1}})),
    ],
    ids=["deep", "user-str", "user-list", "chat-str", "text-obj", "id-list", "user-id-obj"],
)
def test_webhook_malformed_event_is_400(hook, body):
    assert_refused(webhook_post(hook, body))


@pytest.mark.parametrize("timestamp", ["nan", "NaN", "inf", "-inf", "1e999"])
def test_webhook_non_finite_timestamp_is_401(hook, timestamp):
    response = webhook_post(hook, body_of(webhook_message()), timestamp=timestamp)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "signature_invalid"
    assert not InboundEvent.objects.exists()


def test_long_event_ids_sharing_a_prefix_are_two_events(hook):
    prefix = "x" * 191
    assert webhook_post(hook, body_of(webhook_message(event_id=prefix + "a"))).status_code == 200
    assert webhook_post(hook, body_of(webhook_message(event_id=prefix + "b"))).status_code == 200
    keys = list(InboundEvent.objects.values_list("event_key", flat=True))
    assert len(keys) == 2 and len(set(keys)) == 2 and all(len(key) <= 191 for key in keys)
    # The same long id again is still a duplicate.
    assert webhook_post(hook, body_of(webhook_message(event_id=prefix + "a"))).status_code == 200
    assert InboundEvent.objects.count() == 2


# --- Slack -------------------------------------------------------------------------------

SLACK_SECRET = "slack-signing-secret"


def slack_event(event: object = None, **changes) -> dict:
    data = {
        "type": "event_callback",
        "team_id": "T1",
        "event_id": "Ev1",
        "event": {
            "type": "message",
            "channel": "D1",
            "channel_type": "im",
            "user": "U1",
            "text": "hello",
            "ts": "1700000000.0001",
        }
        if event is None
        else event,
    }
    data.update(changes)
    return data


def slack_message(**fields) -> dict:
    data = slack_event()
    data["event"].update(fields)
    return data


def slack_actions(**changes) -> dict:
    data = {
        "type": "block_actions",
        "user": {"id": "U1"},
        "team": {"id": "T1"},
        "actions": [{"action_id": "approve", "value": "{}", "action_ts": "1700000000.1"}],
        "container": {"channel_id": "D1", "message_ts": "1700000000.0002"},
    }
    data.update(changes)
    return data


def slack_post(connector, body: bytes):
    ts = str(int(time.time()))
    return Client().post(
        connector.callback_path,
        data=body,
        content_type="application/json",
        HTTP_X_SLACK_REQUEST_TIMESTAMP=ts,
        HTTP_X_SLACK_SIGNATURE=v0_signature(SLACK_SECRET, ts, body),
    )


@pytest.fixture
def slack(alice):
    return make_connector(alice, "slack", {"bot_token": "xoxb-1", "signing_secret": SLACK_SECRET})


@pytest.mark.parametrize(
    "body",
    [
        body_of(slack_event(event_id=f"Ev{NUL}1")),
        body_of(slack_message(text=f"hel{NUL}lo")),
        body_of(slack_message(user=f"U{NUL}1")),
        body_of(slack_message(channel=f"D{NUL}1", ts=f"1{NUL}")),
        body_of(slack_message(text=f"bad {LONE} half")),
    ],
    ids=["nul-event-id", "nul-text", "nul-user", "nul-channel", "lone-surrogate"],
)
def test_slack_unstorable_characters_are_cleaned(slack, body):
    assert slack_post(slack, body).status_code == 200
    assert InboundEvent.objects.count() == 1
    assert_stored_clean()


@pytest.mark.parametrize(
    "body",
    [
        deep_body(slack_event()),
        body_of(slack_event(event="message")),
        body_of(slack_event(event=["message"])),
        body_of(slack_message(user={"id": "U1"})),
        body_of(slack_message(text=["hi"])),
        body_of(slack_message(files="F1")),
        body_of(slack_actions(actions="approve")),
        body_of(slack_actions(actions={"value": "{}"})),
        body_of(slack_actions(actions=[1])),
        body_of(slack_actions(user="U1")),
        body_of(slack_actions(container="D1")),
    ],
    ids=[
        "deep",
        "event-str",
        "event-list",
        "user-obj",
        "text-list",
        "files-str",
        "actions-str",
        "actions-obj",
        "action-int",
        "actions-user-str",
        "container-str",
    ],
)
def test_slack_malformed_event_is_400_without_retries(slack, body):
    response = slack_post(slack, body)
    assert_refused(response)
    assert response.headers["X-Slack-No-Retry"] == "1"


# --- DingTalk ----------------------------------------------------------------------------

DING_SECRET = "ding-malformed-secret"


def ding_message(**changes) -> dict:
    data = {
        "msgId": "msg-1",
        "msgtype": "text",
        "text": {"content": "hello"},
        "conversationType": "1",
        "conversationId": "cid-1",
        "senderStaffId": "staff-1",
        "senderNick": "Zhang San",
        "sessionWebhook": "https://oapi.dingtalk.com/robot/sendBySession?session=s",
        "sessionWebhookExpiredTime": int(time.time() * 1000) + 3600_000,
    }
    data.update(changes)
    return data


def ding_post(connector, body: bytes):
    ts = str(int(time.time() * 1000))
    return Client().post(
        connector.callback_path,
        data=body,
        content_type="application/json",
        HTTP_TIMESTAMP=ts,
        HTTP_SIGN=dingtalk_sign(DING_SECRET, ts),
    )


@pytest.fixture
def ding(alice):
    return make_connector(alice, "dingtalk", {"app_key": "k", "app_secret": DING_SECRET})


@pytest.mark.parametrize(
    "body",
    [
        body_of(ding_message(msgId=f"msg{NUL}1")),
        body_of(ding_message(text={"content": f"hel{NUL}lo"})),
        body_of(ding_message(senderStaffId=f"staff{NUL}1", senderNick=NUL)),
        body_of(ding_message(text={"content": f"bad {LONE} half"})),
    ],
    ids=["nul-id", "nul-text", "nul-user", "lone-surrogate"],
)
def test_dingtalk_unstorable_characters_are_cleaned(ding, body):
    assert ding_post(ding, body).status_code == 200
    assert InboundEvent.objects.count() == 1
    assert_stored_clean()


@pytest.mark.parametrize(
    "body",
    [
        deep_body(ding_message()),
        body_of(ding_message(sessionWebhookExpiredTime="soon")),
        body_of(ding_message(sessionWebhookExpiredTime=1.5)),
        body_of(ding_message(sessionWebhookExpiredTime={"ms": 1})),
        body_of(ding_message(text="hello")),
        body_of(ding_message(senderStaffId={"id": 1})),
        body_of(ding_message(msgId=["m"])),
        body_of({"outTrackId": {"x": 1}, "userId": "staff-1"}),
    ],
    ids=[
        "deep",
        "expiry-str",
        "expiry-float",
        "expiry-obj",
        "text-str",
        "user-obj",
        "msgid-list",
        "card-id-obj",
    ],
)
def test_dingtalk_malformed_event_is_400(ding, body):
    assert_refused(ding_post(ding, body))


# --- Feishu ------------------------------------------------------------------------------

FEISHU_KEY = "kT9mN2pQ7rS4vW1x"


def feishu_message(text: str = "hello", **changes) -> dict:
    data = {
        "schema": "2.0",
        "header": {
            "event_id": "ev-1",
            "event_type": "im.message.receive_v1",
            "tenant_key": "tk-1",
        },
        "event": {
            "sender": {"sender_id": {"open_id": "ou_1"}, "sender_type": "user"},
            "message": {
                "message_id": "om_1",
                "chat_id": "oc_1",
                "chat_type": "p2p",
                "message_type": "text",
                "content": json.dumps({"text": text}),
            },
        },
    }
    data.update(changes)
    return data


def feishu_with(path: str, value) -> dict:
    data = feishu_message()
    target = data
    *parents, last = path.split(".")
    for name in parents:
        target = target[name]
    target[last] = value
    return data


def feishu_post(connector, body: bytes):
    ts, nonce = str(int(time.time())), "n0nce"
    signature = hashlib.sha256((ts + nonce + FEISHU_KEY).encode() + body).hexdigest()
    return Client().post(
        connector.callback_path,
        data=body,
        content_type="application/json",
        HTTP_X_LARK_REQUEST_TIMESTAMP=ts,
        HTTP_X_LARK_REQUEST_NONCE=nonce,
        HTTP_X_LARK_SIGNATURE=signature,
    )


@pytest.fixture
def feishu(alice):
    return make_connector(
        alice, "feishu", {"app_id": "cli_x", "app_secret": "s", "encrypt_key": FEISHU_KEY}
    )


@pytest.mark.parametrize(
    "body",
    [
        body_of(feishu_with("header.event_id", f"ev{NUL}1")),
        body_of(feishu_message(text=f"hel{NUL}lo")),
        body_of(feishu_with("event.sender.sender_id", {"open_id": f"ou{NUL}1"})),
        body_of(feishu_message(text=f"bad {LONE} half")),
    ],
    ids=["nul-id", "nul-text", "nul-user", "lone-surrogate"],
)
def test_feishu_unstorable_characters_are_cleaned(feishu, body):
    assert feishu_post(feishu, body).status_code == 200
    assert InboundEvent.objects.count() == 1
    assert_stored_clean()


@pytest.mark.parametrize(
    "body",
    [
        deep_body(feishu_message()),
        body_of(feishu_message(event="im.message.receive_v1")),
        body_of(feishu_message(header="ev-1")),
        body_of(feishu_with("event.sender", "ou_1")),
        body_of(feishu_with("event.message", ["om_1"])),
        body_of(feishu_with("event.sender.sender_id", "ou_1")),
        body_of(feishu_with("event.message.content", {"text": "hi"})),
        body_of(feishu_with("header.event_id", {"id": 1})),
    ],
    ids=[
        "deep",
        "event-str",
        "header-str",
        "sender-str",
        "message-list",
        "sender-id-str",
        "content-obj",
        "event-id-obj",
    ],
)
def test_feishu_malformed_event_is_400(feishu, body):
    assert_refused(feishu_post(feishu, body))


# --- WeCom -------------------------------------------------------------------------------

WECOM_TOKEN = "QDG6eK"
WECOM_AES_KEY = "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C"
WECOM_CORP = "wx5823bf96d3bd56c7"


def wecom_post(connector, plaintext: bytes):
    encrypted = wecom_crypto.encrypt(WECOM_AES_KEY, plaintext, WECOM_CORP)
    ts, nonce = str(int(time.time())), "n1"
    query = urlencode(
        {
            "msg_signature": wecom_crypto.signature(WECOM_TOKEN, ts, nonce, encrypted),
            "timestamp": ts,
            "nonce": nonce,
        }
    )
    body = f"<xml><Encrypt><![CDATA[{encrypted}]]></Encrypt></xml>"
    return Client().post(f"{connector.callback_path}?{query}", data=body, content_type="text/xml")


def wecom_message(msg_id: str = "1001", content: str = "hello", user: str = "zhangsan") -> bytes:
    return (
        f"<xml><ToUserName>{WECOM_CORP}</ToUserName><FromUserName>{user}</FromUserName>"
        "<CreateTime>1700000000</CreateTime><MsgType>text</MsgType>"
        f"<Content>{content}</Content><MsgId>{msg_id}</MsgId><AgentID>218</AgentID></xml>"
    ).encode()


@pytest.fixture
def wecom(alice):
    return make_connector(
        alice,
        "wecom",
        {
            "corp_id": WECOM_CORP,
            "corp_secret": "s",
            "token": WECOM_TOKEN,
            "encoding_aes_key": WECOM_AES_KEY,
        },
        {"agent_id": 218},
    )


@pytest.mark.parametrize(
    "plaintext",
    [
        wecom_message(content="hel&#0;lo"),  # XML cannot carry NUL, not even as a reference
        wecom_message(msg_id="10\x0001"),
        wecom_message(content="bad X half").replace(b"X", b"\xed\xa0\x80"),  # lone surrogate
        # 20,000 deep: deeper would not fit the body limit once encrypted and base64-encoded.
        b"<xml>" + b"<a>" * 20_000 + b"</a>" * 20_000 + b"</xml>",
        b"<xml><MsgType>text</MsgType><MsgId>1",
    ],
    ids=["nul-reference", "nul-raw", "lone-surrogate-bytes", "deep", "truncated"],
)
def test_wecom_malformed_message_is_400_or_stored_clean(wecom, plaintext):
    response = wecom_post(wecom, plaintext)
    assert response.status_code in (200, 400), response.content
    if response.status_code == 400:
        assert response.json()["error"]["code"] == "invalid"
        assert not InboundEvent.objects.exists()
    assert_stored_clean()


# --- absurd timestamps and non-finite numbers, any platform --------------------------------


@pytest.mark.parametrize("timestamp", ["9" * 400, "-" + "9" * 400, "1" * 5000, "nan", "1e999"])
def test_slack_absurd_timestamp_is_401(slack, timestamp):
    # Checked before the signature: no secret is needed to send one.
    response = Client().post(
        slack.callback_path,
        data=b"{}",
        content_type="application/json",
        HTTP_X_SLACK_REQUEST_TIMESTAMP=timestamp,
        HTTP_X_SLACK_SIGNATURE="v0=00",
    )
    assert response.status_code == 401, response.content
    assert response.json()["error"]["code"] == "signature_invalid"
    assert not InboundEvent.objects.exists()


NON_FINITE = ["NaN", "Infinity", "-Infinity", "1e309"]


def with_number(data: dict, raw: str) -> bytes:
    """`data` as JSON with its "NUMBER" string replaced by the bare token `raw` (Python's json
    reads NaN, Infinity and 1e309 as floats; jsonb has no number for them)."""
    return json.dumps(data).replace('"NUMBER"', raw).encode()


def assert_stored_with_null(path: str):
    (event,) = InboundEvent.objects.all()
    value = event.payload
    *parents, last = path.split(".")
    for name in parents:
        value = value[name]
    assert last in value and value[last] is None


@pytest.mark.parametrize("raw", NON_FINITE)
def test_webhook_non_finite_card_value_is_stored_as_null(hook, raw):
    body = with_number(webhook_message(type="card_action", action={"k": "NUMBER"}), raw)
    assert webhook_post(hook, body).status_code == 200
    assert_stored_with_null("action.k")


@pytest.mark.parametrize("raw", NON_FINITE)
def test_slack_non_finite_card_value_is_stored_as_null(slack, raw):
    action = {"action_id": "approve", "value": '{"k": NUMBER}', "action_ts": "1700000000.1"}
    body = json.dumps(slack_actions(actions=[action])).replace("NUMBER", raw).encode()
    assert slack_post(slack, body).status_code == 200
    assert_stored_with_null("action.k")


@pytest.mark.parametrize("raw", NON_FINITE)
def test_feishu_non_finite_card_value_is_stored_as_null(feishu, raw):
    data = {
        "schema": "2.0",
        "header": {"event_id": "ev-2", "event_type": "card.action.trigger", "tenant_key": "tk-1"},
        "event": {
            "operator": {"open_id": "ou_1"},
            "action": {"value": {"k": "NUMBER"}},
            "context": {"open_chat_id": "oc_1", "open_message_id": "om_1"},
        },
    }
    assert feishu_post(feishu, with_number(data, raw)).status_code == 200
    assert_stored_with_null("action.k")


@pytest.mark.parametrize("raw", NON_FINITE)
def test_dingtalk_non_finite_card_value_is_stored_as_null(ding, raw):
    content = json.dumps({"cardPrivateData": {"params": {"k": "NUMBER"}}})
    data = {"outTrackId": "track-1", "userId": "staff-1", "corpId": "ding-corp"}
    body = json.dumps(data | {"content": content.replace('"NUMBER"', raw)}).encode()
    assert ding_post(ding, body).status_code == 200
    assert_stored_with_null("action.k")


@pytest.mark.parametrize("raw", NON_FINITE)
def test_wecom_non_finite_card_value_is_stored_as_null(wecom, raw):
    plaintext = (
        f"<xml><ToUserName>{WECOM_CORP}</ToUserName><FromUserName>zhangsan</FromUserName>"
        "<CreateTime>1700000000</CreateTime><MsgType>event</MsgType>"
        f'<Event>template_card_event</Event><EventKey>{{"k": {raw}}}</EventKey>'
        "<TaskId>task-1</TaskId><AgentID>218</AgentID></xml>"
    ).encode()
    assert wecom_post(wecom, plaintext).status_code == 200
    assert_stored_with_null("action.k")


def test_non_finite_numbers_anywhere_in_a_stored_event_become_null():
    nan, inf = float("nan"), float("inf")
    event = ParsedEvent(
        event_key="e1", action={"a": [nan, {"b": -inf}], "c": inf, "d": 1.5}, context={"n": nan}
    )
    cleaned = storable_event(event)
    assert cleaned.action == {"a": [None, {"b": None}], "c": None, "d": 1.5}
    assert cleaned.context == {"n": None}
