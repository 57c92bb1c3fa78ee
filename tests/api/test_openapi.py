"""The OpenAPI schema renders cleanly and lists every /api/v1/ route; Swagger UI is local."""

from __future__ import annotations

import re

import pytest
from drf_spectacular.drainage import GENERATOR_STATS
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.validation import validate_schema

from tests.api.test_cross_tenant import api_routes


def _openapi_path(route: str) -> str:
    """'api/v1/^members/(?P<pk>[^/.]+)/deactivate/$' -> '/api/v1/members/{pk}/deactivate/'."""
    path = route.replace("^", "").replace("$", "")
    path = re.sub(r"\(\?P<(\w+)>[^)]*\)", r"{\1}", path)
    path = re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", path)
    return "/" + path


def _normalise(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "{}", path)


@pytest.fixture
def schema_json(db, client):
    response = client.get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    return response.json()


def test_schema_endpoint_renders(schema_json):
    assert schema_json["openapi"].startswith("3.")
    assert schema_json["info"]["title"] == "Cadre API"


OWN_CODE = (
    "cadre/tenancy/",
    "cadre/governance/api",
    "cadre/api/",
    "Organization",
    "Department",
    "Position",
    "Member",
    "Invitation",
    "IMIdentity",
    "ApiKey",
    "Grant",
    "Role",
    "AuditEvent",
)


@pytest.fixture(scope="module")
def generator_report(django_db_blocker):
    with django_db_blocker.unblock():
        GENERATOR_STATS.reset()
        schema = SchemaGenerator().get_schema(request=None, public=True)
        report = {
            "schema": schema,
            "errors": list(GENERATOR_STATS._error_cache),
            "warnings": list(GENERATOR_STATS._warn_cache),
        }
        GENERATOR_STATS.reset()
    return report


def test_schema_is_valid_openapi(generator_report):
    validate_schema(generator_report["schema"])


def test_schema_generation_has_no_errors_or_warnings_in_tenancy_and_audit(generator_report):
    own = [
        message
        for message in generator_report["errors"] + generator_report["warnings"]
        if any(name in message for name in OWN_CODE)
    ]
    assert not own


def test_schema_generation_has_no_errors_anywhere(generator_report):
    assert not generator_report["errors"]


def test_schema_lists_every_api_v1_route(schema_json):
    documented = {_normalise(path) for path in schema_json["paths"]}
    missing = sorted(
        _openapi_path(route.route)
        for route in api_routes()
        if _normalise(_openapi_path(route.route)) not in documented
    )
    assert not missing, missing


def test_schema_documents_both_authentication_schemes(schema_json):
    schemes = schema_json["components"]["securitySchemes"]
    assert schemes["ApiKey"]["scheme"] == "bearer"
    assert schemes["Session"]["in"] == "cookie"


def test_schema_never_exposes_key_secrets_outside_creation(schema_json):
    components = schema_json["components"]["schemas"]
    assert "secret" not in components["ApiKey"]["properties"]
    assert "secret" in components["ApiKeyCreated"]["properties"]


def test_swagger_ui_is_served_with_local_assets(db, client):
    response = client.get("/api/docs/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "swagger-ui" in html.lower()
    assets = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert assets
    for asset in assets:
        assert not re.match(r"^(https?:)?//", asset), asset
    assert not re.search(r"cdn\.jsdelivr|unpkg\.com|cdnjs", html)
    bundle = next(a for a in assets if a.endswith("swagger-ui-bundle.js"))
    assert bundle.startswith("/static/")
    asset_response = client.get(bundle)
    assert asset_response.status_code == 200
