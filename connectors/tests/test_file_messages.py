"""File and image messages: each platform's message becomes the same attachment shape on the
stored event (and a line in the run's input text); the file is fetched only when asked, through
the platform's API (loopback fakes), within the size cap; connectors can refuse files."""

from __future__ import annotations

import json

import pytest

from connectors.base import InboundRequest, Verified, platform_for
from connectors.base.attachments import AttachmentError, AttachmentTooLarge, attachment_download
from connectors.base.transport import TransportError
from connectors.dingtalk import stream
from connectors.dingtalk.tests.fake_api import APP_KEY, FakeDingTalk
from connectors.dingtalk.tests.fake_api import APP_SECRET as DING_SECRET
from connectors.feishu.tests.fake_api import APP_ID, APP_SECRET, FakeFeishu
from connectors.inbound import store as inbound
from connectors.models import InboundEvent
from connectors.slack.tests.fake_api import BOT_TOKEN, FakeSlack
from connectors.tests.helpers import make_connector
from connectors.tests.test_end_to_end import bob_agent  # noqa: F401  (fixture)
from connectors.wecom.tests.fake_api import CORP_ID, CORP_SECRET, FakeWeCom

pytestmark = pytest.mark.django_db
REQUEST = InboundRequest(method="POST", headers={}, query={}, body=b"")
PDF = b"%PDF-1.7 quarterly report" * 10


def store(connector, data) -> InboundEvent:
    events = platform_for(connector).parse(Verified(data, REQUEST))
    [stored] = inbound.inbound_store(connector, events)
    return InboundEvent.objects.get(pk=stored.event_id)


def feishu_message(message_type: str, content: dict, event_id: str = "ev-file") -> dict:
    return {
        "schema": "2.0",
        "header": {"event_id": event_id, "event_type": "im.message.receive_v1"},
        "event": {
            "sender": {"sender_id": {"open_id": "ou_bob"}, "sender_type": "user"},
            "message": {
                "message_id": "om_file",
                "chat_id": "oc_1",
                "chat_type": "p2p",
                "message_type": message_type,
                "content": json.dumps(content),
            },
        },
    }


@pytest.fixture
def feishu_connector(alice, fake_api):
    FakeFeishu(fake_api)
    return make_connector(
        alice,
        "feishu",
        {"app_id": APP_ID, "app_secret": APP_SECRET},
        {"api_base_url": fake_api.url},
    )


# --- parsing: one shape for every platform --------------------------------------------------


def test_feishu_file_message_is_stored_with_its_attachment_and_described_in_the_text(
    feishu_connector,
):
    event = store(
        feishu_connector, feishu_message("file", {"file_key": "file_v2_1", "file_name": "q3.pdf"})
    )

    assert event.kind == "message"
    assert event.payload["attachments"] == [
        {
            "kind": "file",
            "key": "file_v2_1",
            "name": "q3.pdf",
            "size": 0,
            "mime": "application/pdf",
            "source": {"message_id": "om_file"},
        }
    ]
    assert event.payload["text"] == "[Attached file: q3.pdf (application/pdf)]"


def test_feishu_image_message_keeps_the_image_key(feishu_connector):
    event = store(feishu_connector, feishu_message("image", {"image_key": "img_v2_9"}))
    [image] = event.payload["attachments"]
    assert (image["kind"], image["key"], image["mime"]) == ("image", "img_v2_9", "image/*")


def test_wecom_file_and_image_messages_become_attachments(alice):
    connector = make_connector(
        alice,
        "wecom",
        {"corp_id": CORP_ID, "corp_secret": CORP_SECRET, "token": "t", "encoding_aes_key": "k"},
    )
    base = {"FromUserName": "zhangsan", "ToUserName": CORP_ID, "AgentID": "1"}
    image = store(
        connector,
        {**base, "MsgType": "image", "MsgId": "1001", "MediaId": "media-img", "PicUrl": "http://p"},
    )
    file = store(
        connector,
        {
            **base,
            "MsgType": "file",
            "MsgId": "1002",
            "MediaId": "media-doc",
            "FileName": "plan.xlsx",
            "FileSize": "2048",
        },
    )

    [picture] = image.payload["attachments"]
    assert (picture["kind"], picture["key"], picture["source"]) == (
        "image",
        "media-img",
        {"pic_url": "http://p"},
    )
    [document] = file.payload["attachments"]
    assert (document["name"], document["size"], document["key"]) == ("plan.xlsx", 2048, "media-doc")
    assert "plan.xlsx" in file.payload["text"] and "2.0 KB" in file.payload["text"]


def dingtalk_file(msg_id: str = "ding-file-1") -> dict:
    return {
        "msgId": msg_id,
        "msgtype": "file",
        "content": {"downloadCode": "dl-code-1", "fileName": "contract.docx"},
        "senderStaffId": "staff-1",
        "conversationType": "1",
        "conversationId": "cid-1",
    }


def test_dingtalk_file_message_carries_its_download_code(alice):
    connector = make_connector(alice, "dingtalk", {"app_key": APP_KEY, "app_secret": DING_SECRET})
    event = store(connector, dingtalk_file())
    [document] = event.payload["attachments"]
    assert (document["kind"], document["key"], document["name"]) == (
        "file",
        "dl-code-1",
        "contract.docx",
    )


def test_slack_shared_files_become_attachments_next_to_the_text(alice):
    connector = make_connector(alice, "slack", {"bot_token": BOT_TOKEN, "signing_secret": "s"})
    event = store(
        connector,
        {
            "type": "event_callback",
            "event_id": "Ev1",
            "team_id": "T1",
            "event": {
                "type": "message",
                "subtype": "file_share",
                "user": "U1",
                "channel": "D1",
                "channel_type": "im",
                "ts": "1.0",
                "text": "see attached",
                "files": [
                    {
                        "id": "F1",
                        "name": "diagram.png",
                        "mimetype": "image/png",
                        "size": 5000,
                        "url_private_download": "https://files.example/F1",
                    }
                ],
            },
        },
    )
    [diagram] = event.payload["attachments"]
    assert diagram == {
        "kind": "image",
        "key": "F1",
        "name": "diagram.png",
        "size": 5000,
        "mime": "image/png",
        "source": {"url": "https://files.example/F1"},
    }
    assert event.payload["text"].startswith("see attached\n[Attached image: diagram.png")


def test_connector_that_refuses_files_ignores_file_only_messages(alice, fake_api):
    connector = make_connector(
        alice,
        "feishu",
        {"app_id": APP_ID, "app_secret": APP_SECRET},
        {"file_messages": False},
    )
    event = store(connector, feishu_message("file", {"file_key": "f", "file_name": "x.pdf"}))
    assert event.kind == "event" and "attachments" not in event.payload

    ding = make_connector(
        alice, "dingtalk", {"app_key": APP_KEY, "app_secret": DING_SECRET}, {"file_messages": False}
    )
    assert stream.receive(ding.pk, dingtalk_file("stream-file"))["ok"] is True
    assert InboundEvent.objects.get(connector=ding).kind == "event"  # the stream path too


# --- download: lazy, through the platform's API, size-capped -------------------------------


def test_feishu_attachment_is_downloaded_through_message_resources(feishu_connector, fake_api):
    fake_api.route("GET", "/open-apis/im/v1/messages/om_file/resources/*", lambda r: (200, PDF))
    event = store(
        feishu_connector, feishu_message("file", {"file_key": "fk", "file_name": "q.pdf"})
    )
    assert not fake_api.calls("/open-apis/im/v1/messages/om_file/resources/fk")  # lazy

    downloaded = attachment_download(event, 0)

    assert downloaded.content == PDF and downloaded.name == "q.pdf"
    assert downloaded.mime == "application/pdf"
    [request] = fake_api.calls("/open-apis/im/v1/messages/om_file/resources/fk")
    assert request.query == {"type": "file"}
    assert request.headers["authorization"].startswith("Bearer t-")


def test_download_over_the_size_cap_is_refused(feishu_connector, fake_api):
    fake_api.route("GET", "/open-apis/im/v1/messages/om_file/resources/*", lambda r: (200, PDF))
    event = store(
        feishu_connector, feishu_message("file", {"file_key": "fk", "file_name": "q.pdf"})
    )

    with pytest.raises(AttachmentTooLarge):
        attachment_download(event, 0, max_bytes=len(PDF) - 1)
    with pytest.raises(AttachmentError):
        attachment_download(event, 1)  # no such attachment


def test_declared_size_over_the_cap_is_refused_before_any_request(alice, fake_api):
    connector = make_connector(
        alice,
        "wecom",
        {"corp_id": CORP_ID, "corp_secret": CORP_SECRET, "token": "t", "encoding_aes_key": "k"},
        {"api_base_url": fake_api.url, "file_max_bytes": 1000},
    )
    event = store(
        connector,
        {
            "FromUserName": "zhangsan",
            "MsgType": "file",
            "MsgId": "9",
            "MediaId": "m",
            "FileName": "big.zip",
            "FileSize": "5000",
        },
    )
    with pytest.raises(AttachmentTooLarge):
        attachment_download(event, 0)
    assert fake_api.requests == []


def test_wecom_media_is_downloaded_and_a_refusal_is_an_error(alice, fake_api):
    FakeWeCom(fake_api)
    media = {"m-ok": PDF}
    fake_api.route(
        "GET",
        "/cgi-bin/media/get",
        lambda r: (200, media.get(r.query["media_id"], {"errcode": 40007, "errmsg": "bad media"})),
    )
    connector = make_connector(
        alice,
        "wecom",
        {"corp_id": CORP_ID, "corp_secret": CORP_SECRET, "token": "t", "encoding_aes_key": "k"},
        {"api_base_url": fake_api.url},
    )
    good, bad = (
        store(
            connector,
            {"FromUserName": "u", "MsgType": "file", "MsgId": key, "MediaId": key, "FileName": "a"},
        )
        for key in ("m-ok", "m-gone")
    )

    assert attachment_download(good, 0).content == PDF
    with pytest.raises(TransportError, match="40007"):
        attachment_download(bad, 0)


def test_dingtalk_download_code_is_exchanged_for_a_url_then_fetched(alice, fake_api):
    ding = FakeDingTalk(fake_api)
    fake_api.route(
        "POST",
        "/v1.0/robot/messageFiles/download",
        lambda r: (200, {"downloadUrl": f"{fake_api.url}/signed/contract"}),
    )
    fake_api.route("GET", "/signed/contract", lambda r: (200, PDF))
    connector = make_connector(
        alice,
        "dingtalk",
        {"app_key": APP_KEY, "app_secret": DING_SECRET},
        {"api_base_url": fake_api.url, "robot_code": "robot-1"},
    )
    event = store(connector, dingtalk_file())

    assert attachment_download(event, 0).content == PDF

    [exchange] = fake_api.calls("/v1.0/robot/messageFiles/download")
    assert exchange.json() == {"downloadCode": "dl-code-1", "robotCode": "robot-1"}
    assert exchange.headers["x-acs-dingtalk-access-token"] in ding.valid_tokens
    [fetch] = fake_api.calls("/signed/contract")
    assert "x-acs-dingtalk-access-token" not in fetch.headers


def test_slack_file_is_fetched_from_its_private_url_with_the_bot_token(alice, fake_api):
    FakeSlack(fake_api)
    fake_api.route("GET", "/files/F1", lambda r: (200, PDF))
    connector = make_connector(
        alice,
        "slack",
        {"bot_token": BOT_TOKEN, "signing_secret": "s"},
        {"api_base_url": f"{fake_api.url}/api"},
    )
    event = InboundEvent.objects.create(
        organization_id=connector.organization_id,
        connector=connector,
        event_key="msg:D1:1.0",
        payload={
            "attachments": [
                {
                    "kind": "file",
                    "key": "F1",
                    "name": "r.pdf",
                    "size": len(PDF),
                    "mime": "application/pdf",
                    "source": {"url": f"{fake_api.url}/files/F1"},
                }
            ]
        },
    )

    assert attachment_download(event, 0).content == PDF
    [fetch] = fake_api.calls("/files/F1")
    assert fetch.headers["authorization"] == f"Bearer {BOT_TOKEN}"


# --- into the run: the agent gets the file's description and a reference to fetch it ----------


def test_a_file_message_reaches_the_agents_run_with_a_reference_to_fetch_it(
    feishu_connector,
    bob,
    bob_agent,  # noqa: F811  (the end-to-end fixture, imported above)
):
    from cadre.agents.models import Run
    from connectors.inbound import drain
    from tests.factories import IMIdentityFactory

    IMIdentityFactory(member=bob, platform="feishu", platform_user_id="ou_bob")
    event = store(
        feishu_connector, feishu_message("file", {"file_key": "file_v2_7", "file_name": "q3.pdf"})
    )
    drain.process_inbound_event(event.pk)

    run = Run.objects.get(agent=bob_agent)
    assert run.input["text"] == "[Attached file: q3.pdf (application/pdf)]"
    [reference] = run.input["attachments"]
    assert (reference["key"], reference["name"]) == ("file_v2_7", "q3.pdf")
    assert (reference["inbound_event"], reference["index"]) == (event.pk, 0)


def test_slack_bot_token_is_never_sent_outside_slack(alice, fake_api):
    FakeSlack(fake_api)
    connector = make_connector(
        alice,
        "slack",
        {"bot_token": BOT_TOKEN, "signing_secret": "s"},
        {"api_base_url": f"{fake_api.url}/api"},
    )
    event = InboundEvent.objects.create(
        organization_id=connector.organization_id,
        connector=connector,
        event_key="msg:D1:2.0",
        payload={
            "attachments": [
                {
                    "kind": "file",
                    "key": "F2",
                    "name": "r.pdf",
                    "size": 10,
                    "mime": "application/pdf",
                    "source": {"url": "https://collector.example.net/files/F2"},
                }
            ]
        },
    )
    with pytest.raises(AttachmentError, match="bot token"):
        attachment_download(event, 0)
