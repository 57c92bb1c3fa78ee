"""WeCom inbound contract: WeCom's published sample vectors, round trips, signature, dedupe."""

from __future__ import annotations

import base64
import hashlib
import os
import struct
import time
from urllib.parse import urlencode

import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from django.test import Client

from connectors.models import InboundEvent
from connectors.tests.helpers import make_connector, nothing_received
from connectors.wecom import crypto

pytestmark = pytest.mark.django_db

# WeCom's published sample (WXBizMsgCrypt samples in every language).
TOKEN = "QDG6eK"
AES_KEY = "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C"
CORP_ID = "wx5823bf96d3bd56c7"
VERIFY = {
    "msg_signature": "5c45ff5e21c57e6ad56bac8758b79b1d9ac89fd3",
    "timestamp": "1409659589",
    "nonce": "263014780",
    "echostr": "P9nAzCzyDtyTWESHep1vC5X9xho/qYX3Zpb4yKa9SKld1DsH3Iyt3tP3zNdtp+4RPcs8TgAE7OaB"
    "O+FZXvnaqQ==",
}
REQ_SIGNATURE, REQ_TIMESTAMP, REQ_NONCE = (
    "477715d11cdb4164915debcba66cb864d751f3e6",
    "1409659813",
    "1372623149",
)
REQ_ENCRYPT = (
    "RypEvHKD8QQKFhvQ6QleEB4J58tiPdvo+rtK1I9qca6aM/wvqnLSV5zEPeusUiX5L5X/0lWfrf0QADHHhGd3QczcdCU"
    "pj911L3vg3W/sYYvuJTs3TUUkSUXxaccAS0qhxchrRYt66wiSpGLYL42aM6A8dTT+6k4aSknmPj48kzJs8qLjvd4Xgp"
    "ue06DOdnLxAUHzM6+kDZ+HMZfJYuR+LtwGc2hgf5gsijff0ekUNXZiqATP7PF5mZxZ3Izoun1s4zG4LUMnvw2r+KqCK"
    "Iw+3IQH03v+BCA9nMELNqbSf6tiWSrXJB3LAVGUcallcrw8V2t9EL4EhzJWrQUax5wLVMNS0+rUPA3k22Ncx4XXZS9o"
    "0MBH27Bo6BpNelZpS+/uh9KsNlY6bHCmJU9p8g7m3fVKn28H3KDYA5Pl/T8Z1ptDAVe0lXdQ2YoyyH2uyPIGHBZZIs2"
    "pDBS8R07+qN+E7Q=="
)
REQ_BODY = (
    f"<xml><ToUserName><![CDATA[{CORP_ID}]]></ToUserName><Encrypt><![CDATA[{REQ_ENCRYPT}]]>"
    "</Encrypt><AgentID><![CDATA[218]]></AgentID></xml>"
)
YEARS = 20 * 365 * 86400


def independent_encrypt(message: bytes, receive_id: str = CORP_ID, key_text: str = AES_KEY):
    """WeCom's algorithm written again for the tests (not connectors.wecom.crypto)."""
    key = base64.b64decode(key_text + "=")
    body = os.urandom(16) + struct.pack(">I", len(message)) + message + receive_id.encode()
    pad = 32 - len(body) % 32
    body += bytes([pad]) * pad
    enc = Cipher(algorithms.AES(key), modes.CBC(key[:16])).encryptor()
    return base64.b64encode(enc.update(body) + enc.finalize()).decode()


def sig(timestamp, nonce, encrypted, token=TOKEN):
    joined = "".join(sorted([token, timestamp, nonce, encrypted])).encode()
    return hashlib.sha1(joined).hexdigest()


@pytest.fixture
def sample_connector(alice):
    # The sample's timestamps are from 2014: widen the freshness window for this contract test.
    return make_connector(
        alice,
        "wecom",
        {"corp_id": CORP_ID, "corp_secret": "s", "token": TOKEN, "encoding_aes_key": AES_KEY},
        {"agent_id": 218, "tolerance_seconds": YEARS},
        name="sample",
    )


@pytest.fixture
def live(alice):
    return make_connector(
        alice,
        "wecom",
        {"corp_id": CORP_ID, "corp_secret": "s", "token": TOKEN, "encoding_aes_key": AES_KEY},
        {"agent_id": 218},
    )


def post_encrypted(connector, plaintext: bytes, *, timestamp=None, nonce="n1", signature=None):
    encrypted = independent_encrypt(plaintext)
    ts = timestamp or str(int(time.time()))
    query = urlencode(
        {"msg_signature": signature or sig(ts, nonce, encrypted), "timestamp": ts, "nonce": nonce}
    )
    body = (
        f"<xml><ToUserName><![CDATA[{CORP_ID}]]></ToUserName><Encrypt><![CDATA[{encrypted}]]>"
        "</Encrypt><AgentID>218</AgentID></xml>"
    )
    return Client().post(f"{connector.callback_path}?{query}", data=body, content_type="text/xml")


def text_message(msg_id="1001", content="hello", user="zhangsan"):
    return (
        f"<xml><ToUserName><![CDATA[{CORP_ID}]]></ToUserName><FromUserName><![CDATA[{user}]]>"
        f"</FromUserName><CreateTime>1700000000</CreateTime><MsgType><![CDATA[text]]></MsgType>"
        f"<Content><![CDATA[{content}]]></Content><MsgId>{msg_id}</MsgId>"
        "<AgentID>218</AgentID></xml>"
    ).encode()


def test_sample_echostr_vector_decrypts_to_the_published_value():
    assert crypto.check_signature(
        TOKEN, VERIFY["timestamp"], VERIFY["nonce"], VERIFY["echostr"], VERIFY["msg_signature"]
    )
    assert crypto.decrypt(AES_KEY, VERIFY["echostr"], CORP_ID) == b"1616140317555161061"


def test_sample_url_verification_through_the_view(sample_connector):
    response = Client().get(f"{sample_connector.callback_path}?{urlencode(VERIFY)}")
    assert response.status_code == 200
    assert response.content == b"1616140317555161061"


def test_sample_message_through_the_view(sample_connector):
    query = urlencode(
        {"msg_signature": REQ_SIGNATURE, "timestamp": REQ_TIMESTAMP, "nonce": REQ_NONCE}
    )
    response = Client().post(
        f"{sample_connector.callback_path}?{query}", data=REQ_BODY, content_type="text/xml"
    )
    assert response.status_code == 200 and response.content == b""
    event = InboundEvent.objects.get()
    assert (event.event_key, event.sender_id, event.payload["text"]) == (
        "4561255354251345929",
        "mycreate",
        "hello",
    )


def test_sample_vector_is_refused_as_stale_with_the_default_window(live):
    query = urlencode(
        {"msg_signature": REQ_SIGNATURE, "timestamp": REQ_TIMESTAMP, "nonce": REQ_NONCE}
    )
    with nothing_received():
        response = Client().post(
            f"{live.callback_path}?{query}", data=REQ_BODY, content_type="text/xml"
        )
    assert response.status_code == 401


def test_round_trip_with_independent_encryption(live):
    response = post_encrypted(live, text_message(content="你好"))
    assert response.status_code == 200
    assert InboundEvent.objects.get().payload["text"] == "你好"


def test_our_encrypt_is_readable_by_the_independent_decoder():
    encrypted = crypto.encrypt(AES_KEY, b"<xml/>", CORP_ID)
    assert crypto.decrypt(AES_KEY, encrypted, CORP_ID) == b"<xml/>"


def test_wrong_corp_id_inside_the_ciphertext_is_401(live):
    encrypted = independent_encrypt(text_message(), receive_id="wx-other-corp")
    ts = str(int(time.time()))
    query = urlencode({"msg_signature": sig(ts, "n", encrypted), "timestamp": ts, "nonce": "n"})
    body = f"<xml><Encrypt><![CDATA[{encrypted}]]></Encrypt></xml>"
    with nothing_received():
        response = Client().post(
            f"{live.callback_path}?{query}", data=body, content_type="text/xml"
        )
    assert response.status_code == 401


def test_bad_signature_is_401(live):
    with nothing_received():
        assert post_encrypted(live, text_message(), signature="0" * 40).status_code == 401


def test_missing_signature_parameters_are_401(live):
    with nothing_received():
        response = Client().post(live.callback_path, data=REQ_BODY, content_type="text/xml")
    assert response.status_code == 401


def test_doctype_is_refused(live):
    body = '<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "b">]><xml><Encrypt>&a;</Encrypt></xml>'
    with nothing_received():
        response = Client().post(live.callback_path, data=body, content_type="text/xml")
    assert response.status_code == 400


def test_redelivered_msgid_is_stored_once(live):
    assert post_encrypted(live, text_message("77")).status_code == 200
    assert post_encrypted(live, text_message("77"), nonce="n2").status_code == 200
    assert InboundEvent.objects.filter(event_key="77").count() == 1


def test_events_dedupe_on_sender_and_create_time(live):
    event = (
        f"<xml><ToUserName>{CORP_ID}</ToUserName><FromUserName>lisi</FromUserName>"
        "<CreateTime>1700000001</CreateTime><MsgType>event</MsgType><Event>enter_agent"
        "</Event><AgentID>218</AgentID></xml>"
    ).encode()
    post_encrypted(live, event)
    post_encrypted(live, event, nonce="again")
    stored = InboundEvent.objects.get()
    assert stored.kind == "event" and stored.event_key.startswith("event:lisi:1700000001")


def test_echostr_with_bad_signature_is_401(live):
    params = {**VERIFY, "timestamp": str(int(time.time()))}
    with nothing_received():
        response = Client().get(f"{live.callback_path}?{urlencode(params)}")
    assert response.status_code == 401
