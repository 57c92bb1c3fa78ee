"""Feishu outbound against a loopback fake Open API: token caching/refresh, retries, sends."""

from __future__ import annotations

import json

import pytest

from connectors.base import platform_for
from connectors.base.transport import RateLimited, Recipient, TransportError
from connectors.feishu.tests.fake_api import APP_ID, APP_SECRET, FakeFeishu
from connectors.feishu.transport import FeishuTransport
from connectors.tests.helpers import make_connector

pytestmark = pytest.mark.django_db

TOKEN_PATH = "/open-apis/auth/v3/tenant_access_token/internal"
SEND_PATH = "/open-apis/im/v1/messages"


@pytest.fixture
def feishu(fake_api):
    return FakeFeishu(fake_api)


@pytest.fixture
def connector(alice, feishu):
    return make_connector(
        alice, "feishu", {"app_id": APP_ID, "app_secret": APP_SECRET}, {"api_base_url": feishu.url}
    )


def transport(connector, sleeps) -> FeishuTransport:
    return FeishuTransport(connector, sleep=sleeps.append)


def test_send_text_fetches_a_token_once_and_reuses_it(connector, feishu, sleeps):
    first = transport(connector, sleeps).send_text(Recipient.user("ou_1"), "hello")
    second = transport(connector, sleeps).send_text(Recipient.chat("oc_1"), "again")
    assert first.message_id.startswith("om_") and second.message_id != first.message_id
    assert len(feishu.server.calls(TOKEN_PATH)) == 1
    sends = feishu.server.calls(SEND_PATH)
    assert [s.query["receive_id_type"] for s in sends] == ["open_id", "chat_id"]
    assert json.loads(sends[0].json()["content"]) == {"text": "hello"}
    assert sends[0].headers["authorization"].startswith("Bearer t-")


def test_invalid_token_is_refreshed_once_and_the_send_repeated(connector, feishu, sleeps):
    transport(connector, sleeps).send_text(Recipient.user("ou_1"), "warm")
    feishu.valid_tokens.clear()  # the platform revoked it
    result = transport(connector, sleeps).send_text(Recipient.user("ou_1"), "after refresh")
    assert result.message_id
    assert len(feishu.server.calls(TOKEN_PATH)) == 2


def test_429_honours_retry_after(connector, feishu, sleeps):
    feishu.server.fail_next(SEND_PATH, 429, headers={"Retry-After": "2"})
    result = transport(connector, sleeps).send_text(Recipient.user("ou_1"), "x")
    assert result.message_id
    assert sleeps == [2.0]


def test_5xx_retries_with_growing_backoff_then_gives_up(connector, feishu, sleeps):
    feishu.server.fail_next(SEND_PATH, 503, times=10)
    with pytest.raises(TransportError) as error:
        transport(connector, sleeps).send_text(Recipient.user("ou_1"), "x")
    assert error.value.retryable
    assert len(feishu.server.calls(SEND_PATH)) == 4  # max_attempts
    assert len(sleeps) == 3 and sleeps[0] < sleeps[2]


def test_rate_limit_code_in_body_is_retried(connector, feishu, sleeps):
    feishu.server.fail_next(SEND_PATH, 400, body={"code": 99991400, "msg": "too many"})
    assert transport(connector, sleeps).send_text(Recipient.user("ou_1"), "x").message_id
    assert len(sleeps) == 1


def test_very_long_retry_after_is_left_to_the_task_queue(connector, feishu, sleeps):
    feishu.server.fail_next(SEND_PATH, 429, headers={"Retry-After": "600"})
    with pytest.raises(RateLimited) as error:
        transport(connector, sleeps).send_text(Recipient.user("ou_1"), "x")
    assert error.value.retry_after == 600 and sleeps == []


def test_wrong_app_secret_is_a_clear_non_retryable_error(alice, feishu, sleeps):
    bad = make_connector(
        alice,
        "feishu",
        {"app_id": APP_ID, "app_secret": "wrong"},
        {"api_base_url": feishu.url},
        name="bad",
    )
    with pytest.raises(TransportError) as error:
        transport(bad, sleeps).send_text(Recipient.user("ou_1"), "x")
    assert "10014" in str(error.value) and not error.value.retryable


def test_reply_in_thread_markdown_card_and_update(connector, feishu, sleeps):
    t = transport(connector, sleeps)
    reply = t.reply_in_thread("om_root", "threaded")
    md = t.send_markdown(Recipient.user("ou_1"), "**bold**", title="T")
    t.update_card(md.message_id, {"elements": []})
    reply_call = feishu.server.calls("/open-apis/im/v1/messages/om_root/reply")[0]
    assert reply_call.json()["reply_in_thread"] is True and reply.message_id
    md_call = [c for c in feishu.server.calls(SEND_PATH)][-1].json()
    assert md_call["msg_type"] == "interactive"
    assert json.loads(md_call["content"])["elements"][0] == {
        "tag": "markdown",
        "content": "**bold**",
    }
    patch = feishu.server.calls(f"/open-apis/im/v1/messages/{md.message_id}")[0]
    assert patch.method == "PATCH"


def test_platform_transport_uses_stored_credentials(connector, feishu):
    assert platform_for(connector).transport().send_text(Recipient.user("ou"), "x").message_id
