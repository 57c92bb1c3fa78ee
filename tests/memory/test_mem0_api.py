"""The Mem0-compatible API's refusals: bad input, missing key scopes, unknown users and
paths answer Mem0's error shape (`detail`, with Cadre's envelope) and store nothing."""

from __future__ import annotations

import pytest

from cadre.memory import services
from cadre.memory.models import Memory
from cadre.tenancy.actors import member_actor

pytestmark = pytest.mark.django_db


@pytest.fixture
def mem0_client(alice, key_client):
    def make(scopes=("memory:read", "memory:write")):
        client = key_client(alice, list(scopes))
        client.credentials(HTTP_AUTHORIZATION=f"Token {client.secret}")
        return client

    return make


def _refused(response, status: int) -> dict:
    assert response.status_code == status, response.content
    body = response.json()
    assert body["detail"] == body["error"]["message"] and body["detail"]
    return body


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"user_id": "alice@acme.test"}, "messages"),
        ({"user_id": "alice@acme.test", "messages": []}, "messages"),
        ({"user_id": "alice@acme.test", "messages": [{"role": "user", "content": 5}]}, "messages"),
        ({"user_id": "alice@acme.test", "messages": "hi", "infer": "yes"}, "infer"),
        ({"user_id": "alice@acme.test", "messages": "hi", "metadata": "x"}, "metadata"),
        ({"user_id": "alice@acme.test", "messages": "hi", "timestamp": "noon"}, "timestamp"),
        ({"user_id": "alice@acme.test", "messages": "hi", "expiration_date": "soon"}, None),
        ({"messages": "I like tea"}, "user_id"),
        ({"user_id": "nobody@acme.test", "messages": "I like tea"}, "user_id"),
        ({"agent_id": "helper", "messages": "I like tea"}, "agent_id"),
        ({"messages": "hi", "filters": {"OR": [{"user_id": "alice@acme.test"}]}}, "filters"),
        ({"messages": "hi", "filters": {"created_at": {"gte": "2026-01-01"}}}, "filters"),
    ],
)
def test_bad_adds_are_400_and_store_nothing(mem0_client, payload, field):
    for path in ("/mem0/v3/memories/add/", "/mem0/v1/memories/"):
        body = _refused(mem0_client().post(path, payload, format="json"), 400)
        if field:
            assert field in body["error"]["details"]
    assert not Memory.objects.exists()


def test_an_unknown_user_is_named_in_the_error(mem0_client):
    body = _refused(
        mem0_client().post(
            "/mem0/v3/memories/add/",
            {"user_id": "nobody@acme.test", "messages": "x"},
            format="json",
        ),
        400,
    )
    assert body["error"]["code"] == "unknown_user" and "nobody@acme.test" in body["detail"]


def test_a_read_only_key_cannot_add_update_or_delete(mem0_client, alice):
    memory = services.memory_add(
        actor=member_actor(alice),
        scope="user",
        kind="fact",
        content="Alice keeps the release notes",
        source_kind="user_statement",
    )
    client = mem0_client(["memory:read"])
    _refused(
        client.post(
            "/mem0/v3/memories/add/", {"user_id": alice.email, "messages": "x"}, format="json"
        ),
        403,
    )
    _refused(client.put(f"/mem0/v1/memories/{memory.pk}/", {"text": "y"}, format="json"), 403)
    _refused(client.delete(f"/mem0/v1/memories/{memory.pk}/"), 403)
    _refused(client.delete(f"/mem0/v1/memories/?user_id={alice.email}"), 403)
    _refused(client.post("/mem0/v1/feedback/", {"memory_id": memory.pk}, format="json"), 403)
    # reads work: search and list are POSTs that change nothing
    assert client.post("/mem0/v3/memories/search/", {"query": "release notes"}).status_code == 200
    assert client.post("/mem0/v3/memories/", {}, format="json").json()["count"] == 1
    memory.refresh_from_db()
    assert (memory.content, memory.version, memory.status) == (
        "Alice keeps the release notes",
        1,
        "active",
    )
    assert Memory.objects.count() == 1


def test_a_key_without_memory_scopes_and_no_key_are_refused(mem0_client, client):
    _refused(mem0_client(["org:read"]).get("/mem0/v1/ping/"), 403)
    _refused(client.get("/mem0/v1/ping/"), 401)
    _refused(client.get("/mem0/v1/ping/", HTTP_AUTHORIZATION="Token cadre_nope"), 401)


@pytest.mark.parametrize(
    "payload",
    [{}, {"query": "  "}, {"query": "x", "top_k": 0}, {"query": "x", "threshold": 2}],
)
def test_bad_searches_are_400(mem0_client, payload):
    _refused(mem0_client().post("/mem0/v3/memories/search/", payload, format="json"), 400)


def test_bad_updates_deletes_and_unknown_paths(mem0_client, alice):
    memory = services.memory_add(
        actor=member_actor(alice),
        scope="user",
        kind="fact",
        content="Alice's laptop is a ThinkPad",
        source_kind="user_statement",
    )
    client = mem0_client()
    _refused(client.put(f"/mem0/v1/memories/{memory.pk}/", {}, format="json"), 400)
    _refused(client.put(f"/mem0/v1/memories/{memory.pk}/", {"text": 3}, format="json"), 400)
    _refused(client.get("/mem0/v1/memories/not-a-number/"), 404)
    _refused(client.delete("/mem0/v1/memories/"), 400)  # delete_all needs a filter
    _refused(client.post("/mem0/v1/feedback/", {"memory_id": memory.pk, "feedback": "MEH"}), 400)
    _refused(client.post("/mem0/v3/memories/add/", [1, 2], format="json"), 400)
    _refused(client.get("/mem0/v1/no-such-path/"), 404)
    _refused(client.get("/mem0/v1/memories/", {"page_size": 1000, "user_id": alice.email}), 400)
    memory.refresh_from_db()
    assert memory.status == "active" and memory.version == 1
