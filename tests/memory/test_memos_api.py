"""The MemOS-compatible API under /memos/, checked against MemOS cloud's documented shapes
(MemOS-Docs api.json: {code, message, data}; data.memory_detail_list[] with memory_key,
memory_value, relativity, create_time, update_time; preference and tool memory lists): add,
search, get, update, feedback, delete, status, the refusals and another organization."""

from __future__ import annotations

import pytest

from cadre.memory import services
from cadre.memory.models import Memory
from cadre.tenancy.actors import member_actor

pytestmark = pytest.mark.django_db

DETAIL_KEYS = {"id", "memory_key", "memory_value", "create_time", "update_time", "relativity"}


@pytest.fixture
def memos(alice, key_client):
    def make(member=alice, scopes=("memory:read", "memory:write")):
        client = key_client(member, list(scopes))
        client.credentials(HTTP_AUTHORIZATION=f"Token {client.secret}")
        return client

    return make


def _ok(response) -> dict:
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["code"] == 0 and body["message"] == "ok"
    return body["data"]


def _refused(response, status: int) -> dict:
    assert response.status_code == status, response.content
    body = response.json()
    assert body["code"] == status and body["message"] and body["data"] is None
    return body


def test_add_search_get_update_feedback_and_delete(memos, alice):
    client = memos()
    added = _ok(
        client.post(
            "/memos/add/message",
            {
                "user_id": alice.email,
                "conversation_id": "0610",
                "messages": [
                    {"role": "user", "content": "以后周报用英文写"},
                    {"role": "assistant", "content": "好的"},
                ],
                "tags": ["report"],
                "info": {"scene": "weekly"},
                "async_mode": True,
            },
            format="json",
        )
    )
    assert added["success"] is True and added["status"] == "completed"
    memory = Memory.objects.get()
    assert memory.source_ref["client"] == "memos" and memory.source_ref["info"] == {
        "scene": "weekly"
    }
    assert memory.conversation_id == "0610" and memory.scope_key == f"user:{alice.pk}"
    assert _ok(client.post("/memos/get/status", {"task_id": added["task_id"]}))["status"] == (
        "completed"
    )

    found = _ok(
        client.post(
            "/memos/search/memory",
            {"query": "周报 英文", "user_id": alice.email, "memory_limit_number": 5},
            format="json",
        )
    )
    assert {"memory_detail_list", "preference_detail_list", "tool_memory_detail_list"} <= set(found)
    hits = found["memory_detail_list"] + found["preference_detail_list"]
    assert [hit["id"] for hit in hits] == [str(memory.pk)]
    detail = hits[0]
    assert 0 <= detail["relativity"] <= 1
    if memory.kind != "preference":
        assert found["memory_detail_list"] == [detail]
        assert set(detail) >= DETAIL_KEYS and detail["memory_value"] == "以后周报用英文写"
    else:
        assert found["preference_detail_list"] == [detail]
        assert detail["preference"] == "以后周报用英文写"

    listed = _ok(client.post("/memos/get/memory", {"user_id": alice.email}, format="json"))
    assert listed["total"] == 1 and listed["current"] == 1 and listed["pages"] == 1

    updated = _ok(
        client.post(
            "/memos/update/memory",
            {"memory_id": str(memory.pk), "memory_value": "周报用中文写"},
            format="json",
        )
    )
    assert updated["memory_value"] == "周报用中文写"
    memory.refresh_from_db()
    assert memory.content == "周报用中文写" and memory.version == 2

    feedback = _ok(
        client.post(
            "/memos/add/feedback",
            {
                "user_id": alice.email,
                "conversation_id": "0611",
                "feedback_content": "不对，周报用英文写",
            },
            format="json",
        )
    )
    assert feedback["success"] is True

    _ok(client.post("/memos/delete/memory", {"user_id": alice.email}, format="json"))
    assert not Memory.objects.filter(status="active").exists()


@pytest.mark.parametrize(
    ("path", "payload"),
    [
        ("/memos/add/message", {"messages": [{"role": "user", "content": "x"}]}),
        ("/memos/add/message", {"user_id": "alice@acme.test", "messages": []}),
        ("/memos/add/message", {"user_id": "nobody@acme.test", "messages": "x"}),
        ("/memos/add/message", {"user_id": "alice@acme.test", "messages": "x", "tags": "a"}),
        ("/memos/add/message", {"user_id": "alice@acme.test", "messages": "x", "info": []}),
        ("/memos/search/memory", {"user_id": "alice@acme.test"}),
        ("/memos/search/memory", {"query": "x", "user_id": "alice@acme.test", "relativity": 3}),
        ("/memos/search/memory", {"query": "x", "user_id": "a@acme.test", "filter": {"or": []}}),
        (
            "/memos/search/memory",
            {"query": "x", "user_id": "alice@acme.test", "memory_limit_number": 26},
        ),
        ("/memos/get/memory", {"user_id": "alice@acme.test", "size": 51}),
        ("/memos/delete/memory", {}),
        ("/memos/delete/memory", {"memory_ids": ["1"], "user_id": "alice@acme.test"}),
        ("/memos/add/feedback", {"user_id": "alice@acme.test"}),
        ("/memos/get/status", {"task_id": "nope"}),
        ("/memos/update/memory", {"memory_id": "1"}),
    ],
)
def test_bad_requests_get_memos_errors_and_store_nothing(memos, alice, path, payload):
    kept = services.memory_add(
        actor=member_actor(alice),
        scope="user",
        kind="fact",
        content="Alice reviews the budget on Fridays",
        source_kind="user_statement",
    )
    response = memos().post(path, payload, format="json")
    assert response.status_code in (400, 404), response.content
    _refused(response, response.status_code)
    kept.refresh_from_db()
    assert Memory.objects.count() == 1 and (kept.status, kept.version) == ("active", 1)


def test_another_organization_sees_nothing_and_read_only_keys_write_nothing(memos, alice, charlie):
    memory = services.memory_add(
        actor=member_actor(alice),
        scope="user",
        kind="fact",
        content="Alice's door code is on the wiki",
        source_kind="user_statement",
    )
    outsider = memos(charlie)
    found = _ok(
        outsider.post(
            "/memos/search/memory",
            {"query": "door code", "user_id": charlie.email},
            format="json",
        )
    )
    assert found["memory_detail_list"] == [] and found["preference_detail_list"] == []
    _refused(
        outsider.post("/memos/delete/memory", {"memory_ids": [str(memory.pk)]}, format="json"),
        404,
    )
    _refused(
        outsider.post(
            "/memos/search/memory", {"query": "door", "user_id": alice.email}, format="json"
        ),
        400,
    )
    reader = memos(alice, ["memory:read"])
    _refused(
        reader.post("/memos/add/message", {"user_id": alice.email, "messages": "x"}, format="json"),
        403,
    )
    _refused(reader.post("/memos/delete/memory", {"user_id": alice.email}, format="json"), 403)
    _refused(memos().post("/memos/unknown/path", {}, format="json"), 404)
    memory.refresh_from_db()
    assert memory.status == "active" and Memory.objects.count() == 1


def _remember(member, content: str, conversation_id: str) -> Memory:
    return services.memory_add(
        actor=member_actor(member),
        scope="user",
        kind="fact",
        content=content,
        source_kind="user_statement",
        conversation_id=conversation_id,
    )


def test_get_message_returns_what_a_conversation_left_oldest_first(memos, alice, charlie):
    first = _remember(alice, "Alice's budget review is on Fridays", "talk-1")
    second = _remember(alice, "Alice's team meets on Mondays", "talk-1")
    other = _remember(alice, "Alice flies to Berlin in May", "talk-2")
    _remember(charlie, "Charlie's budget review is on Tuesdays", "talk-1")
    client = memos()
    talk = _ok(
        client.post(
            "/memos/get/message",
            {"user_id": alice.email, "conversation_id": "talk-1"},
            format="json",
        )
    )["message_detail_list"]
    assert [message["id"] for message in talk] == [str(first.pk), str(second.pk)]
    assert talk[0]["role"] == "user" and talk[0]["content"] == first.content
    assert talk[0]["conversation_id"] == "talk-1"
    latest = _ok(
        client.post(
            "/memos/get/message",
            {"user_id": alice.email, "conversation_limit_number": 1},
            format="json",
        )
    )["message_detail_list"]
    assert [message["id"] for message in latest] == [str(other.pk)]
    both = _ok(
        client.post(
            "/memos/get/message",
            {"user_id": alice.email, "conversation_limit_number": 2, "message_limit_number": 1},
            format="json",
        )
    )["message_detail_list"]
    assert [message["id"] for message in both] == [str(other.pk), str(second.pk)]
    # Another organization names alice: refused, none of her words in the answer.
    refused = memos(charlie).post(
        "/memos/get/message", {"user_id": alice.email, "conversation_id": "talk-1"}, format="json"
    )
    assert refused.status_code == 400 and "Alice" not in refused.content.decode()
    own = _ok(
        memos(charlie).post(
            "/memos/get/message",
            {"user_id": charlie.email, "conversation_id": "talk-1"},
            format="json",
        )
    )["message_detail_list"]
    assert [message["content"] for message in own] == ["Charlie's budget review is on Tuesdays"]


def test_an_admins_key_reads_none_of_a_colleagues_conversation(memos, alice, make_member):
    """No API key holds `memory.personal` (a person reads others' personal memory, never an
    integration): another owner's key naming alice gets none of her conversation."""
    _remember(alice, "Alice's salary review is in June", "talk-1")
    admin = make_member(roles=("owner",))
    response = memos(admin).post(
        "/memos/get/message", {"user_id": alice.email, "conversation_id": "talk-1"}, format="json"
    )
    assert "salary" not in response.content.decode()
    if response.status_code == 200:
        assert response.json()["data"]["message_detail_list"] == []
    else:
        _refused(response, response.status_code)


def test_update_takes_the_clients_content_field_and_one_memory_is_read_by_id(memos, alice):
    memory = _remember(alice, "Alice's budget review is on Fridays", "talk-1")
    client = memos()
    updated = _ok(
        client.post(
            "/memos/update/memory",
            {"memory_id": str(memory.pk), "content": "Alice's budget review is on Thursdays"},
            format="json",
        )
    )
    assert updated["memory_value"] == "Alice's budget review is on Thursdays"
    one = _ok(client.get(f"/memos/get/memory/{memory.pk}"))
    assert one["id"] == str(memory.pk) and one["memory_value"] == updated["memory_value"]
    _refused(client.get("/memos/get/memory/999999999"), 404)
    _refused(
        client.post(
            "/memos/update/memory",
            {"memory_id": str(memory.pk), "content": "x", "title": "Budget"},
            format="json",
        ),
        400,
    )
    memory.refresh_from_db()
    assert memory.version == 2 and memory.content == updated["memory_value"]


@pytest.mark.parametrize(
    ("path", "payload"),
    [
        ("/memos/create/knowledgebase", {"knowledgebase_name": "Handbook"}),
        ("/memos/delete/knowledgebase", {"knowledgebase_id": "kb-1"}),
        ("/memos/add/knowledgebase-file", {"knowledgebase_id": "kb-1", "file": [{"a": 1}]}),
        ("/memos/get/knowledgebase-file", {"knowledgebase_id": "kb-1"}),
        ("/memos/delete/knowledgebase-file", {"file_ids": ["f-1"]}),
        ("/memos/search/memory", {"query": "x", "user_id": "{email}", "knowledgebase_ids": ["k"]}),
        (
            "/memos/add/message",
            {
                "user_id": "{email}",
                "messages": [{"role": "user", "content": "I prefer tea."}],
                "allow_knowledgebase_ids": ["kb-1"],
            },
        ),
    ],
)
def test_knowledge_bases_are_refused_with_501_and_nothing_is_stored(memos, alice, path, payload):
    payload = {
        key: value.replace("{email}", alice.email) if isinstance(value, str) else value
        for key, value in payload.items()
    }
    body = _refused(memos().post(path, payload, format="json"), 501)
    assert body["error"]["code"] == "knowledgebase_unsupported"
    assert not Memory.objects.exists()


def test_get_status_answers_the_task_id_the_client_validates(memos, alice):
    memory = _remember(alice, "Alice's budget review is on Fridays", "talk-1")
    status = _ok(memos().post("/memos/get/status", {"task_id": f"cadre-{memory.pk}"}))
    assert status == {"task_id": f"cadre-{memory.pk}", "status": "completed"}
