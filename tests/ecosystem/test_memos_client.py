# ruff: noqa: F811 - the live server fixture imported below is a parameter here
"""Cadre's /memos/ driven by MemTensor's own MemOS client: `memos.api.client.MemOSClient` from
PyPI `MemoryOS` 2.0.33 (github.com/MemTensor/MemOS, src/memos/api/client.py; its answers are
validated by the same package's pydantic models in src/memos/api/product_models.py), pointed at
a live Cadre with a Cadre API key.

MemoryOS pins openai<2 and transformers<5, which Cadre's own environment has newer, so the
client runs from a virtualenv of its own (tests/ecosystem/memos/.venv, made by
`make test-tools`) through tests/ecosystem/memos/drive_client.py: each call is the client's
method as a MemOS user writes it, and a refusal is the exception the client raises (after its
own three retries) with Cadre's answer."""

from __future__ import annotations

from pathlib import Path

import pytest

from cadre.memory.models import Memory
from tests.ecosystem.venv_client import VenvClient, memory_key
from tests.live_server import live_server_url  # noqa: F401 - fixture: uvicorn on loopback

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

MEMOS = VenvClient(
    folder=Path(__file__).parent / "memos",
    title="MemTensor's MemOS client",
    requirement="MemoryOS==2.0.33",
    driver="drive_client.py",
    own_variables=("MEMOS_", "CUSTOM_LOGGER_"),
)


def _drive(base_url: str, secret: str, calls: list, home: Path) -> list[dict]:
    # The client's logger writes under MEMOS_BASE_PATH/.memos.
    return MEMOS.run(
        calls, home=home, args=(f"{base_url}/memos", secret), MEMOS_BASE_PATH=str(home)
    )


@pytest.fixture
def secret(alice):
    return memory_key(alice, "memos")


def test_the_memos_client_adds_finds_lists_updates_and_deletes(
    alice, secret, live_server_url, tmp_path
):
    who = {"user_id": alice.email}
    added, status_wrong, *_ = _drive(
        live_server_url,
        secret,
        [
            [
                "add_message",
                {
                    **who,
                    "conversation_id": "weekly-0610",
                    "messages": [
                        {"role": "user", "content": "I prefer my weekly reports in English."},
                        {"role": "assistant", "content": "Noted."},
                    ],
                    "tags": ["report"],
                    "info": {"scene": "weekly"},
                },
            ],
            ["get_task_status", {"task_id": "cadre-999999999"}],
        ],
        tmp_path,
    )
    assert added["ok"]["code"] == 0 and added["ok"]["data"]["success"] is True
    memory = Memory.objects.get(scope_key=f"user:{alice.pk}", status="active")
    assert "weekly reports in English" in memory.content
    assert memory.conversation_id == "weekly-0610" and memory.source_ref["client"] == "memos"
    assert memory.source_ref["info"] == {"scene": "weekly"} and memory.tags == ["report"]
    assert status_wrong["status"] == 404 and status_wrong["body"]["code"] == 404

    task_id = added["ok"]["data"]["task_id"]
    status, found, listed, one, history, elsewhere = _drive(
        live_server_url,
        secret,
        [
            ["get_task_status", {"task_id": task_id}],
            ["search_memory", {**who, "query": "weekly report language"}],
            ["get_memory", {**who, "page": 1, "size": 10}],
            ["get_memory_by_id", {"memid": str(memory.pk)}],
            ["get_message", {**who, "conversation_id": "weekly-0610"}],
            ["get_message", {**who, "conversation_id": "another-talk"}],
        ],
        tmp_path,
    )
    # The client's GetTaskStatusData requires the task id back (it failed validation before).
    assert status["ok"]["data"] == {"task_id": task_id, "status": "completed", "memory_views": None}
    data = found["ok"]["data"]
    hits = data["memory_detail_list"] + (data["preference_detail_list"] or [])
    assert [hit["id"] for hit in hits] == [str(memory.pk)]
    assert 0 <= hits[0]["relativity"] <= 1
    assert listed["ok"]["data"]["total"] == 1 and listed["ok"]["data"]["current"] == 1
    assert one["ok"]["code"] == 0 and one["ok"]["data"]["id"] == str(memory.pk)
    messages = history["ok"]["data"]["message_detail_list"]
    assert [message["id"] for message in messages] == [str(memory.pk)]
    assert messages[0]["content"] == memory.content and messages[0]["role"] == "user"
    assert messages[0]["conversation_id"] == "weekly-0610"
    assert elsewhere["ok"]["data"]["message_detail_list"] == []

    updated, feedback, deleted = _drive(
        live_server_url,
        secret,
        [
            # The client sends `content` (MemOS's docs say memory_value): both are taken.
            ["update_memory", {"memory_id": str(memory.pk), "content": "Weekly reports: English."}],
            [
                "add_feedback",
                {
                    **who,
                    "conversation_id": "weekly-0611",
                    "feedback_content": "Wrong: weekly reports are in Chinese now.",
                },
            ],
            ["delete_memory", {"memory_ids": [str(memory.pk)]}],
        ],
        tmp_path,
    )
    assert updated["ok"]["code"] == 0 and updated["ok"]["data"]["memory_value"] == (
        "Weekly reports: English."
    )
    assert feedback["ok"]["data"]["success"] is True
    assert deleted["ok"]["data"]["success"] is True
    memory.refresh_from_db()
    assert memory.content == "Weekly reports: English." and memory.status != "active"


def test_the_memos_client_lists_and_searches_by_agent_id_alone(
    alice, secret, live_server_url, tmp_path
):
    """The client sends exactly one of user_id and agent_id to search and list (Cadre asked
    for user_id before): an agent id of someone else's, or none at all, finds nothing."""
    results = _drive(
        live_server_url,
        secret,
        [
            ["search_memory", {"agent_id": "999999", "query": "anything"}],
            ["get_memory", {"agent_id": "999999"}],
        ],
        tmp_path,
    )
    for result in results:
        assert "ok" in result or result["status"] in (403, 404), result
        if "ok" in result:
            assert result["ok"]["data"]["memory_detail_list"] == []


def test_knowledge_bases_are_refused_with_a_code_and_store_nothing(
    alice, secret, live_server_url, tmp_path
):
    source = tmp_path / "handbook.md"
    source.write_text("# Handbook\nReports are due on Friday.\n")
    before = Memory.objects.count()
    results = _drive(
        live_server_url,
        secret,
        [
            ["create_knowledgebase", {"knowledgebase_name": "handbook"}],
            ["delete_knowledgebase", {"knowledgebase_id": "kb-1"}],
            [
                "add_knowledgebase_file_json",
                {"knowledgebase_id": "kb-1", "file": [{"name": "a.md"}]},
            ],
            ["add_knowledgebase_file_form", {"knowledgebase_id": "kb-1", "files": [str(source)]}],
            ["get_knowledgebase_file", {"knowledgebase_id": "kb-1"}],
            ["delete_knowledgebase_file", {"file_ids": ["f-1"]}],
            ["search_memory", {"user_id": alice.email, "query": "x", "knowledgebase_ids": ["kb"]}],
            [
                "add_message",
                {
                    "user_id": alice.email,
                    "messages": [{"role": "user", "content": "I prefer tea."}],
                    "allow_knowledgebase_ids": ["kb-1"],
                },
            ],
        ],
        tmp_path,
    )
    for result in results:
        assert result["error"] == "HTTPError" and result["status"] == 501, result
        assert result["body"]["code"] == 501 and result["body"]["data"] is None
        assert result["body"]["error"]["code"] == "knowledgebase_unsupported"
    assert Memory.objects.count() == before


def test_hostile_input_through_the_client_is_a_4xx_and_stores_nothing(
    alice, secret, live_server_url, tmp_path
):
    """What the client itself serializes: NUL and a lone surrogate (json.dumps escapes them),
    nesting, and infinity (json.dumps writes `Infinity`, which is not JSON)."""
    deep: dict = {}
    for _ in range(300):
        deep = {"a": deep}
    results = _drive(
        live_server_url,
        secret,
        [
            [
                "add_message",
                {"user_id": alice.email, "messages": [{"role": "user", "content": "a\x00b"}]},
            ],
            [
                "add_message",
                {"user_id": alice.email, "messages": [{"role": "user", "content": "\udc00"}]},
            ],
            [
                "add_message",
                {
                    "user_id": alice.email,
                    "messages": [{"role": "user", "content": "ok"}],
                    "info": deep,
                },
            ],
            ["get_message", {"user_id": alice.email, "conversation_id": "c\x00"}],
            [
                "get_message",
                {
                    "user_id": alice.email,
                    "conversation_id": "c",
                    "message_limit_number": float("inf"),
                },
            ],
            ["search_memory", {"user_id": alice.email, "query": "x", "relativity": float("inf")}],
        ],
        tmp_path,
    )
    for result in results:
        assert result["error"] == "HTTPError" and 400 <= result["status"] < 500, result
        assert result["status"] not in (401, 403)
        body = result["body"]
        assert body["code"] == result["status"] and body["error"]["code"], body
    assert not Memory.objects.exists()
