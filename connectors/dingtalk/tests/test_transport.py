"""DingTalk outbound against a loopback fake API: token, robot sends, session webhook, cards."""

from __future__ import annotations

import json

import pytest

from connectors.base.transport import Recipient
from connectors.dingtalk.tests.fake_api import APP_KEY, APP_SECRET, FakeDingTalk
from connectors.dingtalk.transport import DingTalkTransport
from connectors.tests.helpers import make_connector

pytestmark = pytest.mark.django_db


@pytest.fixture
def ding(fake_api):
    return FakeDingTalk(fake_api)


@pytest.fixture
def connector(alice, ding):
    return make_connector(
        alice,
        "dingtalk",
        {"app_key": APP_KEY, "app_secret": APP_SECRET},
        {"api_base_url": ding.url, "card_template_id": "tpl-1"},
    )


def test_one_to_one_and_group_sends_share_one_token(connector, ding, sleeps):
    transport = DingTalkTransport(connector, sleep=sleeps.append)
    transport.send_text(Recipient.user("staff-1"), "hi")
    transport.send_markdown(Recipient.chat("cid-1"), "# md", title="T")
    assert len(ding.server.calls("/v1.0/oauth2/accessToken")) == 1
    one = ding.server.calls("/v1.0/robot/oToMessages/batchSend")[0].json()
    assert one["userIds"] == ["staff-1"] and json.loads(one["msgParam"]) == {"content": "hi"}
    group = ding.server.calls("/v1.0/robot/groupMessages/send")[0].json()
    assert group["openConversationId"] == "cid-1" and group["msgKey"] == "sampleMarkdown"


def test_401_token_is_refreshed(connector, ding, sleeps):
    DingTalkTransport(connector, sleep=sleeps.append).send_text(Recipient.user("u"), "1")
    ding.valid_tokens.clear()
    DingTalkTransport(connector, sleep=sleeps.append).send_text(Recipient.user("u"), "2")
    assert len(ding.server.calls("/v1.0/oauth2/accessToken")) == 2


def test_throttling_is_retried(connector, ding, sleeps):
    ding.server.fail_next("/v1.0/robot/oToMessages/batchSend", 429, headers={"Retry-After": "1"})
    DingTalkTransport(connector, sleep=sleeps.append).send_text(Recipient.user("u"), "x")
    assert sleeps == [1.0]


def test_card_create_and_update(connector, ding, sleeps):
    transport = DingTalkTransport(connector, sleep=sleeps.append)
    card = {"outTrackId": "cadre-1", "cardData": {"cardParamMap": {"title": "t"}}}
    sent = transport.send_card(Recipient.user("staff-1"), card)
    transport.update_card(sent.message_id, {"cardData": {"cardParamMap": {"status": "approve"}}})
    create = ding.server.calls("/v1.0/card/instances/createAndDeliver")[0].json()
    assert create["openSpaceId"] == "dtv1.card//IM_ROBOT.staff-1"
    assert create["cardTemplateId"] == "tpl-1"
    update = ding.server.calls("/v1.0/card/instances")[0]
    assert update.method == "PUT" and update.json()["outTrackId"] == "cadre-1"
