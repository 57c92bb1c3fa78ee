"""The request body limit holds on the bytes received, against a real server: uvicorn serving
`cadre.asgi:application` on loopback. A chunked body (no Content-Length) over the limit is 413
with the error envelope and stores nothing; under it the request works; a body longer than its
Content-Length never reaches a view."""

from __future__ import annotations

import asyncio
import http.client
import json
import socket

import pytest
from django.test import override_settings

from cadre.tenancy import services
from cadre.tenancy.actors import member_actor
from cadre.tenancy.models import Department

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

LIMIT = 4096


@pytest.fixture(autouse=True)
def _small_body_limit():
    with override_settings(CADRE_MAX_BODY_BYTES=LIMIT):
        yield


@pytest.fixture
def token(alice):
    _, secret = services.api_key_create(
        actor=member_actor(alice), name="body limit", scopes=["org:read", "org:write"]
    )
    return secret


def _department(name: str, padding: int) -> bytes:
    return json.dumps({"name": name, "description": "y" * padding}).encode()


def _chunked_post(address, token: str, body: bytes, chunk: int = 1000):
    connection = http.client.HTTPConnection(*address, timeout=15)
    parts = (body[i : i + chunk] for i in range(0, len(body), chunk))
    connection.request(
        "POST",
        "/api/v1/departments/",
        body=parts,
        headers={
            "Host": "testserver",
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
        },
        encode_chunked=True,
    )
    response = connection.getresponse()
    answer = (response.status, json.loads(response.read() or b"{}"))
    connection.close()
    return answer


def test_a_chunked_body_over_the_limit_is_413_and_stores_nothing(uvicorn_server, token):
    status, answer = _chunked_post(uvicorn_server, token, _department("Too big", LIMIT * 3))
    assert status == 413
    assert answer["error"]["code"] == "payload_too_large"
    assert answer["error"]["details"]["limit"] == LIMIT
    assert not Department.objects.filter(name="Too big").exists()


def test_a_chunked_body_under_the_limit_works(uvicorn_server, token):
    status, answer = _chunked_post(uvicorn_server, token, _department("Chunked", LIMIT // 2))
    assert status == 201, answer
    assert Department.objects.get(name="Chunked").description == "y" * (LIMIT // 2)


def test_a_content_length_smaller_than_the_body_is_refused(uvicorn_server, token):
    # The server takes the declared 20 bytes as the body (cut JSON) and the rest as a next
    # request that does not parse: uvicorn drops the connection (or answers 400). Nothing is
    # stored either way; the ASGI-level test below covers a server that hands more bytes on.
    body = _department("Liar", LIMIT * 2)
    head = (
        "POST /api/v1/departments/ HTTP/1.1\r\nHost: testserver\r\n"
        f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
        "Content-Length: 20\r\nConnection: close\r\n\r\n"
    ).encode()
    with socket.create_connection(uvicorn_server, timeout=15) as client:
        client.sendall(head + body)
        client.shutdown(socket.SHUT_WR)
        received = b""
        while chunk := client.recv(65536):
            received += chunk
    assert received == b"" or received.startswith(b"HTTP/1.1 400"), received[:200]
    assert not Department.objects.filter(name="Liar").exists()


def _asgi_call(app, body_messages: list[bytes], headers: list[tuple[bytes, bytes]]):
    """One request straight into the ASGI application, as a server that does not enforce
    Content-Length framing would deliver it: (status, JSON answer)."""
    messages = [
        {"type": "http.request", "body": part, "more_body": index < len(body_messages) - 1}
        for index, part in enumerate(body_messages)
    ]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/api/v1/departments/",
        "raw_path": b"/api/v1/departments/",
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"testserver"), *headers],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 80),
    }
    sent: list[dict] = []

    async def receive():
        if messages:
            return messages.pop(0)
        await asyncio.sleep(3600)  # the client stays connected until the answer

    async def send(message):
        sent.append(message)

    async def run():
        task = asyncio.ensure_future(app(scope, receive, send))
        while not any(m.get("type") == "http.response.body" for m in sent):
            await asyncio.sleep(0.01)
        task.cancel()

    asyncio.run(asyncio.wait_for(run(), timeout=30))
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return sent[0]["status"], json.loads(body or b"{}")


def test_a_body_longer_than_its_content_length_never_reaches_a_view(token):
    from cadre.asgi import application

    body = json.dumps({"name": "Smuggled"}).encode()
    headers = [
        (b"authorization", f"Bearer {token}".encode()),
        (b"content-type", b"application/json"),
        (b"content-length", b"2"),
    ]
    status, answer = _asgi_call(application, [body], headers)
    assert status == 400 and answer["error"]["code"] == "invalid"
    assert not Department.objects.filter(name="Smuggled").exists()


def test_a_chunked_body_over_the_limit_is_413_straight_into_asgi(token):
    from cadre.asgi import application

    headers = [(b"authorization", f"Bearer {token}".encode()), (b"content-type", b"text/plain")]
    with override_settings(CADRE_MAX_BODY_BYTES=LIMIT):
        status, answer = _asgi_call(application, [b"x" * 1000] * 10, headers)
    assert status == 413 and answer["error"]["code"] == "payload_too_large"
