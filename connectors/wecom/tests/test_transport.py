"""WeCom outbound against a loopback fake API: token refresh, rate limits, sends, card update."""

from __future__ import annotations

import pytest

from connectors.base.transport import Recipient
from connectors.tests.helpers import make_connector
from connectors.wecom.tests.fake_api import CORP_ID, CORP_SECRET, FakeWeCom
from connectors.wecom.transport import WeComTransport

pytestmark = pytest.mark.django_db

CREDS = {
    "corp_id": CORP_ID,
    "corp_secret": CORP_SECRET,
    "token": "t",
    "encoding_aes_key": "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C",
}


@pytest.fixture
def wecom(fake_api):
    return FakeWeCom(fake_api)


@pytest.fixture
def connector(alice, wecom):
    return make_connector(alice, "wecom", CREDS, {"api_base_url": wecom.url, "agent_id": 1000002})


def test_send_to_user_and_group_with_one_cached_token(connector, wecom, sleeps):
    transport = WeComTransport(connector, sleep=sleeps.append)
    user = transport.send_text(Recipient.user("zhangsan"), "hi")
    transport.send_markdown(Recipient.chat("chat1"), "**md**")
    assert user.message_id.startswith("msg") and user.extra["response_code"]
    assert len(wecom.server.calls("/cgi-bin/gettoken")) == 1
    send = wecom.server.calls("/cgi-bin/message/send")[0]
    assert send.json() == {
        "touser": "zhangsan",
        "msgtype": "text",
        "agentid": 1000002,
        "text": {"content": "hi"},
    }
    assert wecom.server.calls("/cgi-bin/appchat/send")[0].json()["chatid"] == "chat1"


def test_expired_token_errcode_refreshes_once(connector, wecom, sleeps):
    WeComTransport(connector, sleep=sleeps.append).send_text(Recipient.user("u"), "1")
    wecom.valid_tokens.clear()
    WeComTransport(connector, sleep=sleeps.append).send_text(Recipient.user("u"), "2")
    assert len(wecom.server.calls("/cgi-bin/gettoken")) == 2


def test_frequency_limit_errcode_is_retried_with_backoff(connector, wecom, sleeps):
    wecom.server.fail_next(
        "/cgi-bin/message/send",
        200,
        body={"errcode": 45009, "errmsg": "api freq out of limit"},
        times=2,
    )
    assert WeComTransport(connector, sleep=sleeps.append).send_text(Recipient.user("u"), "x")
    assert len(sleeps) == 2


def test_update_template_card_uses_the_response_code(connector, wecom, sleeps):
    transport = WeComTransport(connector, sleep=sleeps.append)
    sent = transport.send_card(Recipient.user("zhangsan"), {"card_type": "button_interaction"})
    transport.update_card(sent.message_id, {"replace_name": "Approved by Alice"}, extra=sent.extra)
    update = wecom.server.calls("/cgi-bin/message/update_template_card")[0].json()
    assert update == {
        "userids": ["zhangsan"],
        "agentid": 1000002,
        "response_code": sent.extra["response_code"],
        "button": {"replace_name": "Approved by Alice"},
    }
