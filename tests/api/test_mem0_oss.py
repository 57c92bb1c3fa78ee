"""Mem0's self-hosted server contract at /mem0/oss/ (cadre.compat.mem0_oss): X-API-Key auth,
labels kept within the key owner's personal memory, Mem0's answer shapes, refusals that store
nothing. The real client (Hermes's provider) is tests/ecosystem/test_hermes_mem0.py."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from cadre.memory import services
from cadre.memory.models import Memory
from cadre.memory.services.common import MAX_PROVENANCE
from cadre.tenancy.actors import member_actor
from tests.refusals import nothing_changes

pytestmark = pytest.mark.django_db

TURN = [{"role": "user", "content": "I prefer green tea in the morning."}]


@pytest.fixture
def hermes(alice, key_client):
    """Alice's key (an owner's), sent as Mem0's self-hosted clients send it."""
    client = key_client(alice, ["memory:read", "memory:write"])
    client.credentials(HTTP_X_API_KEY=client.secret)
    return client


@pytest.fixture
def bobs(bob):
    return services.memory_add(
        actor=member_actor(bob),
        scope="user",
        kind="fact",
        content="Bob prefers green tea too.",
        source_kind="user_statement",
    )


@pytest.fixture
def shared(alice):
    return services.memory_add(
        actor=member_actor(alice),
        scope="organization",
        kind="fact",
        content="Green tea is served on floor 3.",
        source_kind="user_statement",
    )


def _add(client, **body):
    body = {"messages": TURN, "user_id": "hermes-user", "agent_id": "hermes", **body}
    response = client.post("/mem0/oss/memories", body, format="json")
    assert response.status_code == 200, response.content
    return response.json()["results"]


def test_add_lands_in_the_key_owners_personal_memory_with_labels(hermes, alice):
    added = _add(hermes, infer=False, run_id="chat-1", metadata={"channel": "cli"})
    assert [item["event"] for item in added] == ["ADD"]
    memory = Memory.objects.get(pk=added[0]["id"])
    assert memory.scope_key == f"user:{alice.pk}" and memory.conversation_id == "chat-1"
    assert memory.source_ref["user_id"] == "hermes-user"
    assert memory.source_ref["agent_id"] == "hermes" and memory.source_ref["api"] == "oss"
    one = hermes.get(f"/mem0/oss/memories/{memory.pk}").json()
    assert one["memory"] == TURN[0]["content"] and one["user_id"] == "hermes-user"
    assert one["agent_id"] == "hermes" and one["run_id"] == "chat-1"
    assert one["metadata"] == {"channel": "cli"}


def test_a_member_id_or_email_as_user_id_is_only_a_label(hermes, alice, bobs, bob):
    """user_id naming another member (his e-mail, his id) selects nothing of his."""
    for user_id in (bob.email, str(bob.pk)):
        said = [{"role": "user", "content": f"Green tea for label {user_id}."}]
        added = _add(hermes, user_id=user_id, infer=False, messages=said)
        assert Memory.objects.get(pk=added[0]["id"]).scope_key == f"user:{alice.pk}"
        listed = hermes.get(f"/mem0/oss/memories?user_id={user_id}").json()["results"]
        assert bobs.content not in [item["memory"] for item in listed]
        found = hermes.post(
            "/mem0/oss/search",
            {"query": "green tea", "filters": {"user_id": user_id}},
            format="json",
        ).json()["results"]
        assert [hit["id"] for hit in found] == [added[0]["id"]]


def test_search_and_list_reach_only_the_key_owners_personal_memory(hermes, bobs, shared):
    added = _add(hermes, infer=False)
    found = hermes.post("/mem0/oss/search", {"query": "green tea"}, format="json").json()
    assert [hit["id"] for hit in found["results"]] == [added[0]["id"]]
    assert 0 <= found["results"][0]["score"] <= 1
    listed = hermes.get("/mem0/oss/memories").json()["results"]
    assert [item["id"] for item in listed] == [added[0]["id"]]
    other_label = hermes.post(
        "/mem0/oss/search", {"query": "green tea", "filters": {"agent_id": "other"}}, format="json"
    ).json()
    assert other_label == {"results": []}
    # Another member's memory and a shared one are not there by id either: 404, unchanged.
    for memory in (bobs, shared):
        with nothing_changes(memory, Memory, audit=False):
            for call in (
                hermes.get(f"/mem0/oss/memories/{memory.pk}"),
                hermes.get(f"/mem0/oss/memories/{memory.pk}/history"),
                hermes.put(f"/mem0/oss/memories/{memory.pk}", {"text": "x"}, format="json"),
                hermes.delete(f"/mem0/oss/memories/{memory.pk}"),
            ):
                assert call.status_code == 404 and call.json()["detail"]


def test_update_history_and_delete(hermes, alice):
    memory_id = _add(hermes, infer=False)[0]["id"]
    response = hermes.put(
        f"/mem0/oss/memories/{memory_id}", {"text": "I prefer black tea."}, format="json"
    )
    assert response.json() == {"message": "Memory updated successfully!"}
    history = hermes.get(f"/mem0/oss/memories/{memory_id}/history").json()
    assert history[0]["event"] == "ADD" and history[0]["memory_id"] == memory_id
    assert Memory.objects.get(scope_key=f"user:{alice.pk}", status="active").content == (
        "I prefer black tea."
    )
    current = Memory.objects.get(scope_key=f"user:{alice.pk}", status="active")
    gone = hermes.delete(f"/mem0/oss/memories/{current.pk}")
    assert gone.json() == {"message": "Memory deleted successfully"}
    assert not Memory.objects.filter(scope_key=f"user:{alice.pk}", status="active").exists()


def test_delete_all_by_label_only_touches_that_label(hermes, alice, bobs):
    _add(hermes, infer=False, agent_id="hermes")
    keep = _add(hermes, infer=False, agent_id="other", messages=[{"role": "user", "content": "x"}])
    refused = hermes.delete("/mem0/oss/memories")
    assert refused.status_code == 400
    response = hermes.delete("/mem0/oss/memories?agent_id=hermes")
    assert response.json() == {"message": "All relevant memories deleted"}
    active = Memory.objects.filter(scope_key=f"user:{alice.pk}", status="active")
    assert [str(pk) for pk in active.values_list("pk", flat=True)] == [keep[0]["id"]]
    bobs.refresh_from_db()
    assert bobs.status == Memory.Status.ACTIVE


def test_bearer_and_x_api_key_both_work_and_a_bad_key_is_401(alice, key_client):
    client = key_client(alice, ["memory:read"])
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {client.secret}")
    assert client.get("/mem0/oss/memories").status_code == 200
    client.credentials(HTTP_X_API_KEY=client.secret)
    assert client.get("/mem0/oss/memories").status_code == 200
    # A read-only key cannot write.
    with nothing_changes(Memory, audit=False):
        assert (
            client.post("/mem0/oss/memories", {"messages": TURN, "user_id": "u"}).status_code == 403
        )
    client.credentials(HTTP_X_API_KEY="cadre_00000000_wrong")
    with nothing_changes(Memory, audit=False):
        response = client.post(
            "/mem0/oss/memories", {"messages": TURN, "user_id": "u"}, format="json"
        )
    assert response.status_code == 401 and response.json()["detail"]


@pytest.mark.parametrize(
    "path", ["/mem0/oss/configure", "/mem0/oss/reset", "/mem0/oss/generate-instructions"]
)
def test_server_configuration_and_reset_are_refused(hermes, path):
    _add(hermes, infer=False)
    with nothing_changes(Memory, audit=False):
        response = hermes.post(path, {"llm": {"provider": "openai"}}, format="json")
    assert response.status_code == 501
    assert response.json()["error"]["code"] == "not_supported" and response.json()["detail"]
    assert hermes.get("/mem0/oss/configure/providers").status_code == 501


HOSTILE = [
    b'{"messages": [{"role": "user", "content": "tea\\u0000"}], "user_id": "u"}',
    b'{"messages": [{"role": "user", "content": "\\ud800"}], "user_id": "u"}',
    b'{"messages": [{"role": "user", "content": "tea"}], "user_id": "u", "x": '
    + b"[" * 200
    + b"]" * 200
    + b"}",
    b'{"messages": [{"role": "user", "content": "tea"}], "user_id": "u", "top_k": 1e309}',
    b'{"messages": [{"role": "user", "content": "tea"}], "user_id": "\\u0000"}',
]
BAD_ADD = [
    b'{"messages": [{"role": "user", "content": "tea"}]}',
    b'{"messages": "tea", "user_id": "u"}',
    b'{"messages": [{"role": "user", "content": "tea"}], "user_id": "u", "prompt": "x"}',
    b'{"messages": [{"role": "user", "content": "tea"}], "user_id": "u", "metadata": [1]}',
    # Metadata is kept with the memory: one request may not grow it past an attribute's size.
    b'{"messages": [{"role": "user", "content": "I prefer green tea."}], "user_id": "u", '
    + b'"metadata": {"blob": "'
    + b"x" * 40_000
    + b'"}}',
]


@pytest.mark.parametrize("raw", HOSTILE + BAD_ADD)
def test_hostile_input_is_a_4xx_and_stores_nothing(hermes, raw):
    with nothing_changes(Memory, audit=False):
        response = hermes.post("/mem0/oss/memories", raw, content_type="application/json")
    assert 400 <= response.status_code < 500 and response.json()["detail"], response.content


@pytest.mark.parametrize("raw", HOSTILE)
def test_hostile_search_is_a_4xx(hermes, raw):
    raw = raw.replace(b'{"messages"', b'{"query": "tea", "messages"')
    with nothing_changes(Memory, audit=False):
        response = hermes.post("/mem0/oss/search", raw, content_type="application/json")
    assert 400 <= response.status_code < 500 and response.json()["detail"], response.content


def test_a_query_string_with_nul_is_refused(hermes):
    response = hermes.get("/mem0/oss/memories?user_id=a%00b")
    assert response.status_code == 400


def test_answers_match_the_declared_schema(client, hermes):
    import jsonschema

    document = client.get("/mem0/openapi.json").json()

    def check(path, method, body, status="200"):
        declared = document["paths"][path][method]["responses"][status]["content"]
        schema = {**declared["application/json"]["schema"], "components": document["components"]}
        jsonschema.validate(body, schema)

    added = hermes.post(
        "/mem0/oss/memories",
        {"messages": TURN, "user_id": "u", "agent_id": "hermes", "metadata": {"a": 1}},
        format="json",
    ).json()
    check("/oss/memories", "post", added)
    memory_id = added["results"][0]["id"]
    check("/oss/memories", "get", hermes.get("/mem0/oss/memories?user_id=u").json())
    found = hermes.post("/mem0/oss/search", {"query": "green tea"}, format="json").json()
    check("/oss/search", "post", found)
    check("/oss/memories/{memory_id}", "get", hermes.get(f"/mem0/oss/memories/{memory_id}").json())
    history = hermes.get(f"/mem0/oss/memories/{memory_id}/history").json()
    check("/oss/memories/{memory_id}/history", "get", history)
    refused = hermes.post("/mem0/oss/reset", {}, format="json")
    check("/oss/reset", "post", refused.json(), "501")
    check("/oss/memories", "delete", hermes.delete("/mem0/oss/memories?user_id=u").json())


def test_a_sentence_sent_again_and_again_keeps_a_bounded_provenance(hermes):
    """Each write of the same words is merged into one memory, which keeps where the first and
    the latest writes came from (the history keeps every merge), not an ever-growing list."""
    blob = {"note": "y" * 20_000}
    ids = {_add(hermes, infer=infer, metadata=blob)[0]["id"] for infer in [False] * 24 + [True]}
    memory = Memory.objects.get(pk=ids.pop())
    assert not ids  # one memory
    assert len(memory.provenance) == MAX_PROVENANCE
    assert memory.provenance[0]["memory_id"] == memory.pk  # its own first source is kept
    assert memory.versions.filter(change="merge").count() == 24


@pytest.mark.parametrize(
    ("path", "body", "auth"),
    [
        ("/mem0/oss/memories", {"user_id": "hermes-user", "agent_id": "hermes"}, "X_API_KEY"),
        ("/mem0/v1/memories/", {"timestamp": 1767225600}, "AUTHORIZATION"),  # 2026-01-01 UTC
    ],
)
def test_expiration_date_and_timestamp_apply_to_extracted_memories_too(
    alice, key_client, path, body, auth
):
    client = key_client(alice, ["memory:read", "memory:write"])
    client.credentials(
        **{f"HTTP_{auth}": client.secret if auth == "X_API_KEY" else f"Token {client.secret}"}
    )
    response = client.post(
        path,
        {"user_id": alice.email, **body, "messages": TURN, "expiration_date": "2030-05-01"},
        format="json",
    )
    assert response.status_code == 200, response.content
    [result] = response.json()["results"]
    memory = Memory.objects.get(pk=result["id"])
    assert memory.attributes["extracted_by"] == "rules"  # infer (the default): extracted
    assert memory.expires_at == datetime(2030, 5, 2, tzinfo=UTC)  # kept through 1 May, UTC
    if "timestamp" in body:
        assert memory.observed_at == datetime(2026, 1, 1, tzinfo=UTC)
