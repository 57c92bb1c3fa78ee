"""A captured DingTalk sign cannot start a run as anyone or choose where replies go.

The attack (issue 14): a `timestamp`/`sign` pair captured from one genuine callback is replayed
inside its window with a new body — a new msgId, another mapped employee's senderStaffId and a
sessionWebhook pointing at a loopback server. It must be refused (401, counted as a signature
rejection) with nothing stored, started or sent; the genuine message still runs end to end.
"""

from __future__ import annotations

import json
import time

import httpx
import pytest
from django.test import Client

from cadre.agents.models import Run
from connectors.base.transport import Recipient
from connectors.dingtalk.inbound import parse_callback, sign
from connectors.dingtalk.session_webhook import session_webhook_allowed
from connectors.dingtalk.tests.fake_api import APP_KEY, APP_SECRET, FakeDingTalk
from connectors.dingtalk.transport import DingTalkTransport
from connectors.models import Connector, InboundEvent
from connectors.tests.fakes import FakePlatformServer
from connectors.tests.helpers import make_connector
from connectors.tests.test_end_to_end import bob_agent  # noqa: F401 - the published agent
from tests.factories import IMIdentityFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def ding(fake_api):
    return FakeDingTalk(fake_api)


@pytest.fixture
def attacker():
    """The attacker's loopback receiver: records every request that reaches it."""
    server = FakePlatformServer().start()
    server.route("POST", "/x", lambda request: (200, {"errcode": 0}))
    yield server
    server.stop()


@pytest.fixture
def connector(alice, bob, make_member, ding):
    connector = make_connector(
        alice,
        "dingtalk",
        {"app_key": APP_KEY, "app_secret": APP_SECRET},
        {"api_base_url": ding.url, "card_template_id": "tpl"},
    )
    IMIdentityFactory(member=bob, platform="dingtalk", platform_user_id="staff-bob")
    colleague = make_member(display_name="Dana")  # the employee the attacker poses as
    IMIdentityFactory(member=colleague, platform="dingtalk", platform_user_id="staff-other")
    return connector


def message(msg_id: str, staff_id: str, text: str, webhook: str) -> dict:
    return {
        "msgId": msg_id,
        "msgtype": "text",
        "text": {"content": text},
        "conversationType": "1",
        "conversationId": "cid-bob",
        "senderStaffId": staff_id,
        "senderNick": "Bob",
        "sessionWebhook": webhook,
        "sessionWebhookExpiredTime": int(time.time() * 1000) + 3600_000,
        "robotCode": APP_KEY,
    }


def post(connector, data: dict, timestamp: str, signature: str):
    return Client().post(
        connector.callback_path,
        data=json.dumps(data),
        content_type="application/json",
        HTTP_TIMESTAMP=timestamp,
        HTTP_SIGN=signature,
    )


@pytest.mark.usefixtures("bob_agent")
def test_replayed_sign_with_a_new_body_is_refused_and_nothing_is_sent(
    connector, ding, attacker, celery_eager, django_capture_on_commit_callbacks
):
    timestamp = str(int(time.time() * 1000))
    captured = sign(APP_SECRET, timestamp)
    genuine = message("msg-genuine", "staff-bob", "my secret deal is 42", f"{ding.url}/x")
    with django_capture_on_commit_callbacks(execute=True):
        assert post(connector, genuine, timestamp, captured).status_code == 200
    runs = Run.objects.count()
    sends = len(ding.server.requests)
    assert runs == 1

    forged = message("msg-forged", "staff-other", "repeat my last message", f"{attacker.url}/x")
    with django_capture_on_commit_callbacks(execute=True):
        response = post(connector, forged, timestamp, captured)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "signature_invalid"
    assert attacker.requests == []  # no reply, no quote of the genuine message
    assert Run.objects.count() == runs
    assert list(InboundEvent.objects.values_list("event_key", flat=True)) == ["msg-genuine"]
    assert len(ding.server.requests) == sends
    assert Connector.objects.get(pk=connector.pk).signature_rejections == 1


def test_redelivery_of_the_same_body_under_its_sign_is_a_duplicate(connector):
    timestamp = str(int(time.time() * 1000))
    signature = sign(APP_SECRET, timestamp)
    data = message("msg-1", "staff-bob", "hi", "https://oapi.dingtalk.com/robot/sendBySession")
    assert post(connector, data, timestamp, signature).status_code == 200
    assert post(connector, data, timestamp, signature).status_code == 200
    assert InboundEvent.objects.count() == 1
    assert Connector.objects.get(pk=connector.pk).signature_rejections == 0


def test_a_sign_is_used_once_per_connector(connector, alice):
    other = make_connector(
        alice, "dingtalk", {"app_key": APP_KEY, "app_secret": APP_SECRET}, name="second"
    )
    timestamp = str(int(time.time() * 1000))
    signature = sign(APP_SECRET, timestamp)
    assert (
        post(connector, message("a", "staff-bob", "x", ""), timestamp, signature).status_code == 200
    )
    assert post(other, message("b", "staff-bob", "y", ""), timestamp, signature).status_code == 200


@pytest.mark.usefixtures("bob_agent")
def test_genuine_message_with_a_foreign_session_webhook_is_answered_through_the_api(
    connector, ding, attacker, celery_eager, django_capture_on_commit_callbacks
):
    timestamp = str(int(time.time() * 1000))
    data = message("msg-ok", "staff-bob", "hello", f"{attacker.url}/x")
    with django_capture_on_commit_callbacks(execute=True):
        assert post(connector, data, timestamp, sign(APP_SECRET, timestamp)).status_code == 200
    event = InboundEvent.objects.get()
    assert event.status == "processed"
    assert "session_webhook" not in event.payload.get("context", {})
    assert attacker.requests == []
    [sent] = ding.server.calls("/v1.0/robot/oToMessages/batchSend")
    assert sent.json()["userIds"] == ["staff-bob"]
    assert json.loads(sent.json()["msgParam"])["content"].startswith("Offline model: ")


@pytest.mark.parametrize(
    "url, allowed",
    [
        ("https://oapi.dingtalk.com/robot/sendBySession?session=abc", True),
        ("http://oapi.dingtalk.com/robot/sendBySession?session=abc", False),
        ("https://oapi.dingtalk.com.evil.example/robot", False),
        ("https://evil.example@oapi.dingtalk.com/robot", False),
        ("https://oapi.dingtalk.com@evil.example/robot", False),
        ("https://127.0.0.1:18999/x", False),
        ("https://oapi.dingtalk.com:bad/x", False),
        ("", False),
        (["https://oapi.dingtalk.com/"], False),
    ],
)
def test_session_webhook_allow_list(url, allowed):
    assert session_webhook_allowed(url) is allowed


def test_private_deployment_hosts_are_configurable(settings):
    settings.CADRE_DINGTALK_SESSION_WEBHOOK_HOSTS = [".dingtalk.corp.example"]
    assert session_webhook_allowed("https://im.dingtalk.corp.example/robot/sendBySession")
    assert not session_webhook_allowed("https://oapi.dingtalk.com/robot/sendBySession")


def test_parse_keeps_only_an_allowed_session_webhook():
    allowed = parse_callback(
        message("m", "s", "t", "https://oapi.dingtalk.com/robot/sendBySession?session=1")
    )
    assert allowed.context["session_webhook"].startswith("https://oapi.dingtalk.com/")
    refused = parse_callback(message("m", "s", "t", "http://127.0.0.1:18999/x"))
    assert "session_webhook" not in refused.context


def test_transport_replies_to_an_allowed_session_webhook_only(connector, ding, sleeps):
    seen: list[httpx.Request] = []

    def dingtalk(request: httpx.Request) -> httpx.Response:  # DingTalk's session endpoint
        seen.append(request)
        return httpx.Response(200, json={"errcode": 0, "errmsg": "ok"})

    expires = int(time.time() * 1000) + 600_000
    client = httpx.Client(transport=httpx.MockTransport(dingtalk))
    transport = DingTalkTransport(connector, client=client, sleep=sleeps.append)
    url = "https://oapi.dingtalk.com/robot/sendBySession?session=abc"
    transport.send_text(
        Recipient.user("staff-bob"),
        "via session",
        context={"session_webhook": url, "session_webhook_expires": expires},
    )
    assert [str(request.url) for request in seen] == [url]
    assert json.loads(seen[0].content) == {"msgtype": "text", "text": {"content": "via session"}}

    # A stored context naming any other destination is not trusted: the robot API answers.
    DingTalkTransport(connector, sleep=sleeps.append).send_text(
        Recipient.user("staff-bob"),
        "via api",
        context={
            "session_webhook": f"{ding.url}/robot/sendBySession",
            "session_webhook_expires": expires,
        },
    )
    assert ding.server.calls("/robot/sendBySession") == []
    assert len(ding.server.calls("/v1.0/robot/oToMessages/batchSend")) == 1
