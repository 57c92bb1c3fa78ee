"""Incremental directory events in every connection mode, each delivered by the platform's own
code or against the platform's published vectors, through to the member:

- DingTalk over HTTP: an encrypted event subscription, checked against DingTalk's published
  test vector and encrypted here with wechatpy's implementation of the same scheme (not Cadre's);
- DingTalk in stream mode: EVENT frames routed by the dingtalk-stream SDK's own client;
- Feishu long connection: the real `lark_oapi.ws.Client` receiving contact events over a
  loopback websocket;
- WeCom: change_contact callbacks encrypted with wechatpy's `WeChatCrypto`, posted to Cadre's
  webhook endpoint.

Each creates a member, changes it and deactivates it (the rows and the audit events asserted);
refusals (bad signature, replayed timestamp, another company's ciphertext) store nothing.
"""

from __future__ import annotations

import json
import time
import xml.etree.ElementTree as ET
from urllib.parse import urlencode

import pytest
from asgiref.sync import async_to_sync
from django.test import Client

from cadre.governance.models import AuditEvent
from cadre.tenancy.models import Member
from connectors.base import callback_crypto
from connectors.inbound import drain
from connectors.models import DirectorySync, DirectoryUserLink, InboundEvent
from connectors.tests.fake_directory import (
    CREDENTIALS,
    FakeDirectory,
    FakeUser,
    generate,
    platform_user_id,
)
from connectors.tests.helpers import make_connector
from connectors.tests.test_directory_sync import run_full
from tests.refusals import nothing_changes

wechatpy_crypto = pytest.importorskip("wechatpy.crypto")
wechatpy_enterprise = pytest.importorskip("wechatpy.enterprise.crypto")
from wechatpy.utils import WeChatSigner  # noqa: E402

pytestmark = pytest.mark.django_db

# DingTalk's published callback test vector (open.dingtalk.com, "加解密方案" / the
# DingTalk-Callback-Crypto demos): token, aes_key and suite key of a sample suite, the query
# of one callback and its ciphertext; it decrypts to the check_create_suite_url event below.
VECTOR = {
    "token": "123456",
    "aes_key": "4g5j64qlyl3zvetqxz5jiocdr586fn2zvjpa8zls3ij",
    "owner_key": "suite4xxxxxxxxxxxxxxx",
    "signature": "5a65ceeef9aab2d149439f82dc191dd6c5cbe2c0",
    "timestamp": "1445827045067",
    "nonce": "nEXhMP4r",
    "encrypt": (
        "1a3NBxmCFwkCJvfoQ7WhJHB+iX3qHPsc9JbaDznE1i03peOk1LaOQoRz3+nlyGNhwmwJ3vDMG+OzrHMeiZI7"
        "gTRWVdUBmfxjZ8Ej23JVYa9VrYeJ5as7XM/ZpulX8NEQis44w53h1qAgnC3PRzM7Zc/D6Ibr0rgUathB6zRH"
        "P8PYrfgnNOS9PhSBdHlegK+AGGanfwjXuQ9+0pZcy0w9lQ=="
    ),
    "plaintext": (
        '{"EventType":"check_create_suite_url","Random":"LPIdSnlF",'
        '"TestSuiteKey":"suite4xxxxxxxxxxxxxxx"}'
    ),
}

DINGTALK_EVENTS = {"event_token": "ding-event-token", "event_aes_key": "a" * 43}


def new_user() -> FakeUser:
    return FakeUser(
        11, "User 11", "user11@corp.example", "+86 13800000011", "E00011", "Intern", [1], leader=1
    )


@pytest.fixture
def server(fake_api):
    return fake_api


def drained() -> None:
    """What the drain worker does with the stored events (tasks run eagerly, on commit)."""
    from django.test import TestCase

    with TestCase.captureOnCommitCallbacks(execute=True):
        drain.inbound_drain()


def member_of(connector, platform: str, key: int) -> Member:
    return DirectoryUserLink.objects.get(
        connector=connector, platform_user_id=platform_user_id(platform, key)
    ).member


def audited(action: str, member: Member) -> int:
    return AuditEvent.objects.filter(action=action, target_id=str(member.pk)).count()


def assert_created_changed_deactivated(org, connector, platform: str, deliver) -> None:
    """The three changes, each delivered by `deliver(kind, key)` the platform's way."""
    org.users.append(new_user())
    deliver("user_created", 11)
    member = member_of(connector, platform, 11)
    assert (member.display_name, member.title, member.email, member.status) == (
        "User 11",
        "Intern",
        "user11@corp.example",
        "active",
    )
    assert member.manager.email == "user1@corp.example"
    assert audited("member.create", member) == 1

    org.users[-1].title = "Staff engineer"
    deliver("user_updated", 11)
    member.refresh_from_db()
    assert member.title == "Staff engineer"
    update = AuditEvent.objects.get(action="member.update", target_id=str(member.pk))
    assert update.changes["after"]["title"] == "Staff engineer"

    org.users = [user for user in org.users if user.key != 11]
    deliver("user_deleted", 11)
    member.refresh_from_db()
    assert member.status == "deactivated"
    assert audited("member.deactivate", member) == 1
    assert DirectorySync.objects.filter(connector=connector, kind="event").count() == 3
    assert not DirectorySync.objects.filter(connector=connector, kind="event").exclude(
        status="succeeded"
    )


# --- DingTalk: the published crypto -----------------------------------------------------------


def test_dingtalk_published_vector_signature_and_decryption():
    assert (
        callback_crypto.signature(
            VECTOR["token"], VECTOR["timestamp"], VECTOR["nonce"], VECTOR["encrypt"]
        )
        == VECTOR["signature"]
    )
    plain = callback_crypto.decrypt(VECTOR["aes_key"], VECTOR["encrypt"], VECTOR["owner_key"])
    assert plain.decode() == VECTOR["plaintext"]
    with pytest.raises(callback_crypto.CallbackCryptoError):
        callback_crypto.decrypt(VECTOR["aes_key"], VECTOR["encrypt"], "suite-someone-else")


def test_our_encryption_is_read_by_an_independent_implementation():
    """Cadre's encrypted "success" decrypts with wechatpy's code of the same scheme."""
    encrypted = callback_crypto.encrypt(VECTOR["aes_key"], b"success", VECTOR["owner_key"])
    key = callback_crypto.aes_key(VECTOR["aes_key"])
    assert wechatpy_crypto.PrpCrypto(key).decrypt(encrypted, VECTOR["owner_key"]) == "success"


# --- DingTalk over HTTP: encrypted event subscription ----------------------------------------


def dingtalk_post(connector, event: dict, *, timestamp: str | None = None, owner: str = "",
                  token: str = "", signature: str = ""):  # fmt: skip
    """POST an event as DingTalk's HTTP push does, encrypted with wechatpy's PrpCrypto."""
    key = callback_crypto.aes_key(DINGTALK_EVENTS["event_aes_key"])
    encrypted = wechatpy_crypto.PrpCrypto(key).encrypt(
        json.dumps(event), owner or CREDENTIALS["dingtalk"]["app_key"]
    )
    encrypted = encrypted.decode() if isinstance(encrypted, bytes) else encrypted
    timestamp = timestamp or str(int(time.time() * 1000))
    nonce = "nonce123"
    signer = WeChatSigner()
    signer.add_data(token or DINGTALK_EVENTS["event_token"], timestamp, nonce, encrypted)
    query = {
        "msg_signature": signature or signer.signature,
        "timestamp": timestamp,
        "nonce": nonce,
    }
    return Client().post(
        f"{connector.callback_path}?{urlencode(query)}",
        json.dumps({"encrypt": encrypted}),
        "application/json",
    )


def assert_encrypted_success(answer) -> None:
    """DingTalk's expected answer: "success", encrypted for this app and signed."""
    assert answer.status_code == 200, answer.content
    body = answer.json()
    crypto = wechatpy_crypto.WeChatCrypto(
        DINGTALK_EVENTS["event_token"],
        DINGTALK_EVENTS["event_aes_key"],
        CREDENTIALS["dingtalk"]["app_key"],
    )
    plain = crypto.decrypt_message(
        {"Encrypt": body["encrypt"]}, body["msg_signature"], body["timeStamp"], body["nonce"]
    )
    assert plain == "success"


@pytest.fixture
def dingtalk_http(server, alice):
    org = generate(users=4, departments=1)
    fake = FakeDirectory(server, "dingtalk", org)
    connector = make_connector(
        alice, "dingtalk", {**CREDENTIALS["dingtalk"], **DINGTALK_EVENTS}, fake.connector_settings()
    )
    assert run_full(alice, connector).status == "succeeded"
    return org, connector


DINGTALK_KINDS = {
    "user_created": "user_add_org",
    "user_updated": "user_modify_org",
    "user_deleted": "user_leave_org",
}


def test_dingtalk_http_event_subscription_creates_changes_and_deactivates(
    dingtalk_http, celery_eager
):
    org, connector = dingtalk_http

    def deliver(kind: str, key: int) -> None:
        event = {
            "EventType": DINGTALK_KINDS[kind],
            "TimeStamp": str(int(time.time() * 1000)),
            "UserId": [platform_user_id("dingtalk", key)],
            "CorpId": "dingcorp",
        }
        assert_encrypted_success(dingtalk_post(connector, event))
        assert_encrypted_success(dingtalk_post(connector, event))  # redelivered: stored once
        drained()

    assert_created_changed_deactivated(org, connector, "dingtalk", deliver)
    assert InboundEvent.objects.filter(connector=connector).count() == 3


def test_dingtalk_check_url_is_answered_and_stores_nothing(dingtalk_http):
    _, connector = dingtalk_http
    with nothing_changes(InboundEvent):
        answer = dingtalk_post(connector, {"EventType": "check_url"})
    assert_encrypted_success(answer)


@pytest.mark.parametrize(
    "tamper",
    [
        {"signature": "0" * 40},  # bad signature
        {"token": "another-token"},  # signed with someone else's token
        {"timestamp": str(int((time.time() - 7200) * 1000))},  # replayed two hours later
        {"owner": "ding-another-app"},  # encrypted for another app (unknown corp)
    ],
    ids=["bad-signature", "wrong-token", "replayed-timestamp", "unknown-owner"],
)
def test_dingtalk_refused_event_callbacks_store_nothing(dingtalk_http, tamper):
    org, connector = dingtalk_http
    org.users.append(new_user())
    event = {"EventType": "user_add_org", "TimeStamp": "1", "UserId": ["d11"]}
    with nothing_changes(InboundEvent, Member, DirectorySync, DirectoryUserLink):
        answer = dingtalk_post(connector, event, **tamper)
    assert answer.status_code == 401
    connector.refresh_from_db()
    assert connector.signature_rejections == 1


def test_dingtalk_event_callback_without_configured_keys_is_refused(server, alice):
    connector = make_connector(alice, "dingtalk", CREDENTIALS["dingtalk"], {})
    with nothing_changes(InboundEvent):
        answer = dingtalk_post(connector, {"EventType": "user_add_org", "UserId": ["d1"]})
    assert answer.status_code == 401


# --- DingTalk stream mode: the SDK's own routing ----------------------------------------------


class RecordingSocket:
    """The client's websocket, as far as routing uses it: what it sends back (the acks)."""

    def __init__(self):
        self.sent: list[dict] = []

    async def send(self, text: str) -> None:
        self.sent.append(json.loads(text))


def event_frame(event_type: str, event_id: str, data: dict) -> dict:
    """An EVENT frame as DingTalk's stream gateway sends it."""
    return {
        "specVersion": "1.0",
        "type": "EVENT",
        "headers": {
            "appId": "app-1",
            "connectionId": "conn-1",
            "contentType": "application/json",
            "messageId": f"msg-{event_id}",
            "time": str(int(time.time() * 1000)),
            "topic": "*",
            "eventBornTime": str(int(time.time() * 1000)),
            "eventCorpId": "dingcorp",
            "eventId": event_id,
            "eventType": event_type,
            "eventUnifiedAppId": "app-1",
        },
        "data": json.dumps(data),
    }


def test_dingtalk_stream_subscribes_to_events(server, alice, monkeypatch):
    """The connection request asks for events (topic "*") next to the robot and card topics."""
    dingtalk_stream = pytest.importorskip("dingtalk_stream")
    from connectors.dingtalk import stream

    opened = []

    def gateway(request):
        opened.append(request.json())
        return 200, {"endpoint": "ws://127.0.0.1:9/", "ticket": "t"}

    server.route("POST", "/v1.0/gateway/connections/open", gateway)
    monkeypatch.setattr(
        dingtalk_stream.DingTalkStreamClient,
        "OPEN_CONNECTION_API",
        f"{server.url}/v1.0/gateway/connections/open",
    )
    monkeypatch.setattr(dingtalk_stream.DingTalkStreamClient, "get_host_ip", lambda self: "")
    connector = make_connector(alice, "dingtalk", CREDENTIALS["dingtalk"], {"mode": "stream"})
    assert stream.client_for(connector).open_connection()["ticket"] == "t"
    subscriptions = opened[0]["subscriptions"]
    assert {"type": "EVENT", "topic": "*"} in subscriptions
    assert {"type": "CALLBACK", "topic": dingtalk_stream.ChatbotMessage.TOPIC} in subscriptions
    assert opened[0]["clientId"] == CREDENTIALS["dingtalk"]["app_key"]


def test_dingtalk_stream_contact_events_create_change_and_deactivate(server, alice, celery_eager):
    pytest.importorskip("dingtalk_stream")
    from connectors.dingtalk import stream

    org = generate(users=4, departments=1)
    fake = FakeDirectory(server, "dingtalk", org)
    connector = make_connector(
        alice, "dingtalk", CREDENTIALS["dingtalk"], {**fake.connector_settings(), "mode": "stream"}
    )
    assert run_full(alice, connector).status == "succeeded"
    client = stream.client_for(connector)
    client.websocket = socket = RecordingSocket()
    ids = iter(range(1, 100))

    def deliver(kind: str, key: int) -> None:
        frame = event_frame(
            DINGTALK_KINDS[kind],
            f"ev-{next(ids)}",
            {"eventId": "x", "optStaffId": "manager1", "timeStamp": 1,
             "userId": [platform_user_id("dingtalk", key)]},
        )  # fmt: skip
        async_to_sync(client.route_message)(frame)
        async_to_sync(client.route_message)(frame)  # redelivered: stored once
        ack = socket.sent[-1]
        assert ack["code"] == 200 and ack["headers"]["messageId"] == frame["headers"]["messageId"]
        drained()

    assert_created_changed_deactivated(org, connector, "dingtalk", deliver)
    assert InboundEvent.objects.filter(connector=connector).count() == 3

    # Another event the app subscribed to is acknowledged and not stored.
    with nothing_changes(InboundEvent):
        async_to_sync(client.route_message)(
            event_frame("bpms_instance_change", "ev-other", {"processInstanceId": "p"})
        )
    assert socket.sent[-1]["code"] == 200


# --- Feishu long connection: the real SDK client ---------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_feishu_long_connection_contact_events_create_change_and_deactivate(
    server, alice, celery_eager
):
    pytest.importorskip("lark_oapi")
    from connectors.tests.fake_longconn import FakeLongConnection
    from connectors.tests.test_feishu_longconn import Running

    org = generate(users=4, departments=1)
    fake = FakeDirectory(server, "feishu", org)
    credentials = CREDENTIALS["feishu"]
    endpoint = FakeLongConnection(
        server, app_id=credentials["app_id"], app_secret=credentials["app_secret"]
    ).start()
    connector = make_connector(
        alice, "feishu", credentials, {**fake.connector_settings(), "mode": "long_connection"}
    )
    assert run_full(alice, connector).status == "succeeded"
    running = Running(connector)
    ids = iter(range(1, 100))
    kinds = {
        "user_created": "contact.user.created_v3",
        "user_updated": "contact.user.updated_v3",
        "user_deleted": "contact.user.deleted_v3",
    }

    def deliver(kind: str, key: int) -> None:
        event_id = f"ev-{next(ids)}"
        event = {
            "schema": "2.0",
            "header": {
                "event_id": event_id,
                "event_type": kinds[kind],
                "tenant_key": "tenant-1",
                "app_id": credentials["app_id"],
                "create_time": str(int(time.time() * 1000)),
            },
            "event": {"object": {"open_id": platform_user_id("feishu", key), "name": "x"}},
        }
        answer = endpoint.push(event)
        assert answer["code"] == 200, answer
        assert endpoint.push(event)["code"] == 200  # redelivered: stored once
        # The SDK's thread stored it and ran the drain eagerly; wait for the change to land.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            event_row = InboundEvent.objects.filter(event_key=event_id).first()
            if event_row is not None and event_row.status == "processed":
                sync = DirectorySync.objects.filter(connector=connector, kind="event", phase=kind)
                if sync.filter(status="succeeded").exists():
                    break
            time.sleep(0.05)
        else:
            raise AssertionError(f"{kind} was not applied")

    try:
        assert_created_changed_deactivated(org, connector, "feishu", deliver)
        assert InboundEvent.objects.filter(connector=connector).count() == 3
    finally:
        running.stop()
        endpoint.stop()


# --- WeCom: change_contact through the webhook endpoint --------------------------------------


def wecom_post(connector, xml: str, *, timestamp: str | None = None, corp_id: str = "",
               signature: str = ""):  # fmt: skip
    """POST a callback as WeCom does, encrypted and signed by wechatpy's WeChatCrypto."""
    credentials = CREDENTIALS["wecom"]
    crypto = wechatpy_enterprise.WeChatCrypto(
        credentials["token"], credentials["encoding_aes_key"], corp_id or credentials["corp_id"]
    )
    timestamp = timestamp or str(int(time.time()))
    envelope = crypto.encrypt_message(xml, "nonce42", timestamp)
    root = ET.fromstring(envelope)
    query = {
        "msg_signature": signature or root.findtext("MsgSignature"),
        "timestamp": timestamp,
        "nonce": "nonce42",
    }
    body = f"<xml><Encrypt><![CDATA[{root.findtext('Encrypt')}]]></Encrypt></xml>"
    return Client().post(f"{connector.callback_path}?{urlencode(query)}", body, "text/xml")


def change_contact(change_type: str, user_id: str) -> str:
    return (
        "<xml><ToUserName><![CDATA[wwdir]]></ToUserName>"
        "<FromUserName><![CDATA[sys]]></FromUserName>"
        f"<CreateTime>{int(time.time())}</CreateTime>"
        "<MsgType><![CDATA[event]]></MsgType><Event><![CDATA[change_contact]]></Event>"
        f"<ChangeType>{change_type}</ChangeType><UserID><![CDATA[{user_id}]]></UserID></xml>"
    )


@pytest.fixture
def wecom_connector(server, alice):
    org = generate(users=4, departments=1)
    fake = FakeDirectory(server, "wecom", org)
    connector = make_connector(alice, "wecom", CREDENTIALS["wecom"], fake.connector_settings())
    assert run_full(alice, connector).status == "succeeded"
    return org, connector


def test_wecom_change_contact_callbacks_create_change_and_deactivate(wecom_connector, celery_eager):
    org, connector = wecom_connector
    change_types = {
        "user_created": "create_user",
        "user_updated": "update_user",
        "user_deleted": "delete_user",
    }

    def deliver(kind: str, key: int) -> None:
        xml = change_contact(change_types[kind], platform_user_id("wecom", key))
        answer = wecom_post(connector, xml)
        assert answer.status_code == 200, answer.content
        assert wecom_post(connector, xml).status_code == 200  # redelivered: stored once
        drained()

    assert_created_changed_deactivated(org, connector, "wecom", deliver)
    assert InboundEvent.objects.filter(connector=connector).count() == 3


@pytest.mark.parametrize(
    "tamper",
    [
        {"signature": "0" * 40},
        {"timestamp": str(int(time.time()) - 7200)},  # replayed two hours later
        {"corp_id": "wwsomeoneelse"},  # another company's ciphertext (unknown corp)
    ],
    ids=["bad-signature", "replayed-timestamp", "unknown-corp"],
)
def test_wecom_refused_change_contact_callbacks_store_nothing(wecom_connector, tamper):
    org, connector = wecom_connector
    org.users.append(new_user())
    with nothing_changes(InboundEvent, Member, DirectorySync, DirectoryUserLink):
        answer = wecom_post(connector, change_contact("create_user", "u11"), **tamper)
    assert answer.status_code == 401
