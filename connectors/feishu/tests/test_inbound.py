"""Feishu inbound contract: challenge (plain and encrypted), signature, token, schemas 1.0/2.0."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import time

import pytest
from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from django.test import Client

from connectors.feishu import crypto
from connectors.models import InboundEvent
from connectors.tests.helpers import make_connector, nothing_received

pytestmark = pytest.mark.django_db

ENCRYPT_KEY = "kT9mN2pQ7rS4vW1x"
TOKEN = "verif-token-1"


def feishu_encrypt(key: str, plaintext: bytes) -> str:
    """Independent of connectors.feishu.crypto: the documented algorithm, written again."""
    iv = os.urandom(16)
    padder = padding.PKCS7(128).padder()
    data = padder.update(plaintext) + padder.finalize()
    enc = Cipher(algorithms.AES(hashlib.sha256(key.encode()).digest()), modes.CBC(iv)).encryptor()
    return base64.b64encode(iv + enc.update(data) + enc.finalize()).decode()


def signed_headers(
    body: bytes, key: str = ENCRYPT_KEY, timestamp: str | None = None, nonce: str = "n0nce"
) -> dict:
    ts = timestamp or str(int(time.time()))
    sig = hashlib.sha256((ts + nonce + key).encode() + body).hexdigest()
    return {
        "HTTP_X_LARK_REQUEST_TIMESTAMP": ts,
        "HTTP_X_LARK_REQUEST_NONCE": nonce,
        "HTTP_X_LARK_SIGNATURE": sig,
    }


def message_v2(event_id="ev-1", text="hi", chat_type="p2p", token=TOKEN):
    return {
        "schema": "2.0",
        "header": {
            "event_id": event_id,
            "event_type": "im.message.receive_v1",
            "create_time": "1700000000000",
            "token": token,
            "app_id": "cli_x",
            "tenant_key": "tk-1",
        },
        "event": {
            "sender": {
                "sender_id": {"open_id": "ou_sender", "user_id": "u1", "union_id": "on1"},
                "sender_type": "user",
                "tenant_key": "tk-1",
            },
            "message": {
                "message_id": "om_1",
                "chat_id": "oc_1",
                "chat_type": chat_type,
                "message_type": "text",
                "content": json.dumps({"text": f"@_user_1 {text}"}),
            },
        },
    }


@pytest.fixture
def encrypted(alice):
    return make_connector(
        alice,
        "feishu",
        {
            "app_id": "cli_x",
            "app_secret": "s",
            "encrypt_key": ENCRYPT_KEY,
            "verification_token": TOKEN,
        },
    )


@pytest.fixture
def plain(alice):
    return make_connector(
        alice,
        "feishu",
        {"app_id": "cli_x", "app_secret": "s", "verification_token": TOKEN},
        name="plain",
    )


def post(connector, body: bytes, **headers):
    return Client().post(
        connector.callback_path, data=body, content_type="application/json", **headers
    )


def test_published_decryption_vector():
    # Feishu's documentation example: key "test key" decrypts to "hello world".
    assert (
        crypto.decrypt("test key", "P37w+VZImNgPEO1RBhJ6RtKl7n6zymIbEG1pReEzghk=") == b"hello world"
    )


def test_url_verification_plain(plain):
    body = json.dumps({"challenge": "ch-123", "token": TOKEN, "type": "url_verification"})
    response = post(plain, body.encode())
    assert response.status_code == 200
    assert response.json() == {"challenge": "ch-123"}


def test_url_verification_plain_with_wrong_token_is_401(plain):
    body = json.dumps({"challenge": "ch", "token": "wrong", "type": "url_verification"})
    with nothing_received():
        assert post(plain, body.encode()).status_code == 401


def test_url_verification_encrypted(encrypted):
    inner = json.dumps({"challenge": "ch-enc", "token": TOKEN, "type": "url_verification"})
    body = json.dumps({"encrypt": feishu_encrypt(ENCRYPT_KEY, inner.encode())}).encode()
    response = post(encrypted, body)
    assert response.status_code == 200
    assert response.json() == {"challenge": "ch-enc"}


def test_encrypted_challenge_under_another_key_is_401(encrypted):
    inner = json.dumps({"challenge": "x", "token": TOKEN, "type": "url_verification"})
    body = json.dumps({"encrypt": feishu_encrypt("other-key", inner.encode())}).encode()
    with nothing_received():
        assert post(encrypted, body).status_code == 401


def test_signed_encrypted_message_is_stored(encrypted):
    inner = json.dumps(message_v2()).encode()
    body = json.dumps({"encrypt": feishu_encrypt(ENCRYPT_KEY, inner)}).encode()
    response = post(encrypted, body, **signed_headers(body))
    assert response.status_code == 200
    event = InboundEvent.objects.get()
    assert (event.event_key, event.sender_id, event.chat_id) == ("ev-1", "ou_sender", "oc_1")
    assert event.payload["text"] == "hi"  # the @mention placeholder is stripped
    assert event.payload["tenant_key"] == "tk-1"


def test_unsigned_encrypted_message_is_401_even_if_it_decrypts(encrypted):
    inner = json.dumps(message_v2()).encode()
    body = json.dumps({"encrypt": feishu_encrypt(ENCRYPT_KEY, inner)}).encode()
    response = post(encrypted, body)
    assert response.status_code == 401
    assert InboundEvent.objects.count() == 0


def test_bad_signature_is_401_not_500(encrypted):
    inner = json.dumps(message_v2()).encode()
    body = json.dumps({"encrypt": feishu_encrypt(ENCRYPT_KEY, inner)}).encode()
    headers = signed_headers(body)
    headers["HTTP_X_LARK_SIGNATURE"] = "0" * 64
    response = post(encrypted, body, **headers)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "signature_invalid"


def test_signature_over_another_body_is_401(encrypted):
    inner = json.dumps(message_v2()).encode()
    body = json.dumps({"encrypt": feishu_encrypt(ENCRYPT_KEY, inner)}).encode()
    with nothing_received():
        assert post(encrypted, body, **signed_headers(b"{}")).status_code == 401


def test_stale_timestamp_is_401(encrypted):
    inner = json.dumps(message_v2()).encode()
    body = json.dumps({"encrypt": feishu_encrypt(ENCRYPT_KEY, inner)}).encode()
    stale = str(int(time.time()) - 8 * 3600)
    with nothing_received():
        assert post(encrypted, body, **signed_headers(body, timestamp=stale)).status_code == 401


def test_plain_event_with_token(plain):
    response = post(plain, json.dumps(message_v2(chat_type="group")).encode())
    assert response.status_code == 200
    event = InboundEvent.objects.get()
    assert event.payload["chat_type"] == "group"
    assert event.payload["thread_ref"] == "om_1"


def test_plain_event_with_wrong_token_is_401(plain):
    with nothing_received():
        assert post(plain, json.dumps(message_v2(token="nope")).encode()).status_code == 401


def test_schema_1_message(plain):
    body = {
        "uuid": "uuid-1",
        "token": TOKEN,
        "ts": "1700000000.1",
        "type": "event_callback",
        "event": {
            "type": "message",
            "open_id": "ou_v1",
            "open_chat_id": "oc_v1",
            "chat_type": "private",
            "msg_type": "text",
            "text": "@bot hello",
            "text_without_at_bot": "hello",
            "open_message_id": "om_v1",
            "tenant_key": "tk",
        },
    }
    assert post(plain, json.dumps(body).encode()).status_code == 200
    event = InboundEvent.objects.get()
    assert (event.event_key, event.sender_id, event.payload["text"]) == ("uuid-1", "ou_v1", "hello")


def test_redelivered_event_id_is_stored_once(plain):
    body = json.dumps(message_v2(event_id="same")).encode()
    assert post(plain, body).status_code == 200
    assert post(plain, body).status_code == 200
    assert InboundEvent.objects.filter(event_key="same").count() == 1


def test_bot_messages_are_stored_as_ignorable_events(plain):
    data = message_v2(event_id="bot-1")
    data["event"]["sender"]["sender_type"] = "app"
    assert post(plain, json.dumps(data).encode()).status_code == 200
    assert InboundEvent.objects.get().kind == "event"


def test_card_action_answers_with_a_toast(plain):
    data = {
        "schema": "2.0",
        "header": {"event_id": "card-1", "event_type": "card.action.trigger", "token": TOKEN},
        "event": {
            "operator": {"open_id": "ou_someone"},
            "token": "c-token",
            "action": {"tag": "button", "value": {"cadre_token": "bogus", "decision": "approve"}},
            "context": {"open_message_id": "om_card", "open_chat_id": "oc_1"},
        },
    }
    response = post(plain, json.dumps(data).encode())
    assert response.status_code == 200
    assert response.json()["toast"]["type"] == "error"
    assert InboundEvent.objects.get().status == "ignored"
