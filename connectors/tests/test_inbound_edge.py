"""The ASGI inbound edge in front of Django: same answers as the view, without the middleware.

Driven as the server drives it (ASGI scope, receive, send), with the edge's own long-lived
threads and database connections, so these tests commit for real (transaction=True).
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from connectors.inbound import views
from connectors.models import Connector, InboundEvent
from connectors.tests.helpers import make_connector
from connectors.webhook.inbound import sign

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "whsec-edge"


class Inner:
    """The app behind the edge (Django in production): records what reached it."""

    def __init__(self):
        self.paths: list[str] = []

    async def __call__(self, scope, receive, send):
        self.paths.append(scope["path"])
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})


@pytest.fixture
def edge(settings):
    settings.CONNECTORS_SHARED_THREADS = True  # the edge's own threads, as when served
    yield views.InboundEdge(Inner())
    views.edge_threads_stop()  # their connections, before the test database is flushed


@pytest.fixture
def hook(alice, fake_api):
    fake_api.route("POST", "/callback", lambda request: (200, {"ok": True}))
    return make_connector(
        alice, "webhook", {"signing_secret": SECRET}, {"callback_url": f"{fake_api.url}/callback"}
    )


def call(app, path, *, method="POST", body=b"", headers=None, chunks=None, host="testserver"):
    """One HTTP request through an ASGI app: (status, headers, body)."""
    raw_headers = [(b"host", host.encode())]
    raw_headers += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    parts = chunks if chunks is not None else [body]
    messages = [
        {"type": "http.request", "body": part, "more_body": index < len(parts) - 1}
        for index, part in enumerate(parts)
    ]
    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "root_path": "",
        "query_string": b"",
        "headers": raw_headers,
    }
    sent: list[dict] = []

    async def receive():
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    start = sent[0]
    return (
        start["status"],
        {k.decode(): v.decode() for k, v in start["headers"]},
        b"".join(m.get("body", b"") for m in sent[1:]),
    )


def signed(event: dict, *, secret: str = SECRET) -> tuple[bytes, dict]:
    body = json.dumps(event).encode()
    ts = str(int(time.time()))
    return body, {
        "Content-Type": "application/json",
        "Content-Length": str(len(body)),
        "X-Cadre-Timestamp": ts,
        "X-Cadre-Signature": sign(secret, ts, body),
    }


def message(event_id="evt-1"):
    return {"event_id": event_id, "type": "message", "text": "hi", "user": {"id": "u-1"}}


def test_signed_event_is_stored_and_acknowledged_without_reaching_django(edge, hook):
    body, headers = signed(message())
    status, response_headers, answer = call(edge, hook.callback_path, body=body, headers=headers)
    assert (status, json.loads(answer)) == (200, {"ok": True})
    assert response_headers["content-type"] == "application/json"
    assert edge.app.paths == []
    event = InboundEvent.objects.get(connector=hook)
    assert (event.event_key, event.sender_id, event.payload["text"]) == ("evt-1", "u-1", "hi")


def test_redelivery_through_the_edge_is_stored_once(edge, hook):
    body, headers = signed(message("evt-twice"))
    first = call(edge, hook.callback_path, body=body, headers=headers)
    second = call(edge, hook.callback_path, body=body, headers=headers)
    assert first[0] == second[0] == 200
    assert InboundEvent.objects.filter(connector=hook).count() == 1


def test_other_paths_go_on_to_django(edge):
    assert call(edge, "/healthz", method="GET")[0] == 204
    assert call(edge, "/connectors/webhook/abc/events/extra")[0] == 204
    assert edge.app.paths == ["/healthz", "/connectors/webhook/abc/events/extra"]


def test_bad_signature_is_401_envelope_and_counted(edge, hook):
    body, headers = signed(message(), secret="not-the-secret")
    status, _, answer = call(edge, hook.callback_path, body=body, headers=headers)
    assert status == 401
    assert json.loads(answer)["error"]["code"] == "signature_invalid"
    assert Connector.objects.get(pk=hook.pk).signature_rejections == 1
    assert not InboundEvent.objects.exists()


def test_missing_signature_is_401_not_500(edge, hook):
    body = json.dumps(message()).encode()
    status, _, answer = call(edge, hook.callback_path, body=body)
    assert status == 401
    assert json.loads(answer)["error"]["code"] == "signature_invalid"


def test_declared_oversized_body_is_413_before_it_is_read(edge, hook):
    async def receive():
        raise AssertionError("the body must not be read")

    scope = {
        "type": "http",
        "method": "POST",
        "path": hook.callback_path,
        "headers": [(b"host", b"testserver"), (b"content-length", str(10**9).encode())],
        "query_string": b"",
    }
    sent: list[dict] = []

    async def send(message):
        sent.append(message)

    asyncio.run(edge(scope, receive, send))
    assert sent[0]["status"] == 413
    assert json.loads(sent[1]["body"])["error"]["code"] == "payload_too_large"


def test_streamed_body_past_the_limit_is_413_without_a_content_length(edge, hook):
    chunk = b"x" * (64 * 1024)
    status, _, answer = call(edge, hook.callback_path, chunks=[chunk] * 5)
    assert status == 413
    assert json.loads(answer)["error"]["details"]["limit"] == 256 * 1024
    assert not InboundEvent.objects.exists()


def test_unknown_connector_platform_or_method_is_404(edge, hook):
    body, headers = signed(message())
    assert call(edge, "/connectors/webhook/no-such-id/events", body=body, headers=headers)[0] == 404
    assert call(edge, f"/connectors/nope/{hook.public_id}/events", body=body)[0] == 404
    assert call(edge, f"/connectors/slack/{hook.public_id}/events", body=body)[0] == 404
    assert call(edge, hook.callback_path, method="PUT", body=body, headers=headers)[0] == 404
    assert not InboundEvent.objects.exists()


def test_disabled_connector_is_404_once_the_cache_expires(edge, hook):
    Connector.objects.filter(pk=hook.pk).update(status="disabled")
    views._connectors.clear()  # what CONNECTOR_CACHE_SECONDS does with time
    body, headers = signed(message())
    assert call(edge, hook.callback_path, body=body, headers=headers)[0] == 404


def test_host_outside_allowed_hosts_is_400(edge, hook):
    body, headers = signed(message())
    status, _, answer = call(edge, hook.callback_path, body=body, headers=headers, host="evil.test")
    assert status == 400
    assert json.loads(answer)["error"]["code"] == "invalid"
    assert not InboundEvent.objects.exists()


def test_edge_event_is_processed_and_answered_once(edge, hook, celery_eager, fake_api):
    body, headers = signed(message("evt-e2e"))
    for _ in range(3):  # the platform retried twice
        assert call(edge, hook.callback_path, body=body, headers=headers)[0] == 200
    event = InboundEvent.objects.get(connector=hook)
    assert (event.status, event.attempts) == ("unmapped", 1)
    assert len(fake_api.calls("/callback")) == 1


def test_edge_asks_for_one_drain_after_answering_several_events(edge, hook):
    from celery.signals import before_task_publish

    from connectors.inbound import drain

    published: list[str] = []

    def count(sender=None, **kwargs):
        if sender == "connectors.tasks.inbound_events_drain":
            published.append(sender)

    drain._drain_flag_clear()
    before_task_publish.connect(count, weak=False)
    try:
        for number in range(3):
            body, headers = signed(message(f"evt-{number}"))
            assert call(edge, hook.callback_path, body=body, headers=headers)[0] == 200
        views.edge_threads_stop()  # waits for the drain requests queued behind the answers
    finally:
        before_task_publish.disconnect(count)
        drain._drain_flag_clear()
    # No drain has started in between (no worker here): one task will see all three.
    assert published == ["connectors.tasks.inbound_events_drain"]
    assert InboundEvent.objects.filter(connector=hook, status="queued").count() == 3


def test_authentic_but_malformed_events_are_400_not_503_through_the_edge(edge, hook):
    """Served as in production (edge threads, real commits): a wrong type is the sender's
    mistake (400), and a NUL in the event is removed before storing, not a database error."""
    body, headers = signed({**message("evt-typed"), "user": "u-1"})
    status, _, answer = call(edge, hook.callback_path, body=body, headers=headers)
    assert (status, json.loads(answer)["error"]["code"]) == (400, "invalid")
    body, headers = signed({**message("evt\x00nul"), "text": "h\x00i \ud800"})
    status, _, answer = call(edge, hook.callback_path, body=body, headers=headers)
    assert status == 200, answer
    event = InboundEvent.objects.get(connector=hook)
    assert (event.event_key, event.payload["text"]) == ("evtnul", "hi \ufffd")
