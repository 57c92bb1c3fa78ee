"""Slack outbound against a loopback fake Web API: posts, threads, updates, 429 Retry-After."""

from __future__ import annotations

import pytest

from connectors.base.transport import Recipient, TransportError
from connectors.slack.tests.fake_api import BOT_TOKEN, FakeSlack
from connectors.slack.transport import SlackTransport
from connectors.tests.helpers import make_connector

pytestmark = pytest.mark.django_db


@pytest.fixture
def slack(fake_api):
    return FakeSlack(fake_api)


@pytest.fixture
def connector(alice, slack):
    return make_connector(
        alice, "slack", {"bot_token": BOT_TOKEN, "signing_secret": "s"}, {"api_base_url": slack.url}
    )


def test_post_thread_and_update(connector, slack, sleeps):
    transport = SlackTransport(connector, sleep=sleeps.append)
    sent = transport.send_card(Recipient.user("U1"), {"text": "t", "blocks": []})
    assert sent.extra["channel"] == "D1"
    transport.update_card(sent.message_id, {"text": "done", "blocks": []}, extra=sent.extra)
    transport.reply_in_thread("1700.5", "in thread", context={"channel": "C9"})
    update = slack.server.calls("/api/chat.update")[0].json()
    assert (update["channel"], update["ts"]) == ("D1", sent.message_id)
    thread = slack.server.calls("/api/chat.postMessage")[-1].json()
    assert thread == {"channel": "C9", "thread_ts": "1700.5", "text": "in thread"}


def test_429_retry_after_is_honoured(connector, slack, sleeps):
    slack.server.fail_next("/api/chat.postMessage", 429, headers={"Retry-After": "3"})
    SlackTransport(connector, sleep=sleeps.append).send_text(Recipient.chat("C1"), "x")
    assert sleeps == [3.0]
    assert len(slack.server.calls("/api/chat.postMessage")) == 2


def test_invalid_auth_is_not_retried(alice, slack, sleeps):
    bad = make_connector(
        alice,
        "slack",
        {"bot_token": "xoxb-wrong", "signing_secret": "s"},
        {"api_base_url": slack.url},
        name="bad",
    )
    with pytest.raises(TransportError, match="invalid_auth"):
        SlackTransport(bad, sleep=sleeps.append).send_text(Recipient.chat("C1"), "x")
    assert sleeps == []


def test_lookup_user_reads_the_profile(connector, slack, sleeps):
    slack.directory["U7"] = {"email": "bob@acme.test", "real_name": "Bob", "phone": ""}
    profile = SlackTransport(connector, sleep=sleeps.append).lookup_user("U7")
    assert profile["email"] == "bob@acme.test"
