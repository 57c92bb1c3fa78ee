"""The generic inbound edge, exercised through the webhook platform: verify, dedupe, store, ack."""

from __future__ import annotations

import json
import threading
import time

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from connectors.models import Connector, InboundEvent
from connectors.tests.helpers import make_connector, nothing_received, webhook_post

pytestmark = pytest.mark.django_db

SECRET = "whsec-test"


@pytest.fixture
def hook(alice):
    return make_connector(
        alice, "webhook", {"signing_secret": SECRET}, {"callback_url": "http://127.0.0.1:9/unused"}
    )


def message(event_id="evt-1", text="hello"):
    return {
        "event_id": event_id,
        "type": "message",
        "text": text,
        "user": {"id": "u-1", "email": "bob@acme.test"},
    }


def test_signed_event_is_stored_once_and_enqueued_after_commit(
    hook, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = webhook_post(Client(), hook, message())
    assert response.status_code == 200
    assert response.json() == {"ok": True}
    event = InboundEvent.objects.get()
    assert (event.event_key, event.status, event.sender_id) == ("evt-1", "queued", "u-1")
    assert event.payload["text"] == "hello"
    assert len(callbacks) == 1


def test_redelivery_is_acknowledged_but_not_stored_or_enqueued_again(
    hook, django_capture_on_commit_callbacks
):
    webhook_post(Client(), hook, message())
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = webhook_post(Client(), hook, message())
    assert response.status_code == 200
    assert InboundEvent.objects.count() == 1
    assert callbacks == []


def test_bad_signature_is_401_envelope_and_counted(hook):
    response = webhook_post(Client(), hook, message(), signature="v1=" + "0" * 64)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "signature_invalid"
    hook.refresh_from_db()
    assert hook.signature_rejections == 1
    assert InboundEvent.objects.count() == 0


def test_missing_signature_is_401_not_500(hook):
    response = Client().post(
        hook.callback_path, data=json.dumps(message()), content_type="application/json"
    )
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "signature_invalid"


def test_stale_timestamp_is_rejected_even_with_a_valid_signature(hook):
    with nothing_received():
        response = webhook_post(Client(), hook, message(), timestamp=int(time.time()) - 3600)
    assert response.status_code == 401


def test_signature_from_another_secret_is_rejected(hook):
    with nothing_received():
        response = webhook_post(Client(), hook, message(), secret="someone-else")
    assert response.status_code == 401


def test_oversized_body_is_413_before_verification(hook):
    huge = message(text="x" * (300 * 1024))
    response = webhook_post(Client(), hook, huge)
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "payload_too_large"


def test_unknown_or_disabled_connector_is_404(hook):
    with nothing_received():
        unknown = Client().post(
            "/connectors/webhook/not-a-connector/events", data="{}", content_type="application/json"
        )
    assert unknown.status_code == 404
    Connector.objects.filter(pk=hook.pk).update(status="disabled")
    with nothing_received():
        assert webhook_post(Client(), hook, message()).status_code == 404


def test_unknown_platform_in_path_is_404(hook):
    with nothing_received():
        response = Client().post(
            f"/connectors/nope/{hook.public_id}/events", data="{}", content_type="application/json"
        )
    assert response.status_code == 404


def test_connector_of_another_platform_is_not_reachable_by_its_id(hook):
    with nothing_received():
        response = Client().post(
            f"/connectors/slack/{hook.public_id}/events", data="{}", content_type="application/json"
        )
    assert response.status_code == 404


def test_ack_path_is_a_handful_of_queries(hook, django_capture_on_commit_callbacks):
    webhook_post(Client(), hook, message("warm-up"))
    with (
        django_capture_on_commit_callbacks(execute=False),
        CaptureQueriesContext(connection) as queries,
    ):
        response = webhook_post(Client(), hook, message("evt-q"))
    assert response.status_code == 200
    # connector lookup, insert (in a savepoint/transaction); no health write within 5 s
    assert len(queries) <= 5, [q["sql"] for q in queries]


def test_unsigned_json_garbage_with_valid_signature_is_400(hook):
    body = b"not json"
    from connectors.webhook.inbound import sign

    ts = str(int(time.time()))
    with nothing_received():
        response = Client().post(
            hook.callback_path,
            data=body,
            content_type="application/json",
            HTTP_X_CADRE_TIMESTAMP=ts,
            HTTP_X_CADRE_SIGNATURE=sign(SECRET, ts, body),
        )
    assert response.status_code == 400


@pytest.mark.django_db(transaction=True)
def test_concurrent_duplicates_are_stored_and_enqueued_exactly_once(alice, celery_eager, fake_api):
    fake_api.route("POST", "/callback", lambda request: (200, {"ok": True}))
    hook = make_connector(
        alice, "webhook", {"signing_secret": SECRET}, {"callback_url": f"{fake_api.url}/callback"}
    )
    statuses: list[int] = []
    barrier = threading.Barrier(8)

    def deliver():
        barrier.wait()
        try:
            event = {**message("same-event"), "user": {"id": "u-a", "email": "alice@acme.test"}}
            statuses.append(webhook_post(Client(), hook, event).status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=deliver) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert statuses == [200] * 8
    event = InboundEvent.objects.get(connector=hook)
    # One task ran (eagerly, on commit): the event was claimed and answered exactly once
    # (alice has no agent yet: the one reply says so).
    assert event.attempts == 1
    assert len(fake_api.calls("/callback")) == 1


def test_rotated_secret_is_picked_up_at_once_despite_the_cache(hook, alice):
    from cadre.tenancy.actors import member_actor
    from connectors.base import services

    assert webhook_post(Client(), hook, message("before")).status_code == 200  # now cached
    services.connector_rotate_credentials(
        actor=member_actor(alice), connector=hook, credentials={"signing_secret": "rotated"}
    )
    assert webhook_post(Client(), hook, message("after"), secret="rotated").status_code == 200
    with nothing_received():
        assert webhook_post(Client(), hook, message("old"), secret=SECRET).status_code == 401


def test_plain_message_ack_is_one_insert(hook, django_capture_on_commit_callbacks):
    webhook_post(Client(), hook, message("warm-up"))  # caches the connector
    with (
        django_capture_on_commit_callbacks(execute=False),
        CaptureQueriesContext(connection) as queries,
    ):
        webhook_post(Client(), hook, message("evt-one"))
    assert [q["sql"].split()[0] for q in queries] == ["INSERT"]
