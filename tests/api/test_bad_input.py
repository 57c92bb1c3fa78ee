"""Bad input gets a clear error in the envelope, never a 500 — including a fuzz loop."""

from __future__ import annotations

import json
import random

import pytest
from django.test import override_settings
from rest_framework.test import APIClient

from tests.api.test_cross_tenant import PLAIN_TEXT_ERROR_PREFIX, api_routes
from tests.factories import DepartmentFactory, PositionFactory


def assert_envelope(response, status: int | None = None) -> dict:
    if status is not None:
        assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"code", "message", "details"}, body
    assert isinstance(body["error"]["code"], str) and body["error"]["code"]
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    assert isinstance(body["error"]["details"], (dict, list))
    return body["error"]


# --- field errors -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url, payload, field",
    [
        ("/api/v1/departments/", {}, "name"),
        ("/api/v1/departments/", {"name": ["a"]}, "name"),
        ("/api/v1/departments/", {"name": "x" * 201}, "name"),
        ("/api/v1/departments/", {"name": "ok", "parent": "abc"}, "parent"),
        ("/api/v1/departments/", {"name": "ok", "parent": 10**9}, "parent"),
        ("/api/v1/departments/", {"name": "ok", "parent": 2**70}, "parent"),
        ("/api/v1/departments/", {"name": "ok", "code": "not a slug!"}, "code"),
        ("/api/v1/positions/", {"name": "ok", "department": {"id": 1}}, "department"),
        ("/api/v1/members/", {"display_name": None}, "display_name"),
        ("/api/v1/members/", {"display_name": "ok", "email": "not-an-email"}, "email"),
        ("/api/v1/members/", {"display_name": "ok", "roles": "owner"}, "roles"),
        ("/api/v1/members/", {"display_name": "ok", "positions": [10**9]}, "positions"),
        ("/api/v1/members/", {"display_name": "ok", "manager": True}, "manager"),
        ("/api/v1/members/invite/", {"email": 5}, "email"),
        (
            "/api/v1/im-identities/",
            {"member": 10**9, "platform": "slack", "platform_user_id": "U1"},
            "member",
        ),
        ("/api/v1/im-identities/", {"platform": "icq", "platform_user_id": "1"}, "platform"),
        (
            "/api/v1/api-keys/",
            {"name": "k", "scopes": ["org:read"], "expires_at": "soon"},
            "expires_at",
        ),
        (
            "/api/v1/grants/",
            {
                "member": "me",
                "permission": "member.manage",
                "target_type": "department",
                "target_id": 1,
            },
            "member",
        ),
        (
            "/api/v1/grants/",
            {"permission": "member.manage", "target_type": "galaxy", "target_id": 1},
            "target_type",
        ),
    ],
)
def test_wrong_types_missing_fields_and_unknown_ids_are_400_with_field_errors(
    alice, client_for, url, payload, field
):
    response = client_for(alice).post(url, payload, format="json")
    error = assert_envelope(response, 400)
    assert error["code"] == "invalid"
    assert field in error["details"], error


def test_other_orgs_ids_in_relations_are_400(org_a, org_b, alice, charlie, client_for):
    foreign_department = DepartmentFactory(organization=org_b)
    foreign_position = PositionFactory(organization=org_b)
    client = client_for(alice)
    cases = [
        ("/api/v1/departments/", {"name": "x", "parent": foreign_department.pk}, "parent"),
        ("/api/v1/positions/", {"name": "x", "department": foreign_department.pk}, "department"),
        ("/api/v1/members/", {"display_name": "x", "manager": charlie.pk}, "manager"),
        (
            "/api/v1/members/",
            {"display_name": "x", "positions": [foreign_position.pk]},
            "positions",
        ),
        (
            "/api/v1/members/invite/",
            {"email": "z@acme.test", "department": foreign_department.pk},
            "department",
        ),
    ]
    for url, payload, field in cases:
        error = assert_envelope(client.post(url, payload, format="json"), 400)
        assert field in error["details"], (url, error)


def test_organization_time_zone_must_be_real(alice, client_for):
    client = client_for(alice)
    error = assert_envelope(
        client.patch("/api/v1/organization/", {"time_zone": "Mars/Olympus"}, format="json"),
        400,
    )
    assert "time_zone" in error["details"]
    response = client.patch("/api/v1/organization/", {"time_zone": "Asia/Shanghai"}, format="json")
    assert response.status_code == 200 and response.json()["time_zone"] == "Asia/Shanghai"


def test_employee_patching_organization_with_bad_data_gets_403_not_400(bob, client_for):
    response = client_for(bob).patch("/api/v1/organization/", {"name": ""}, format="json")
    assert_envelope(response, 403)


# --- transport-level mistakes -------------------------------------------------------------


def test_no_credentials_is_401_with_envelope(db):
    error = assert_envelope(APIClient().get("/api/v1/departments/"), 401)
    assert error["code"] == "not_authenticated"


def test_oversized_body_is_413(alice, client_for):
    client = client_for(alice)
    with override_settings(CADRE_MAX_BODY_BYTES=1024):
        response = client.post(
            "/api/v1/departments/", {"name": "x", "description": "y" * 2000}, format="json"
        )
        error = assert_envelope(response, 413)
        assert error["code"] == "payload_too_large"
        assert error["details"]["limit"] == 1024
        small = client.post("/api/v1/departments/", {"name": "small"}, format="json")
        assert small.status_code == 201


def test_oversized_body_is_413_even_without_credentials(db):
    with override_settings(CADRE_MAX_BODY_BYTES=1024):
        response = APIClient().post(
            "/api/v1/departments/", "x" * 5000, content_type="application/json"
        )
    assert_envelope(response, 413)


def test_non_json_body_is_415_with_envelope(alice, client_for):
    response = client_for(alice).post(
        "/api/v1/departments/", "name=Sales", content_type="text/plain"
    )
    error = assert_envelope(response, 415)
    assert error["code"] == "unsupported_media_type"


def test_malformed_json_is_400_with_envelope(alice, client_for):
    response = client_for(alice).post(
        "/api/v1/departments/", '{"name": "Sa', content_type="application/json"
    )
    assert_envelope(response, 400)


@pytest.mark.parametrize("body", ['"just a string"', "[1, 2, 3]", "null", "42"])
def test_json_that_is_not_an_object_is_400(alice, client_for, body):
    response = client_for(alice).post("/api/v1/members/", body, content_type="application/json")
    assert_envelope(response, 400)


def test_unknown_endpoint_is_404_envelope(alice, client_for):
    for url in ("/api/v1/nope/", "/api/v2/departments/", "/api/", "/api/v1/members/abc/"):
        error = assert_envelope(client_for(alice).get(url), 404)
        assert error["code"] == "not_found"


def test_unrouted_method_is_405_with_envelope(alice, client_for):
    response = client_for(alice).put("/api/v1/organization/", {"name": "x"}, format="json")
    assert_envelope(response, 405)
    response = client_for(alice).delete("/api/v1/members/")
    assert_envelope(response, 405)


def test_bad_query_parameters_are_4xx_not_500(alice, client_for):
    client = client_for(alice)
    for url, params in [
        ("/api/v1/members/", {"department": "abc"}),
        ("/api/v1/members/", {"status": "sleeping"}),
        ("/api/v1/members/", {"q": "\x00"}),
        ("/api/v1/members/", {"position": "1.5.5"}),
        ("/api/v1/departments/", {"parent": "-"}),
        ("/api/v1/departments/", {"page": "abc"}),
        ("/api/v1/departments/", {"page": "99"}),
        ("/api/v1/departments/", {"page_size": "-1"}),
        ("/api/v1/audit-events/", {"since": "never"}),
        ("/api/v1/audit-events/", {"target_id": "\x00"}),
    ]:
        response = client.get(url, params)
        assert response.status_code < 500, (url, params)
        if response.status_code >= 400:
            assert_envelope(response)


# --- fuzz ---------------------------------------------------------------------------------

FIELD_NAMES = [
    "name",
    "code",
    "description",
    "parent",
    "department",
    "display_name",
    "email",
    "mobile",
    "employee_no",
    "title",
    "manager",
    "positions",
    "roles",
    "member",
    "platform",
    "platform_user_id",
    "tenant_key",
    "scopes",
    "expires_at",
    "permission",
    "target_type",
    "target_id",
    "time_zone",
    "locale",
    "reason",
    "is_archived",
    "content",
    "scope",
    "scope_id",
    "kind",
    "tags",
    "version",
    "query",
    "status",
    "id",
    "organization",
]


PAYLOADS_PER_TARGET = 12


def _garbage(rng: random.Random, depth: int = 0):
    choices = [
        lambda: None,
        lambda: rng.choice([True, False]),
        lambda: rng.choice([0, -1, 1, 2**31, 2**63, 2**70, -(2**70)]),
        lambda: rng.choice([1.5, -0.0, 1e308, float("1e-320")]),
        lambda: "",
        lambda: " " * rng.randint(1, 5),
        lambda: "x" * rng.choice([151, 1000, 70_000]),
        lambda: rng.choice(
            [
                "\x00",
                "a\x00b",
                "🙂" * 50,
                "<script>",
                "../../etc/passwd",
                "'; DROP TABLE x; --",
                "2026-13-45T99:99",
                "owner",
                "org:read",
                "member.manage",
                "department",
                "slack",
                "U1",
                "a@b.c",
            ]
        ),
        lambda: str(rng.randint(-5, 10**6)),
    ]
    if depth < 3:
        choices += [
            lambda: [_garbage(rng, depth + 1) for _ in range(rng.randint(0, 4))],
            lambda: {
                rng.choice(FIELD_NAMES): _garbage(rng, depth + 1) for _ in range(rng.randint(0, 3))
            },
        ]
    return rng.choice(choices)()


# Valid-looking bodies per collection: mutating one or two of their fields reaches deeper
# than a body that fails the first check.
BASELINES = {
    "departments": {"name": "Fuzzed", "code": "fuzzed"},
    "positions": {"name": "Fuzzed", "code": "fuzzed"},
    "members": {"display_name": "Fuzzed", "email": "fuzzed@acme.test", "roles": ["employee"]},
    "invite": {"email": "fuzzed@acme.test", "roles": ["employee"]},
    "im-identities": {"platform": "slack", "platform_user_id": "UFUZZ"},
    "api-keys": {"name": "Fuzzed", "scopes": ["org:read"]},
    "grants": {"permission": "member.manage", "target_type": "department"},
    "organization": {"name": "Fuzzed", "time_zone": "UTC", "locale": "en"},
}


def _baseline(url: str) -> dict:
    parts = [part for part in url.split("/") if part]
    for part in reversed(parts):
        if part in BASELINES:
            return dict(BASELINES[part])
    return {}


def _payloads(rng: random.Random, count: int, url: str):
    for _ in range(count):
        shape = rng.random()
        if shape < 0.1:
            yield _garbage(rng)  # not even an object
        elif shape < 0.55:
            payload = _baseline(url)
            for _ in range(rng.randint(1, 2)):
                payload[rng.choice([*payload, *FIELD_NAMES])] = _garbage(rng)
            yield payload
        else:
            yield {rng.choice(FIELD_NAMES): _garbage(rng) for _ in range(rng.randint(0, 8))}


def _fuzz_targets(owner) -> list[tuple[str, str, str]]:
    targets = []
    for route in api_routes():
        if route.kwargs and not route.has_factory:
            continue  # the cross-tenant sweep fails loudly for these
        url = route.url_for(owner)
        for method in ("post", "put", "patch"):
            if method in route.methods:
                targets.append((method, url, route.name))
    return targets


def test_fuzzed_payloads_never_cause_a_server_error(alice, client_for):
    rng = random.Random(20261130)
    client = client_for(alice)
    targets = _fuzz_targets(alice)
    assert len(targets) >= 10
    for method, url, name in targets:
        for payload in _payloads(rng, PAYLOADS_PER_TARGET, url):
            body = json.dumps(payload)
            response = getattr(client, method)(url, body, content_type="application/json")
            assert response.status_code < 500, (method, url, body[:300])
            if response.status_code >= 400 and not name.startswith(PLAIN_TEXT_ERROR_PREFIX):
                assert_envelope(response)
