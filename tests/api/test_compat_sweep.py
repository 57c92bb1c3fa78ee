"""The compatible memory APIs (/mem0/, /memos/) swept the way tests/api/test_cross_tenant.py
sweeps /api/v1/: every route, discovered from their URL patterns, is called by another
organization's key (with full memory scopes) naming alice's memory, e-mail and agent; it sees
nothing of hers and changes nothing. Then every route gets malformed bodies: each answer is a
4xx in the original API's error shape (Mem0 `detail`, MemOS `{code, message, data}`), never a
500, and nothing is stored. A new route without an entry here fails the sweep."""

from __future__ import annotations

import json

import pytest

from cadre.compat.urls import mem0_urlpatterns, memos_urlpatterns
from cadre.memory import services
from cadre.memory.models import Memory
from cadre.tenancy.actors import member_actor
from tests.refusals import nothing_changes

pytestmark = pytest.mark.django_db

SECRET = "Alice keeps the vault code in the blue folder"

# (route name) -> [(method, path, body)] with {id} alice's memory and {email} alice's e-mail
MEM0_CALLS: dict[str, list[tuple[str, str, object]]] = {
    "mem0-schema": [("get", "/mem0/openapi.json", None)],
    "mem0-ping": [("get", "/mem0/v1/ping/", None)],
    "mem0-memories": [
        ("post", "/mem0/v1/memories/", {"messages": "Alice likes tea", "user_id": "{email}"}),
        ("get", "/mem0/v1/memories/?user_id={email}", None),
        ("delete", "/mem0/v1/memories/?user_id={email}", None),
    ],
    "mem0-add": [
        (
            "post",
            "/mem0/v3/memories/add/",
            {"messages": "Alice likes tea", "user_id": "{email}", "infer": False},
        )
    ],
    "mem0-list-v3": [("post", "/mem0/v3/memories/", {"filters": {"user_id": "{email}"}})],
    "mem0-list-v2": [("post", "/mem0/v2/memories/", {})],
    "mem0-search-v3": [("post", "/mem0/v3/memories/search/", {"query": "vault code"})],
    "mem0-search-v2": [
        ("post", "/mem0/v2/memories/search/", {"query": "vault", "filters": {"user_id": "{email}"}})
    ],
    "mem0-search-v1": [("post", "/mem0/v1/memories/search/", {"query": "vault code"})],
    "mem0-memory": [
        ("get", "/mem0/v1/memories/{id}/", None),
        ("put", "/mem0/v1/memories/{id}/", {"text": "overwritten"}),
        ("delete", "/mem0/v1/memories/{id}/", None),
    ],
    "mem0-memory-history": [("get", "/mem0/v1/memories/{id}/history/", None)],
    "mem0-feedback": [
        ("post", "/mem0/v1/feedback/", {"memory_id": "{id}", "feedback": "NEGATIVE"})
    ],
    "mem0-entities": [("get", "/mem0/v1/entities/", None)],
    "mem0-entity": [
        ("delete", "/mem0/v2/entities/user/{email}/", None),
        ("delete", "/mem0/v2/entities/run/chat-1/", None),
        ("delete", "/mem0/v2/entities/app/app-1/", None),
    ],
    "mem0-profile": [("get", "/mem0/v2/entities/user/{email}/profile/", None)],
    "mem0-profile-settings": [
        ("get", "/mem0/v2/profiles/settings/", None),
        ("post", "/mem0/v2/profiles/settings/", {"enabled": False}),
    ],
    "mem0-profile-jobs": [
        (
            "post",
            "/mem0/v2/profiles/jobs/",
            {"operation": "trigger", "entity_type": "user", "entity_id": "{email}"},
        )
    ],
    "mem0-profile-job": [("get", "/mem0/v2/profiles/jobs/1/", None)],
    "mem0-batch": [
        ("put", "/mem0/v1/batch/", {"memories": [{"memory_id": "{id}", "text": "overwritten"}]}),
        ("delete", "/mem0/v1/batch/", {"memories": [{"memory_id": "{id}"}]}),
    ],
    "mem0-exports": [("post", "/mem0/v1/exports/", {"schema": "{}", "user_id": "{email}"})],
    "mem0-export-get": [("post", "/mem0/v1/exports/get/", {"filters": {"user_id": "{email}"}})],
    "mem0-summary": [("post", "/mem0/v1/summary/", {"filters": {"user_id": "{email}"}})],
    "mem0-projects": [("post", "/mem0/api/v1/orgs/organizations/acme/projects/", {"name": "x"})],
    "mem0-project": [
        ("get", "/mem0/api/v1/orgs/organizations/acme/projects/key-x/", None),
        ("patch", "/mem0/api/v1/orgs/organizations/acme/projects/key-x/", {"name": "x"}),
        ("delete", "/mem0/api/v1/orgs/organizations/acme/projects/key-x/", None),
    ],
    "mem0-project-members": [
        ("get", "/mem0/api/v1/orgs/organizations/acme/projects/key-x/members/", None),
    ],
    "mem0-webhooks": [
        ("get", "/mem0/api/v1/webhooks/projects/key-x/", None),
        ("post", "/mem0/api/v1/webhooks/projects/key-x/", {"url": "http://127.0.0.1/"}),
    ],
    "mem0-webhook": [("put", "/mem0/api/v1/webhooks/1/", {"name": "x"})],
    # Mem0's self-hosted server contract: labels within the key owner's personal scope only.
    "mem0-oss-memories": [
        (
            "post",
            "/mem0/oss/memories",
            # A system message only, verbatim: the whole path runs and stores nothing (a real
            # add would land in the caller's own memory, which is a change of its own).
            {
                "messages": [{"role": "system", "content": "I like tea"}],
                "user_id": "{email}",
                "infer": False,
            },
        ),
        ("get", "/mem0/oss/memories?user_id={email}", None),
        ("get", "/mem0/oss/memories", None),
        ("delete", "/mem0/oss/memories?user_id={email}", None),
    ],
    "mem0-oss-search": [
        ("post", "/mem0/oss/search", {"query": "vault code"}),
        ("post", "/mem0/oss/search", {"query": "vault", "filters": {"user_id": "{email}"}}),
    ],
    "mem0-oss-memory": [
        ("get", "/mem0/oss/memories/{id}", None),
        ("put", "/mem0/oss/memories/{id}", {"text": "overwritten"}),
        ("delete", "/mem0/oss/memories/{id}", None),
    ],
    "mem0-oss-memory-history": [("get", "/mem0/oss/memories/{id}/history", None)],
    "mem0-oss-configure": [
        ("get", "/mem0/oss/configure", None),
        ("post", "/mem0/oss/configure", {"llm": {"provider": "openai"}}),
    ],
    "mem0-oss-providers": [("get", "/mem0/oss/configure/providers", None)],
    "mem0-oss-instructions": [("post", "/mem0/oss/generate-instructions", {"use_case": "x"})],
    "mem0-oss-reset": [("post", "/mem0/oss/reset", {})],
    "mem0-unknown": [("get", "/mem0/v9/anything/", None)],
}
# Routes of calls Cadre does not offer: a well-formed body is answered 501 `not_supported`.
NOT_SUPPORTED = {
    "mem0-summary",
    "mem0-profile-jobs",
    "mem0-profile-settings",
    "mem0-projects",
    "mem0-oss-configure",
    "mem0-oss-providers",
    "mem0-oss-instructions",
    "mem0-oss-reset",
    # MemOS knowledge bases: 501 `knowledgebase_unsupported`
    "memos-kb-create",
    "memos-kb-delete",
    "memos-kb-file-add",
    "memos-kb-file-get",
    "memos-kb-file-delete",
}
MEMOS_CALLS: dict[str, list[tuple[str, str, object]]] = {
    "memos-schema": [("get", "/memos/openapi.json", None)],
    "memos-add-message": [
        (
            "post",
            "/memos/add/message",
            {"user_id": "{email}", "messages": [{"role": "user", "content": "I like tea"}]},
        )
    ],
    "memos-search": [("post", "/memos/search/memory", {"query": "vault", "user_id": "{email}"})],
    "memos-get": [("post", "/memos/get/memory", {"user_id": "{email}"})],
    "memos-update": [("post", "/memos/update/memory", {"memory_id": "{id}", "memory_value": "x"})],
    "memos-delete": [
        ("post", "/memos/delete/memory", {"memory_ids": ["{id}"]}),
        ("post", "/memos/delete/memory", {"user_id": "{email}"}),
    ],
    "memos-feedback": [
        (
            "post",
            "/memos/add/feedback",
            {"user_id": "{email}", "feedback_content": "The vault code moved"},
        )
    ],
    "memos-status": [("post", "/memos/get/status", {"task_id": "cadre-{id}"})],
    "memos-memory": [("get", "/memos/get/memory/{id}", None)],
    "memos-get-message": [
        ("post", "/memos/get/message", {"user_id": "{email}", "conversation_id": "c-1"}),
        ("post", "/memos/get/message", {"user_id": "{email}"}),
    ],
    "memos-kb-create": [("post", "/memos/create/knowledgebase", {"knowledgebase_name": "kb"})],
    "memos-kb-delete": [("post", "/memos/delete/knowledgebase", {"knowledgebase_id": "1"})],
    "memos-kb-file-add": [
        ("post", "/memos/add/knowledgebase-file", {"knowledgebase_id": "1", "file": []})
    ],
    "memos-kb-file-get": [("post", "/memos/get/knowledgebase-file", {"knowledgebase_id": "1"})],
    "memos-kb-file-delete": [("post", "/memos/delete/knowledgebase-file", {"file_ids": ["1"]})],
    "memos-unknown": [("post", "/memos/nothing/here", {})],
}


def _fill(value, memory, email):
    if isinstance(value, str):
        return value.replace("{id}", str(memory.pk)).replace("{email}", email)
    if isinstance(value, list):
        return [_fill(item, memory, email) for item in value]
    if isinstance(value, dict):
        return {key: _fill(item, memory, email) for key, item in value.items()}
    return value


@pytest.fixture
def alices_memory(alice):
    return services.memory_add(
        actor=member_actor(alice),
        scope="user",
        kind="fact",
        content=SECRET,
        source_kind="user_statement",
    )


@pytest.fixture
def outsider(charlie, key_client):
    client = key_client(charlie, ["memory:read", "memory:write", "hub:read"])
    client.credentials(HTTP_AUTHORIZATION=f"Token {client.secret}")
    return client


def _call(client, method, path, body):
    if body is None:
        return getattr(client, method)(path)
    return getattr(client, method)(path, body, format="json")


@pytest.mark.parametrize(
    ("patterns", "calls"), [(mem0_urlpatterns, MEM0_CALLS), (memos_urlpatterns, MEMOS_CALLS)]
)
def test_every_compat_route_is_in_the_sweep(patterns, calls):
    assert {pattern.name for pattern in patterns} == set(calls)


@pytest.mark.parametrize(
    ("name", "method", "path", "body"),
    [
        (name, *call)
        for table in (MEM0_CALLS, MEMOS_CALLS)
        for name, entries in table.items()
        for call in entries
    ],
)
def test_another_organization_sees_and_changes_nothing(
    outsider, alice, alices_memory, name, method, path, body
):
    path, body = _fill(path, alices_memory, alice.email), _fill(body, alices_memory, alice.email)
    with nothing_changes(alices_memory, Memory, audit=False):
        response = _call(outsider, method, path, body)
    assert response.status_code < 500 or (name in NOT_SUPPORTED and response.status_code == 501), (
        response.content
    )
    assert SECRET not in response.content.decode()
    if (
        name
        in (
            "mem0-memory",
            "mem0-memory-history",
            "mem0-feedback",
            "memos-update",
            "memos-memory",
            "mem0-entity",
            "mem0-profile",
            "mem0-batch",
            "mem0-oss-memory",
            "mem0-oss-memory-history",
        )
        and "/run/" not in path
        and "/app/" not in path
    ):
        assert response.status_code == 404, response.content
    if response.status_code >= 400:
        payload = response.json()
        if path.startswith("/mem0/"):
            assert payload["detail"]
        else:
            assert payload["code"] == response.status_code and payload["data"] is None
    alices_memory.refresh_from_db()
    assert alices_memory.status == Memory.Status.ACTIVE and alices_memory.content == SECRET


# --- bad input ------------------------------------------------------------------------------

MALFORMED = [
    b"{not json",
    b"[]",
    b'"a string"',
    b"null",
    b"42",
    json.dumps({"query": 5, "messages": 5, "user_id": ["x"], "memory_id": {"a": 1}}).encode(),
    json.dumps({"user_id": "x" * 5000, "filters": "all", "filter": [1]}).encode(),
    json.dumps({"top_k": "many", "page": -1, "memory_limit_number": 10**30}).encode(),
    json.dumps({"messages": [None, 1, "x"], "memory_ids": "1,2", "task_id": 7}).encode(),
    json.dumps({"query": "x", "user_id": "{email}", "threshold": "high", "relativity": 7}).encode(),
    b'{"query": "\\ud800"}',
]
# Bodies that are a well-formed request for these routes: the list routes (and Mem0's export,
# a list) take only `filters`/paging and ignore the rest (as Mem0's own server does), and a
# MemOS get or delete naming alice's user_id is exactly what it looks like. Every other pair
# must be refused.
WELL_FORMED_FOR = {
    7: {"mem0-export-get"},
    8: {"mem0-list-v3", "mem0-list-v2", "mem0-export-get"},
    9: {
        "mem0-list-v3",
        "mem0-list-v2",
        "memos-get",
        "memos-delete",
        "memos-get-message",
        "mem0-export-get",
    },
}


def _compat_routes():
    for table in (MEM0_CALLS, MEMOS_CALLS):
        for name, entries in table.items():
            for method, path, _ in entries:
                if method in ("post", "put", "patch"):
                    yield name, method, path


def _malformed_pairs():
    for index, raw in enumerate(MALFORMED):
        for name, method, path in _compat_routes():
            if name not in WELL_FORMED_FOR.get(index, ()):
                yield pytest.param(raw, name, method, path, id=f"{index}-{name}-{path}")


def test_the_well_formed_exceptions_are_answered(alice, alices_memory, key_client):
    """The pairs left out of the refusal sweep are real requests: they answer 200."""
    client = key_client(alice, ["memory:read", "memory:write", "hub:read"])
    client.credentials(HTTP_AUTHORIZATION=f"Token {client.secret}")
    raw = MALFORMED[9].replace(b"{email}", alice.email.encode())
    for path in ("/mem0/v3/memories/", "/mem0/v2/memories/", "/memos/get/memory"):
        response = client.post(path, raw, content_type="application/json")
        assert response.status_code == 200, (path, response.content)
        assert SECRET in response.content.decode()


@pytest.mark.parametrize(("raw", "name", "method", "path"), list(_malformed_pairs()))
def test_bad_input_gets_the_original_error_shape(
    alice, alices_memory, key_client, name, method, path, raw
):
    client = key_client(alice, ["memory:read", "memory:write", "hub:read"])
    client.credentials(HTTP_AUTHORIZATION=f"Token {client.secret}")
    path = _fill(path, alices_memory, alice.email)
    raw = raw.replace(b"{email}", alice.email.encode())
    with nothing_changes(Memory, audit=False):
        response = getattr(client, method)(path, raw, content_type="application/json")
    refused = 400 <= response.status_code < 500
    assert refused or (name in NOT_SUPPORTED and response.status_code == 501), (
        response.status_code,
        response.content,
    )
    payload = response.json()
    if path.startswith("/mem0/"):
        assert isinstance(payload["detail"], str) and payload["detail"]
    else:
        assert payload["code"] == response.status_code and payload["message"]
        assert payload["data"] is None


@pytest.mark.parametrize(
    "path", ["/mem0/v1/memories/?page=x&user_id={email}", "/mem0/v1/memories/{id}x/"]
)
def test_bad_query_strings_and_ids_are_4xx(alice, alices_memory, key_client, path):
    client = key_client(alice, ["memory:read", "memory:write"])
    client.credentials(HTTP_AUTHORIZATION=f"Token {client.secret}")
    response = client.get(_fill(path, alices_memory, alice.email))
    assert 400 <= response.status_code < 500 and response.json()["detail"]
