"""Hostile input to the Mem0 and MemOS APIs (issue 29, finding 2): each request the probe used to
take the web process down, and their relatives, is a 4xx with an error code and stores nothing.

`"²".isdigit()` is true and `int("²")` raised; `int("١٢")` is 12 (another member, another
memory); NUL reached PostgreSQL, which refuses it in text and JSON; 1e309 is inf, which int()
refuses with OverflowError; `[` x 50,000 is RecursionError in the json module. Each was a 500.
"""

from __future__ import annotations

import json
from urllib.parse import quote, unquote, urlsplit

import pytest
from django.urls import resolve
from rest_framework.test import APIRequestFactory

from cadre.memory import services
from cadre.memory.models import Memory, MemoryVersion
from cadre.tenancy.actors import member_actor
from tests.refusals import nothing_changes

pytestmark = pytest.mark.django_db

INF = "__INF__"  # json.dumps writes inf as Infinity, which no parser takes; 1e309 is what parses
ARABIC_INDIC = str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩")
DEEP = "[" * 50_000
NESTED_METADATA = {"metadata": json.loads('{"a":' * 100 + "1" + "}" * 100)}


def _raw(body) -> str:
    if isinstance(body, str):
        return body
    return json.dumps(body).replace(f'"{INF}"', "1e309")


MEM0 = [
    # unicode and oversized digits where an id is expected
    ("/mem0/v2/memories/search/", {"query": "x", "user_id": "²"}),
    ("/mem0/v2/memories/search/", {"query": "x", "user_id": "١٢"}),
    ("/mem0/v2/memories/search/", {"query": "x", "user_id": "99999999999999999999999"}),
    ("/mem0/v2/memories/search/", {"query": "x", "agent_id": "²"}),
    ("/mem0/v2/memories/search/", {"query": "x", "agent_id": "١٢"}),
    ("/mem0/v2/memories/search/", {"query": "x", "agent_id": "99999999999999999999999"}),
    ("/mem0/v3/memories/add/", {"messages": "x", "agent_id": "²", "infer": False}),
    # numbers that are not whole numbers
    ("/mem0/v2/memories/search/", {"query": "x", "user_id": "{email}", "top_k": INF}),
    ("/mem0/v2/memories/search/", {"query": "x", "user_id": "{email}", "top_k": 2.5}),
    ("/mem0/v2/memories/search/", {"query": "x", "user_id": "{email}", "top_k": "²"}),
    ("/mem0/v3/memories/", {"filters": {"user_id": "{email}"}, "page": INF}),
    ("/mem0/v1/feedback/", {"memory_id": INF, "feedback": "POSITIVE"}),
    ("/mem0/v1/feedback/", {"memory_id": "{id_arabic}", "feedback": "POSITIVE"}),
    # NUL in every text a client sends
    ("/mem0/v2/memories/search/", {"query": "x\x00", "user_id": "{email}"}),
    ("/mem0/v2/memories/search/", {"query": "x", "user_id": "a\x00b"}),
    ("/mem0/v2/memories/search/", {"query": "x", "user_id": "{email}", "run_id": "r\x00"}),
    ("/mem0/v3/memories/add/", {"messages": "x\x00y", "user_id": "{email}", "infer": False}),
    ("/mem0/v3/memories/add/", {"messages": "x\x00y", "user_id": "{email}"}),
    ("/mem0/v3/memories/add/", {"messages": "ok", "user_id": "{email}", "app_id": "a\x00"}),
    (
        "/mem0/v3/memories/add/",
        {"messages": "ok", "user_id": "{email}", "infer": False, "metadata": {"k": "v\x00"}},
    ),
    (
        "/mem0/v3/memories/add/",
        {"messages": "ok", "user_id": "{email}", "infer": False, "metadata": {"k\x00": "v"}},
    ),
    ("/mem0/v1/memories/", {"messages": [{"role": "user\x00", "content": "ok"}], "infer": False}),
    # a lone surrogate
    ("/mem0/v3/memories/add/", '{"messages": "\\udc00", "user_id": "{email}", "infer": false}'),
    # nesting
    ("/mem0/v2/memories/search/", DEEP),
    ("/mem0/v3/memories/add/", DEEP),
    ("/mem0/v3/memories/add/", {"messages": "ok", "user_id": "{email}", **NESTED_METADATA}),
]

MEMOS = [
    ("/memos/search/memory", {"query": "x", "user_id": "²"}),
    ("/memos/search/memory", {"query": "x", "user_id": "{email}", "agent_id": "١٢"}),
    ("/memos/search/memory", {"query": "x", "user_id": "{email}", "memory_limit_number": INF}),
    ("/memos/search/memory", {"query": "x\x00", "user_id": "{email}"}),
    ("/memos/get/memory", {"user_id": "{email}", "size": INF}),
    (
        "/memos/add/message",
        {"user_id": "{email}", "messages": [{"role": "user", "content": "a\x00"}]},
    ),
    (
        "/memos/add/message",
        {"user_id": "{email}", "messages": [{"role": "user", "content": "ok"}], "tags": ["t\x00"]},
    ),
    (
        "/memos/add/message",
        {"user_id": "{email}", "messages": [{"role": "user", "content": "ok"}], "tags": ["t" * 65]},
    ),
    (
        "/memos/add/message",
        {
            "user_id": "{email}",
            "messages": [{"role": "user", "content": "ok"}],
            "info": {"\x00": 1},
        },
    ),
    ("/memos/add/message", {"user_id": "a\x00", "messages": [{"role": "user", "content": "ok"}]}),
    ("/memos/add/feedback", {"user_id": "{email}", "feedback_content": "moved\x00"}),
    ("/memos/update/memory", {"memory_id": "{id_arabic}", "memory_value": "changed"}),
    ("/memos/update/memory", {"memory_id": INF, "memory_value": "changed"}),
    ("/memos/update/memory", {"memory_id": "{id}", "memory_value": "changed\x00"}),
    ("/memos/delete/memory", {"memory_ids": ["²"]}),
    ("/memos/delete/memory", {"memory_ids": ["{id_arabic}"]}),
    ("/memos/delete/memory", {"memory_ids": [INF]}),
    ("/memos/get/status", {"task_id": "cadre-²"}),
    ("/memos/get/status", {"task_id": "cadre-{id_arabic}"}),
    ("/memos/search/memory", DEEP),
    ("/memos/add/message", DEEP),
    # message history and the knowledge-base fields
    ("/memos/get/message", {"user_id": "{email}", "conversation_id": "c\x00"}),
    ("/memos/get/message", {"user_id": "{email}", "message_limit_number": INF}),
    ("/memos/get/message", {"user_id": "{email}", "conversation_limit_number": 2.5}),
    ("/memos/get/message", {"user_id": "²"}),
    ("/memos/get/message", '{"user_id": "{email}", "conversation_id": "\\udc00"}'),
    ("/memos/get/message", DEEP),
    ("/memos/get/message", {"user_id": "{email}", "info": NESTED_METADATA}),
    ("/memos/update/memory", {"memory_id": "{id}", "content": "changed\x00"}),
    ("/memos/update/memory", {"memory_id": "{id}", "content": "changed", "title": "t"}),
    ("/memos/delete/memory", {"user_id": "{email}", "memory_type": "LongTermMemory"}),
    (
        "/memos/add/message",
        {
            "user_id": "{email}",
            "messages": [{"role": "user", "content": "I like tea"}],
            "allow_public": True,
        },
    ),
]


@pytest.fixture
def alices_memory(alice):
    return services.memory_add(
        actor=member_actor(alice),
        scope="user",
        kind="fact",
        content="Alice keeps the vault code in the blue folder",
        source_kind="user_statement",
    )


@pytest.fixture
def alices_client(alice, key_client):
    client = key_client(alice, ["memory:read", "memory:write"])
    client.credentials(HTTP_AUTHORIZATION=f"Token {client.secret}")
    return client


def _fill(raw: str, alice, memory, *, url: bool = False) -> str:
    arabic = str(memory.pk).translate(ARABIC_INDIC)
    return (
        raw.replace("{email}", alice.email)
        .replace("{id_arabic}", quote(arabic) if url else arabic)
        .replace("{id}", str(memory.pk))
    )


def _assert_refused(response, path: str) -> None:
    assert 400 <= response.status_code < 500, (response.status_code, response.content[:300])
    assert response.status_code not in (401, 403), response.content  # refused for its input
    payload = json.loads(response.content)
    assert payload["error"]["code"], payload
    if path.startswith("/mem0/"):
        assert payload["detail"]
    else:
        assert payload["code"] == response.status_code and payload["data"] is None


@pytest.mark.parametrize(
    ("path", "body"),
    [
        pytest.param(path, body, id=f"{index}-{path}")
        for index, (path, body) in enumerate(MEM0 + MEMOS)
    ],
)
def test_hostile_input_is_a_4xx_and_stores_nothing(alice, alices_memory, alices_client, path, body):
    raw = _fill(_raw(body), alice, alices_memory)
    with nothing_changes(Memory, MemoryVersion, alices_memory):
        response = alices_client.post(path, raw, content_type="application/json")
    _assert_refused(response, path)


def _over_asgi(client, method: str, path: str, body=None):
    """The request as uvicorn hands it to Cadre: its path decoded as UTF-8 and routed, the view
    called. (The test client cannot: its WSGI environ carries a path as latin-1, which
    OpenTelemetry's WSGI attributes fail on before Cadre runs, and Django's AsyncClient decodes
    it as latin-1; Cadre is served over ASGI only.)"""
    parts = urlsplit(path)
    match = resolve(unquote(parts.path))
    factory = getattr(APIRequestFactory(), method)
    request = factory(
        f"{parts.path}?{parts.query}" if parts.query else parts.path,
        body,
        format="json",
        HTTP_AUTHORIZATION=f"Token {client.secret}",
    )
    response = match.func(request, *match.args, **match.kwargs)
    return response.render() if hasattr(response, "render") else response


@pytest.mark.parametrize(
    "path",
    [
        "/mem0/v1/memories/%C2%B2/",
        "/mem0/v1/memories/{id_arabic}/",
        "/mem0/v1/memories/99999999999999999999999/",
        "/mem0/v1/memories/{id}%00/",
        "/mem0/v1/memories/{id_arabic}/history/",
        "/mem0/v1/memories/?user_id=a%00b",
        "/mem0/v1/memories/?user_id=%C2%B2",
        "/mem0/v1/memories/?agent_id=%D9%A1%D9%A2",
        "/mem0/v1/memories/?user_id={email}&page=1e309",
        "/mem0/v1/memories/?user_id={email}&page_size=%C2%B2",
    ],
)
def test_hostile_ids_and_query_strings_are_a_4xx(alice, alices_memory, alices_client, path):
    response = _over_asgi(alices_client, "get", _fill(path, alice, alices_memory, url=True))
    _assert_refused(response, path)
    assert b"vault code" not in response.content


@pytest.mark.parametrize("method", ["put", "delete"])
def test_a_memory_id_in_unicode_digits_changes_nothing(alice, alices_memory, alices_client, method):
    path = _fill("/mem0/v1/memories/{id_arabic}/", alice, alices_memory, url=True)
    with nothing_changes(Memory, MemoryVersion, alices_memory):
        response = _over_asgi(alices_client, method, path, {"text": "overwritten"})
    assert response.status_code == 404, response.content


def test_a_member_id_in_unicode_digits_names_no_member(alice, alices_memory, alices_client):
    """`int("١٢")` is 12: the user_id must be the member's id in ASCII digits, or unknown."""
    arabic = str(alice.pk).translate(ARABIC_INDIC)
    response = alices_client.post(
        "/mem0/v3/memories/", {"filters": {"user_id": arabic}}, format="json"
    )
    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] == "unknown_user"
    # Its ASCII spelling is still a way to name the member.
    response = alices_client.post(
        "/mem0/v3/memories/", {"filters": {"user_id": str(alice.pk)}}, format="json"
    )
    assert response.status_code == 200 and response.json()["count"] == 1


def test_deep_json_is_a_400_on_the_rest_api_too(alice, client_for):
    client = client_for(alice)
    response = client.post("/api/v1/departments/", DEEP, content_type="application/json")
    assert response.status_code == 400, response.content[:300]
    assert response.json()["error"]["code"] == "parse_error"
