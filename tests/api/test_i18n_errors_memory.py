# ruff: noqa: E501 - the table of cases reads best one case a line
"""Errors and answers of memory, agents, skills, the MCP server and the Mem0/MemOS-compatible
APIs speak the caller's language (issue #33): the same bad request answered with
`Accept-Language: zh-CN` has the same status and code and a Chinese message; without it, the
English one. The compatible APIs keep their wire format (Mem0's `detail`, MemOS's
`{code, message, data}`): only the human message changes."""

from __future__ import annotations

import json
import re

import pytest
from rest_framework.test import APIClient

from cadre.mcp_server import server as mcp_server
from cadre.mcp_server import tools as mcp_tools
from cadre.observability import RequestContext
from cadre.skills import drafting
from cadre.tenancy import services as tenancy
from cadre.tenancy.actors import member_actor

pytestmark = pytest.mark.django_db

CHINESE = re.compile(r"[\u4e00-\u9fff]")
ZH = {"HTTP_ACCEPT_LANGUAGE": "zh-CN,zh;q=0.9"}
ALL_SCOPES = ["memory:read", "memory:write", "hub:read", "agents:run"]


def _answer(response) -> tuple[int, str | int | None, str]:
    """(status, code, message) of an answer in any of the three shapes."""
    body = response.json()
    if "error" in body and isinstance(body["error"], dict):
        code = body["error"]["code"]
        message = body["error"]["message"]
        if "detail" in body:  # Mem0: the client reads `detail`
            assert body["detail"] == message
        if "data" in body:  # MemOS: {code, message, data}
            assert body["message"] == message
        return response.status_code, code, message
    return response.status_code, body.get("code"), body.get("message") or body.get("detail")


def _call(client, method, path, body, **headers):
    if body is None:
        return getattr(client, method)(path, **headers)
    return getattr(client, method)(
        path, data=json.dumps(body), content_type="application/json", **headers
    )


# (who, method, path, body, status, code, an English phrase of the message); who: "key" an API
# key of alice (an owner) with the memory, Hub and agents scopes, "session" alice signed in,
# "anyone" no credentials.
CASES = [
    # memory
    ("key", "get", "/api/v1/memories/999999999/", None, 404, "not_found", "Memory not found"),
    ("key", "post", "/api/v1/memories/", {"scope": "organization"}, 400, "invalid", "'content' or 'messages'"),
    ("key", "get", "/api/v1/memories/999999999/deletion/", None, 404, "not_found", "Memory not found"),
    # agents
    ("session", "post", "/api/v1/model-providers/", {"name": "p", "kind": "nope"}, 400, None, None),
    ("session", "put", "/api/v1/evaluation/gates/", [1], 400, "invalid_gates", "object of gates"),
    ("session", "put", "/api/v1/evaluation/gates/", {"nope": True}, 400, "unknown_gate", "Unknown gates"),
    ("anyone", "post", "/api/v1/triggers/999999999/events/", {"event_id": "e"}, 404, "not_found", "No such trigger"),
    # skills
    ("session", "get", "/api/v1/skills/candidates/999999999/", None, 404, None, None),
    ("session", "get", "/api/v1/skills/proposals/999999999/", None, 404, None, None),
    # Mem0-compatible
    ("key", "post", "/mem0/v1/memories/search/", {"query": ""}, 400, "invalid", "query must be"),
    ("key", "get", "/mem0/v9/nothing/", None, 404, "not_found", "does not serve"),
    ("key", "post", "/mem0/v1/memories/", {"messages": []}, 400, "invalid", "Give user_id or agent_id"),
    ("key", "post", "/mem0/v1/memories/search/", {"query": "tea", "filters": {"colour": "red"}}, 400, "unsupported_filter", "Unsupported filter"),
    # MemOS-compatible
    ("key", "post", "/memos/get/status", {"task_id": "x"}, 400, "invalid", "Unknown task_id"),
    ("key", "post", "/memos/search/memory", {"query": "tea"}, 400, "invalid", "user_id or agent_id is required"),
    ("key", "post", "/memos/nowhere", {}, 404, "not_found", "does not serve"),
]  # fmt: skip


@pytest.fixture
def owner_key(alice, key_client):
    return key_client(alice, ALL_SCOPES)


@pytest.mark.parametrize(
    "who, method, path, body, status, code, english",
    CASES,
    ids=[f"{case[1]} {case[2]} {json.dumps(case[3])[:30]}" for case in CASES],
)
def test_the_same_error_in_english_and_in_chinese(
    alice, key_client, client_for, who, method, path, body, status, code, english
):
    client = {
        "key": lambda: key_client(alice, ALL_SCOPES),
        "session": lambda: client_for(alice),
        "anyone": APIClient,
    }[who]()
    en_status, en_code, en_message = _answer(_call(client, method, path, body))
    zh_status, zh_code, zh_message = _answer(_call(client, method, path, body, **ZH))
    assert en_status == zh_status, (en_message, zh_message)
    if status is not None:
        assert en_status == status, en_message
    if code is not None:
        assert en_code == code, en_message
    assert en_code == zh_code
    assert not CHINESE.search(en_message), en_message
    if english:
        assert english in en_message
    assert CHINESE.search(zh_message), zh_message
    assert zh_message != en_message


def test_the_member_preference_speaks_without_the_header(alice, key_client):
    alice.language = "zh-hans"
    alice.save(update_fields=["language"])
    client = key_client(alice, ALL_SCOPES)
    status, code, message = _answer(client.get("/api/v1/memories/999999999/"))
    assert (status, code, message) == (404, "not_found", "未找到该记忆。")
    status, code, message = _answer(
        _call(client, "post", "/mem0/v1/memories/search/", {"query": ""})
    )
    assert (status, code) == (400, "invalid") and CHINESE.search(message)


def test_a_missing_scope_is_refused_in_chinese(alice, key_client):
    client = key_client(alice, ["hub:read"])
    en = _answer(client.get("/api/v1/memories/"))
    zh = _answer(client.get("/api/v1/memories/", **ZH))
    assert en[:2] == zh[:2] == (403, "permission_denied")
    assert "'memory:read'" in en[2] and "'memory:read'" in zh[2] and CHINESE.search(zh[2])


def test_a_plain_session_answer_of_mem0_is_chinese(alice, key_client):
    client = key_client(alice, ALL_SCOPES)
    from cadre.memory import services as memory_services

    memory = memory_services.memory_add(
        actor=member_actor(alice),
        content="Alice likes green tea",
        scope="user",
        kind="preference",
        source_kind="user_statement",
    )
    response = client.delete(f"/mem0/v1/memories/{memory.pk}/", **ZH)
    assert response.status_code == 200, response.content
    assert response.json()["message"] == "记忆已删除！"


# --- the MCP server -----------------------------------------------------------------------


@pytest.fixture
def _connections_kept(monkeypatch):
    """The test's transaction holds the connection the tool call would give back."""
    monkeypatch.setattr(mcp_server, "close_old_connections", lambda: None)


def _mcp_refusal(key_id: int, accept_language: str, fn, arguments: dict) -> dict:
    origin = RequestContext(request_id="i18n-test-request", ip=None, user_agent=None)
    with pytest.raises(Exception) as raised:
        mcp_server._call_sync(key_id, origin, "memory_get", fn, arguments, accept_language)
    return json.loads(str(raised.value))["error"]


def test_mcp_refusals_speak_the_callers_language(alice, _connections_kept):
    key, _ = tenancy.api_key_create(actor=member_actor(alice), name="mcp", scopes=ALL_SCOPES)
    english = _mcp_refusal(
        key.pk, "", mcp_tools.agent_document, {"agent_id": "x", "document": "sop"}
    )
    chinese = _mcp_refusal(
        key.pk, "zh-CN", mcp_tools.agent_document, {"agent_id": "x", "document": "sop"}
    )
    assert english["code"] == chinese["code"] == "not_found"
    assert english["message"] == "No such agent."
    assert chinese["message"] == "没有该智能体。"


def test_mcp_unauthenticated_answer_speaks_the_callers_language(db, _connections_kept):
    _, status, english = mcp_server._authenticate_sync("", "203.0.113.9", "")
    _, status_zh, chinese = mcp_server._authenticate_sync("", "203.0.113.9", "zh-CN")
    assert status == status_zh == 401
    assert english.startswith("Send a Cadre API key")
    assert CHINESE.search(chinese) and "Authorization: Bearer <key>" in chinese


# --- skill proposals and Chinese replies ---------------------------------------------------


@pytest.mark.parametrize(
    "reply",
    ["yes, save it", "好的，保存", "是的，保存吧", "可以，保存为技能", "确认保存", "好"],
)
def test_a_chinese_yes_confirms_a_proposal(reply):
    assert drafting.is_affirmation(reply)


@pytest.mark.parametrize("reply", ["不好", "好的，但是改一下", "no", "不要保存"])
def test_a_chinese_no_does_not(reply):
    assert not drafting.is_affirmation(reply)


def test_a_chinese_omission_drafts_chinese_steps_and_a_chinese_summary():
    from django.utils import translation

    with translation.override("zh-hans"):
        draft = drafting.offline_correction_draft(
            request="写一份会议纪要",
            output="纪要……",
            correction="总结里缺少了行动项",
            base_skill_md=None,
        )
    assert draft.summary.startswith("新技能 ")
    assert "要有行动项" in draft.summary and "了行动项" not in draft.summary


def test_no_client_sees_a_500_for_an_unknown_language(owner_key):
    response = owner_key.get("/api/v1/memories/999999999/", HTTP_ACCEPT_LANGUAGE="xx-YY")
    assert response.status_code == 404
    assert _answer(response)[2] == "Memory not found."


def test_the_api_without_a_key_still_answers(db):
    response = APIClient().get("/mem0/v1/ping/", **ZH)
    assert response.status_code in (401, 403)
