"""End to end, per platform: a signed inbound message → agent run (offline provider) → reply at
the fake platform API; a high-risk tool call → card sent → signed card click → approved → the
tool executes once → every card copy updated; replays and strangers refused.

Tasks run eagerly on commit (the same code a worker runs): the runtime hands the finished run's
reply to the connectors' delivery channel, and governance tells the connectors of the new
confirmation, whose cards they send (see docs/connectors.md, "Hand-off").
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from urllib.parse import urlencode

import pytest
from django.test import Client

from cadre.agents.models import AgentMessage, Run, Wait
from cadre.agents.runtime.records.delivery import Reply
from connectors import tasks
from connectors.dingtalk.tests.fake_api import APP_KEY, APP_SECRET, FakeDingTalk
from connectors.feishu.tests.fake_api import APP_ID, FakeFeishu
from connectors.feishu.tests.fake_api import APP_SECRET as FEISHU_SECRET
from connectors.inbound import dispatch
from connectors.models import ConnectorNotice, Delivery, InboundEvent, UnmappedIdentity
from connectors.slack.tests.fake_api import BOT_TOKEN, FakeSlack
from connectors.tests.helpers import make_connector, sales_agent, webhook_post
from connectors.wecom import crypto as wecom_crypto
from connectors.wecom.tests.fake_api import CORP_ID, CORP_SECRET, FakeWeCom
from tests.factories import IMIdentityFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def bob_agent(alice, bob):
    return sales_agent(alice, bob)


# --- one driver per platform: sign like the platform, read what reached its API -----------


class WebhookDriver:
    platform = "webhook"
    user_id = "u-bob"

    def __init__(self, server):
        self.server = server
        server.route("POST", "/callback", lambda request: (200, {"ok": True}))

    def connector(self, owner):
        return make_connector(
            owner,
            "webhook",
            {"signing_secret": "whsec-test"},
            {"callback_url": f"{self.server.url}/callback"},
        )

    def post_message(self, connector, text, event_id, user_id=None):
        return webhook_post(
            Client(),
            connector,
            {
                "event_id": event_id,
                "type": "message",
                "text": text,
                "user": {"id": user_id or self.user_id},
                "chat": {"id": "chat-1", "type": "p2p"},
            },
        )

    def _posted(self, kind):
        return [r.json() for r in self.server.calls("/callback") if r.json()["type"] == kind]

    def replies(self):
        return [m["text"] for m in self._posted("text")]

    def approve_value(self):
        return self._posted("card")[-1]["card"]["actions"][0]["value"]

    def click(self, connector, value, user_id, click_id):
        return webhook_post(
            Client(),
            connector,
            {"event_id": click_id, "type": "card_action", "user": {"id": user_id}, "action": value},
        )

    def updates(self):
        return self._posted("card_update")


class FeishuDriver:
    platform = "feishu"
    user_id = "ou_bob"
    token = "vt-e2e"

    def __init__(self, server):
        self.fake = FakeFeishu(server)

    def connector(self, owner):
        return make_connector(
            owner,
            "feishu",
            {"app_id": APP_ID, "app_secret": FEISHU_SECRET, "verification_token": self.token},
            {"api_base_url": self.fake.url},
        )

    def _post(self, connector, data):
        return Client().post(
            connector.callback_path, data=json.dumps(data), content_type="application/json"
        )

    def post_message(self, connector, text, event_id, user_id=None):
        return self._post(
            connector,
            {
                "schema": "2.0",
                "header": {
                    "event_id": event_id,
                    "token": self.token,
                    "event_type": "im.message.receive_v1",
                },
                "event": {
                    "sender": {
                        "sender_id": {"open_id": user_id or self.user_id},
                        "sender_type": "user",
                    },
                    "message": {
                        "message_id": f"om_{event_id}",
                        "chat_id": "oc_p2p",
                        "chat_type": "p2p",
                        "message_type": "text",
                        "content": json.dumps({"text": text}),
                    },
                },
            },
        )

    def _sends(self, msg_type):
        return [r.json() for r in self.fake.sent() if r.json().get("msg_type") == msg_type]

    def replies(self):
        return [json.loads(m["content"])["text"] for m in self._sends("text")]

    def approve_value(self):
        card = json.loads(self._sends("interactive")[-1]["content"])
        actions = next(e for e in card["elements"] if e["tag"] == "action")["actions"]
        return actions[0]["value"]

    def click(self, connector, value, user_id, click_id):
        return self._post(
            connector,
            {
                "schema": "2.0",
                "header": {
                    "event_id": click_id,
                    "token": self.token,
                    "event_type": "card.action.trigger",
                },
                "event": {
                    "operator": {"open_id": user_id},
                    "action": {"tag": "button", "value": value},
                    "context": {"open_message_id": "om_card", "open_chat_id": "oc_p2p"},
                },
            },
        )

    def updates(self):
        return [r for r in self.fake.server.requests if r.method == "PATCH"]


class WeComDriver:
    platform = "wecom"
    user_id = "bob.wang"
    token, aes_key = "QDG6eK", "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C"

    def __init__(self, server):
        self.fake = FakeWeCom(server)
        self.clock = int(time.time())

    def connector(self, owner):
        return make_connector(
            owner,
            "wecom",
            {
                "corp_id": CORP_ID,
                "corp_secret": CORP_SECRET,
                "token": self.token,
                "encoding_aes_key": self.aes_key,
            },
            {"api_base_url": self.fake.url, "agent_id": 1000002},
        )

    def _post(self, connector, xml: str):
        encrypted = wecom_crypto.encrypt(self.aes_key, xml.encode(), CORP_ID)
        ts, nonce = str(int(time.time())), "nonce"
        signature = hashlib.sha1(
            "".join(sorted([self.token, ts, nonce, encrypted])).encode()
        ).hexdigest()
        query = urlencode({"msg_signature": signature, "timestamp": ts, "nonce": nonce})
        return Client().post(
            f"{connector.callback_path}?{query}",
            data=f"<xml><Encrypt><![CDATA[{encrypted}]]></Encrypt></xml>",
            content_type="text/xml",
        )

    def post_message(self, connector, text, event_id, user_id=None):
        return self._post(
            connector,
            (
                f"<xml><ToUserName>{CORP_ID}</ToUserName><FromUserName>{user_id or self.user_id}"
                f"</FromUserName><CreateTime>{int(time.time())}</CreateTime><MsgType>text</MsgType>"
                f"<Content><![CDATA[{text}]]></Content><MsgId>{abs(hash(event_id))}</MsgId>"
                "<AgentID>1000002</AgentID></xml>"
            ),
        )

    def _sends(self, msgtype):
        return [
            r.json()
            for r in self.fake.server.calls("/cgi-bin/message/send")
            if r.json()["msgtype"] == msgtype
        ]

    def replies(self):
        return [m["text"]["content"] for m in self._sends("text")]

    def approve_value(self):
        return self._sends("template_card")[-1]["template_card"]["button_list"][0]["key"]

    def click(self, connector, value, user_id, click_id):
        self.clock += 1
        return self._post(
            connector,
            (
                f"<xml><ToUserName>{CORP_ID}</ToUserName><FromUserName>{user_id}</FromUserName>"
                f"<CreateTime>{self.clock}</CreateTime><MsgType>event</MsgType>"
                "<Event>template_card_event</Event>"
                f"<EventKey><![CDATA[{value}]]></EventKey><TaskId>{click_id}</TaskId>"
                "<CardType>button_interaction</CardType><ResponseCode>rc</ResponseCode>"
                "<AgentID>1000002</AgentID></xml>"
            ),
        )

    def updates(self):
        return self.fake.server.calls("/cgi-bin/message/update_template_card")


class DingTalkDriver:
    platform = "dingtalk"
    user_id = "staff-bob"

    def __init__(self, server):
        self.fake = FakeDingTalk(server)

    def connector(self, owner):
        return make_connector(
            owner,
            "dingtalk",
            {"app_key": APP_KEY, "app_secret": APP_SECRET},
            {"api_base_url": self.fake.url, "card_template_id": "tpl"},
        )

    def _post(self, connector, data):
        ts = str(int(time.time() * 1000))
        mac = hmac.new(APP_SECRET.encode(), f"{ts}\n{APP_SECRET}".encode(), hashlib.sha256)
        return Client().post(
            connector.callback_path,
            data=json.dumps(data),
            content_type="application/json",
            HTTP_TIMESTAMP=ts,
            HTTP_SIGN=base64.b64encode(mac.digest()).decode(),
        )

    def post_message(self, connector, text, event_id, user_id=None):
        now = int(time.time() * 1000)
        return self._post(
            connector,
            {
                "msgId": event_id,
                "msgtype": "text",
                "text": {"content": text},
                "conversationType": "1",
                "conversationId": "cid-bob",
                "senderStaffId": user_id or self.user_id,
                "senderNick": "Bob",
                "sessionWebhook": f"{self.fake.url}/robot/sendBySession",
                "sessionWebhookExpiredTime": now + 3600_000,
                "robotCode": APP_KEY,
            },
        )

    def replies(self):
        # The callback's sessionWebhook is not DingTalk's host (it is this loopback fake), so
        # Cadre ignores it and answers through the robot API.
        assert self.fake.server.calls("/robot/sendBySession") == []
        return [
            json.loads(r.json()["msgParam"])["content"]
            for r in self.fake.server.calls("/v1.0/robot/oToMessages/batchSend")
            if r.json()["msgKey"] == "sampleText"
        ]

    def approve_value(self):
        sent = self.fake.server.calls("/v1.0/card/instances/createAndDeliver")[-1].json()
        self.out_track_id = sent["outTrackId"]
        return json.loads(sent["cardData"]["cardParamMap"]["approve_params"])

    def click(self, connector, value, user_id, click_id):
        return self._post(
            connector,
            {
                "outTrackId": self.out_track_id,
                "userId": user_id,
                "corpId": "corp",
                "content": json.dumps(
                    {
                        "cardPrivateData": {
                            "actionIds": [click_id],
                            "params": {**value, "click": click_id},
                        }
                    }
                ),
            },
        )

    def updates(self):
        return [r for r in self.fake.server.calls("/v1.0/card/instances") if r.method == "PUT"]


class SlackDriver:
    platform = "slack"
    user_id = "U0BOB"
    secret = "slack-signing-secret"

    def __init__(self, server):
        self.fake = FakeSlack(server)

    def connector(self, owner):
        return make_connector(
            owner,
            "slack",
            {"bot_token": BOT_TOKEN, "signing_secret": self.secret},
            {"api_base_url": self.fake.url},
        )

    def _post(self, connector, body: bytes, content_type):
        ts = str(int(time.time()))
        mac = hmac.new(self.secret.encode(), f"v0:{ts}:".encode() + body, hashlib.sha256)
        return Client().post(
            connector.callback_path,
            data=body,
            content_type=content_type,
            HTTP_X_SLACK_REQUEST_TIMESTAMP=ts,
            HTTP_X_SLACK_SIGNATURE=f"v0={mac.hexdigest()}",
        )

    def post_message(self, connector, text, event_id, user_id=None):
        body = json.dumps(
            {
                "type": "event_callback",
                "team_id": "T1",
                "event_id": event_id,
                "event": {
                    "type": "message",
                    "user": user_id or self.user_id,
                    "text": text,
                    "channel": "D0BOB",
                    "channel_type": "im",
                    "ts": f"1700000000.{sum(map(ord, event_id)):06d}",
                },
            }
        )
        return self._post(connector, body.encode(), "application/json")

    def _posts(self):
        return [r.json() for r in self.fake.server.calls("/api/chat.postMessage")]

    def replies(self):
        return [p["text"] for p in self._posts() if "blocks" not in p]

    def approve_value(self):
        blocks = [p for p in self._posts() if "blocks" in p][-1]["blocks"]
        actions = next(b for b in blocks if b["type"] == "actions")
        return actions["elements"][0]["value"]

    def click(self, connector, value, user_id, click_id):
        payload = {
            "type": "block_actions",
            "user": {"id": user_id},
            "team": {"id": "T1"},
            "container": {"message_ts": "1700.1", "channel_id": "D0BOB"},
            "response_url": f"{self.fake.server.url}/actions/response",
            "actions": [{"action_id": "cadre_approve", "value": value, "action_ts": click_id}],
        }
        body = urlencode({"payload": json.dumps(payload)}).encode()
        return self._post(connector, body, "application/x-www-form-urlencoded")

    def updates(self):
        return self.fake.server.calls("/api/chat.update")


DRIVERS = [WebhookDriver, FeishuDriver, WeComDriver, DingTalkDriver, SlackDriver]


@pytest.fixture(params=DRIVERS, ids=lambda d: d.platform)
def driver(request, fake_api):
    return request.param(fake_api)


@pytest.fixture
def connector(driver, alice, bob):
    connector = driver.connector(alice)
    IMIdentityFactory(member=bob, platform=driver.platform, platform_user_id=driver.user_id)
    return connector


def deliver(driver, connector, text, event_id, capture, user_id=None):
    with capture(execute=True):
        response = driver.post_message(connector, text, event_id, user_id=user_id)
    assert response.status_code == 200, response.content
    return InboundEvent.objects.filter(connector=connector, kind="message").latest("id")


def test_message_runs_the_agent_and_the_reply_reaches_the_platform(
    driver, connector, bob_agent, celery_eager, django_capture_on_commit_callbacks
):
    event = deliver(
        driver, connector, "hello there", "evt-hello", django_capture_on_commit_callbacks
    )
    assert event.status == "processed" and event.member_id == bob_agent.member_id
    run = Run.objects.get(pk=int(event.run_ref))
    assert run.status == Run.Status.COMPLETED
    assert run.session.channel == driver.platform
    replies = driver.replies()  # handed over by the runtime when the run finished
    assert len(replies) == 1 and replies[0].startswith("Offline model: ")
    reply = Reply(
        run_id=run.pk,
        session_id=run.session_id,
        channel=run.session.channel,
        conversation=run.session.external_id,
        status=run.status,
        text=run.output["text"],
    )
    with django_capture_on_commit_callbacks(execute=True):
        tasks.deliver_run_reply.delay(reply.to_dict())  # a redelivered hand-off
    assert driver.replies() == replies  # sends nothing more


def test_redelivered_message_starts_one_run(
    driver, connector, bob_agent, celery_eager, django_capture_on_commit_callbacks
):
    deliver(driver, connector, "hello", "evt-dup", django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        driver.post_message(connector, "hello", "evt-dup")
    assert Run.objects.count() == 1


def test_unmapped_user_gets_a_polite_reply_and_admins_a_notice(
    driver, connector, bob_agent, celery_eager, django_capture_on_commit_callbacks
):
    stranger = {
        "webhook": "u-x",
        "feishu": "ou_x",
        "wecom": "stranger",
        "dingtalk": "staff-x",
        "slack": "U0X",
    }[driver.platform]
    with django_capture_on_commit_callbacks(execute=True):
        assert (
            driver.post_message(connector, "hi", "evt-stranger", user_id=stranger).status_code
            == 200
        )
    assert InboundEvent.objects.get(kind="message").status == "unmapped"
    assert UnmappedIdentity.objects.get().platform_user_id == stranger
    assert ConnectorNotice.objects.filter(kind="unmapped_user").count() == 1
    assert driver.replies() == [dispatch.identities.UNMAPPED_REPLY]
    assert not Run.objects.exists()


def test_high_risk_tool_call_is_confirmed_on_a_card_and_runs_once(
    driver, connector, bob, alice, bob_agent, celery_eager, django_capture_on_commit_callbacks
):
    event = deliver(
        driver,
        connector,
        "send hello to group:all-staff",
        "evt-risky",
        django_capture_on_commit_callbacks,
    )
    run = Run.objects.get(pk=int(event.run_ref))
    assert run.status == Run.Status.WAITING
    wait = Wait.objects.get(run=run, kind="confirmation")
    # Governance created the confirmation: its card went to the decider, once.
    assert Delivery.objects.filter(kind="card").count() == 1
    value = driver.approve_value()

    # Someone else pressing bob's button is refused, visibly, and changes nothing.
    IMIdentityFactory(
        member=alice, platform=driver.platform, platform_user_id=f"{driver.user_id}-alice"
    )
    with django_capture_on_commit_callbacks(execute=True):
        assert (
            driver.click(connector, value, f"{driver.user_id}-alice", "click-0").status_code == 200
        )
    wait.refresh_from_db()
    assert wait.status == "pending"

    with django_capture_on_commit_callbacks(execute=True):
        response = driver.click(connector, value, driver.user_id, "click-1")
    assert response.status_code == 200
    if driver.platform == "feishu":
        assert response.json()["toast"]["type"] == "success"
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED
    assert AgentMessage.objects.filter(run=run).count() == 1  # the tool ran once
    assert len(driver.updates()) == 1  # the card now shows who decided

    # A replayed click (same token, new delivery) is refused and runs nothing again.
    with django_capture_on_commit_callbacks(execute=True):
        assert driver.click(connector, value, driver.user_id, "click-2").status_code == 200
    assert AgentMessage.objects.filter(run=run).count() == 1
    refused = InboundEvent.objects.filter(kind="card_action", status="ignored")
    assert refused.count() == 2
    assert {e.error.split(" ")[0] for e in refused} <= {"Only", "This"}
