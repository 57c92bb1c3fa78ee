"""Hostile input to the Mem0 platform calls beyond the memory round trip (entities, batches,
exports, profiles): NUL bytes, lone surrogates, 1e309, deep JSON, oversized batches and exports
are each a 4xx with an error code, and nothing is stored, changed or deleted."""

from __future__ import annotations

import json

import pytest

from cadre.compat import mem0_platform
from cadre.memory import services
from cadre.memory.models import Memory, MemoryVersion
from cadre.tenancy.actors import member_actor
from tests.refusals import nothing_changes

pytestmark = pytest.mark.django_db

DEEP = '{"a":' * 70 + "1" + "}" * 70


@pytest.fixture
def memory(alice):
    return services.memory_add(
        actor=member_actor(alice),
        scope="user",
        kind="fact",
        content="Alice's desk is 4B",
        source_kind="user_statement",
    )


@pytest.fixture
def client(alice, key_client):
    client = key_client(alice, ["memory:read", "memory:write"])
    client.credentials(HTTP_AUTHORIZATION=f"Token {client.secret}")
    return client


def _send(client, method, path, raw: str):
    return getattr(client, method)(path, raw.encode(), content_type="application/json")


def _batch(memory_id, **fields) -> str:
    return json.dumps({"memories": [{"memory_id": memory_id, **fields}]})


@pytest.mark.parametrize(
    ("method", "path", "raw", "code"),
    [
        ("put", "/mem0/v1/batch/", _batch("{id}", text="x\u0000y"), "parse_error"),
        ("put", "/mem0/v1/batch/", _batch("{id}", text="\ud800"), "parse_error"),
        ("put", "/mem0/v1/batch/", _batch("{id}", metadata={"k\u0000": 1}), "parse_error"),
        (
            "put",
            "/mem0/v1/batch/",
            '{"memories":[{"memory_id":"{id}","metadata":' + DEEP + "}]}",
            "parse_error",
        ),
        ("put", "/mem0/v1/batch/", '{"memories":[{"memory_id":1e309,"text":"x"}]}', "parse_error"),
        ("put", "/mem0/v1/batch/", _batch("{id}", text=""), "invalid"),
        ("put", "/mem0/v1/batch/", _batch("{id}"), "invalid"),
        ("put", "/mem0/v1/batch/", json.dumps({"memories": "{id}"}), "invalid"),
        ("put", "/mem0/v1/batch/", json.dumps({"memories": [5]}), "invalid"),
        (
            "delete",
            "/mem0/v1/batch/",
            json.dumps({"memories": [{"memory_id": "{id}"}] * 1001}),
            "batch_too_large",
        ),
        (
            "delete",
            "/mem0/v1/batch/",
            json.dumps({"memories": [{"memory_id": "{id}"}] * 2}),
            "duplicate_memory",
        ),
        ("delete", "/mem0/v1/batch/", _batch("²"), "not_found"),
        ("delete", "/mem0/v1/batch/", _batch("99999999999999999999999"), "not_found"),
        ("post", "/mem0/v1/exports/", json.dumps({"schema": "[" * 50_000}), "invalid_schema"),
        ("post", "/mem0/v1/exports/", json.dumps({"schema": '{"a": 1e309}'}), "invalid_schema"),
        ("post", "/mem0/v1/exports/", json.dumps({"schema": '{"a": "\\u0000"}'}), "invalid_schema"),
        ("post", "/mem0/v1/exports/", json.dumps({"schema": "x" * 70_000}), "invalid_schema"),
        ("post", "/mem0/v1/exports/", json.dumps({"schema": "[]"}), "invalid_schema"),
        (
            "post",
            "/mem0/v1/exports/",
            json.dumps({"schema": "{}", "user_id": "١٢"}),
            "unknown_user",
        ),
        ("post", "/mem0/v1/exports/get/", json.dumps({"memory_export_id": "forged"}), "not_found"),
        (
            "post",
            "/mem0/v1/exports/get/",
            json.dumps({"filters": {"OR": []}}),
            "unsupported_filter",
        ),
        (
            "post",
            "/mem0/v1/summary/",
            json.dumps({"filters": {"user_id": "a\u0000"}}),
            "parse_error",
        ),
        ("post", "/mem0/v2/profiles/settings/", json.dumps({"schema": {}}), "unsupported_settings"),
        ("post", "/mem0/v2/profiles/settings/", json.dumps({"enabled": "yes"}), "invalid"),
        ("post", "/mem0/v2/profiles/jobs/", json.dumps({"operation": "wipe"}), "invalid"),
        ("delete", "/mem0/v2/entities/team/x/", "", "invalid_entity_type"),
        ("delete", "/mem0/v2/entities/run/a%00b/", "", "bad_request"),
        ("delete", "/mem0/v2/entities/user/%C2%B2/", "", "not_found"),
        ("delete", "/mem0/v2/entities/agent/1e309/", "", "not_found"),
        ("get", "/mem0/v2/entities/user/%C2%B2/profile/", None, "not_found"),
    ],
)
def test_hostile_input_is_a_4xx_and_changes_nothing(client, memory, method, path, raw, code):
    raw = raw.replace("{id}", str(memory.pk)) if raw is not None else None
    with nothing_changes(memory, Memory):
        if raw is None:
            response = getattr(client, method)(path)
        else:
            response = _send(client, method, path, raw)
    assert 400 <= response.status_code < 500, response.content
    body = response.json()
    # A NUL in the path is refused before the Mem0 view (Cadre's envelope, without `detail`).
    assert body["error"]["code"] == code and (body.get("detail") or code == "bad_request")


def test_an_export_past_its_limit_is_refused(client, alice, memory, monkeypatch):
    services.memory_add(
        actor=member_actor(alice),
        scope="user",
        kind="fact",
        content="Alice's locker is 12",
        source_kind="user_statement",
    )
    monkeypatch.setattr(mem0_platform, "MAX_EXPORT", 1)
    response = client.post(
        "/mem0/v1/exports/", {"schema": "{}", "user_id": alice.email}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "export_too_large"


def test_a_batch_refused_half_way_rolls_back_what_it_changed(client, alice, memory):
    """The first item is updated before the second is refused by the service (text past
    memory's 8,000 characters): the transaction takes the first change back, its version
    and audit event included."""
    second = services.memory_add(
        actor=member_actor(alice),
        scope="user",
        kind="fact",
        content="Alice's locker is 12",
        source_kind="user_statement",
    )
    raw = json.dumps(
        {
            "memories": [
                {"memory_id": str(memory.pk), "text": "Alice's desk is 5C"},
                {"memory_id": str(second.pk), "text": "x" * 9000},
            ]
        }
    )
    with nothing_changes(memory, second, Memory, MemoryVersion):
        response = _send(client, "put", "/mem0/v1/batch/", raw)
    assert response.status_code == 400, response.content
