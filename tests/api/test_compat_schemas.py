"""The schema page of each compatibility layer (/mem0/openapi.json, /memos/openapi.json): every
route and method is in it, and real answers of the layer validate against what it declares."""

from __future__ import annotations

import re

import jsonschema
import pytest

from cadre.compat.urls import mem0_urlpatterns, memos_urlpatterns
from hub.tests.factories import publish
from tests.skills.conftest import _instance_signing_key  # noqa: F401 - autouse: a fresh key

pytestmark = pytest.mark.django_db

METHODS = ("get", "post", "put", "patch", "delete")
NOT_IN_SCHEMA = {"mem0-unknown", "memos-unknown", "mem0-schema", "memos-schema"}


def _openapi_path(pattern) -> str:
    return "/" + re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", str(pattern.pattern))


@pytest.mark.parametrize(
    ("layer", "patterns"), [("mem0", mem0_urlpatterns), ("memos", memos_urlpatterns)]
)
def test_every_route_and_method_is_documented(client, layer, patterns):
    response = client.get(f"/{layer}/openapi.json")
    assert response.status_code == 200
    document = response.json()
    assert document["openapi"].startswith("3.1")
    jsonschema.Draft202012Validator.check_schema({"$defs": document["components"]["schemas"]})
    for pattern in patterns:
        if pattern.name in NOT_IN_SCHEMA:
            continue
        path = _openapi_path(pattern)
        assert path in document["paths"], (pattern.name, path)
        view = pattern.callback.view_class
        served = {method for method in METHODS if hasattr(view, method)}
        assert served == set(document["paths"][path]) - {"parameters"}, (pattern.name, served)


def _validator(document, path, method, status="200"):
    schema = document["paths"][path][method]["responses"][status]["content"]["application/json"]
    return lambda instance: jsonschema.validate(
        instance, {**schema["schema"], "components": document["components"]}
    )


@pytest.fixture
def token(alice, key_client):
    client = key_client(alice, ["memory:read", "memory:write", "hub:read"])
    client.credentials(HTTP_AUTHORIZATION=f"Token {client.secret}")
    return client


def test_mem0_answers_match_the_schema(client, token, alice):
    document = client.get("/mem0/openapi.json").json()
    check = lambda path, method, body, status="200": _validator(document, path, method, status)(  # noqa: E731
        body
    )
    check("/v1/ping/", "get", token.get("/mem0/v1/ping/").json())
    added = token.post(
        "/mem0/v3/memories/add/",
        {"messages": "Alice prefers tea", "user_id": alice.email, "infer": False},
        format="json",
    ).json()
    check("/v3/memories/add/", "post", added)
    memory_id = added["results"][0]["id"]
    found = token.post("/mem0/v3/memories/search/", {"query": "tea"}, format="json").json()
    check("/v3/memories/search/", "post", found)
    check("/v3/memories/", "post", token.post("/mem0/v3/memories/", {}, format="json").json())
    check("/v1/memories/{memory_id}/", "get", token.get(f"/mem0/v1/memories/{memory_id}/").json())
    history = token.get(f"/mem0/v1/memories/{memory_id}/history/").json()
    check("/v1/memories/{memory_id}/history/", "get", history)
    refused = token.get("/mem0/v1/memories/999999/")
    check("/v1/memories/{memory_id}/", "get", refused.json(), "404")
    check("/v1/entities/", "get", token.get("/mem0/v1/entities/").json())
    export = token.post("/mem0/v1/exports/", {"schema": "{}"}, format="json").json()
    check("/v1/exports/", "post", export)
    got = token.post("/mem0/v1/exports/get/", {"memory_export_id": export["id"]}, format="json")
    check("/v1/exports/get/", "post", got.json())
    check("/v2/profiles/settings/", "get", token.get("/mem0/v2/profiles/settings/").json())
    profile = token.get(f"/mem0/v2/entities/user/{alice.email}/profile/").json()
    check("/v2/entities/user/{entity_id}/profile/", "get", profile)
    summary = token.post("/mem0/v1/summary/", {}, format="json")
    assert summary.status_code == 501
    check("/v1/summary/", "post", summary.json(), "501")
    batch = token.put(
        "/mem0/v1/batch/", {"memories": [{"memory_id": memory_id, "text": "x"}]}, format="json"
    )
    check("/v1/batch/", "put", batch.json())


def test_memos_answers_match_the_schema(client, token, alice):
    document = client.get("/memos/openapi.json").json()
    publish(alice, "tea-ceremony", "1.0.0")
    check = lambda path, body, status="200": _validator(document, path, "post", status)(body)  # noqa: E731
    added = token.post(
        "/memos/add/message",
        {"user_id": alice.email, "messages": [{"role": "user", "content": "以后周报用英文写"}]},
        format="json",
    ).json()
    check("/add/message", added)
    found = token.post(
        "/memos/search/memory",
        {"query": "tea ceremony 周报", "user_id": alice.email, "include_skill": True},
        format="json",
    ).json()
    check("/search/memory", found)
    check(
        "/get/memory",
        token.post("/memos/get/memory", {"user_id": alice.email}, format="json").json(),
    )
    check(
        "/get/status", token.post("/memos/get/status", {"task_id": added["data"]["task_id"]}).json()
    )
    check("/search/memory", token.post("/memos/search/memory", {}, format="json").json(), "400")
    listed = token.post(
        "/memos/get/message",
        {"user_id": alice.email, "conversation_limit_number": 3},
        format="json",
    )
    check("/get/message", listed.json())
    memory_id = found["data"]["memory_detail_list"][0]["id"]
    one = token.get(f"/memos/get/memory/{memory_id}").json()
    _validator(document, "/get/memory/{memory_id}", "get", "200")(one)
    refused = token.post("/memos/create/knowledgebase", {"knowledgebase_name": "x"}, format="json")
    assert refused.status_code == 501
    check("/create/knowledgebase", refused.json(), "501")
