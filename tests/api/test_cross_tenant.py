"""Cross-tenant sweep: an outsider gets 404 on every /api/v1/ object route of another org.

Routes are discovered from the URL resolver, so a new endpoint is covered without anyone
adding it here; a detail route whose model has no factory in tests/api/tenant_objects.py
fails the sweep instead of being skipped.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from django.conf import settings
from django.test import override_settings
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from rest_framework.test import APIClient

from cadre.governance.models import AuditEvent
from cadre.tenancy.models import Department, Member
from tests.api.tenant_objects import FACTORIES, ROUTE_KWARGS

API_PREFIX = "api/v1/"
METHODS = ("get", "put", "patch", "delete", "post")

# Routes that authenticate no member or key (they check their own signature); the sweep
# leaves them out, and a new one must be listed here to be accepted.
PUBLIC_ROUTES: dict[str, str] = {
    "trigger-inbound": "business events signed with the trigger's HMAC secret",
    "audit-public-key": "the instance's public signing key, so anyone can verify an export",
}

# List routes on a model's viewset whose rows are not that model's objects.
NOT_OBJECT_LISTS: dict[str, str] = {
    "memory-scopes": "the scopes the caller may read, as {key, label}",
}

# ClawHub-compatible routes answer errors as plain text (the ClawHub CLI prints the body).
PLAIN_TEXT_ERROR_PREFIX = "clawhub-"

# Hub reads allow anonymous callers (instance-visible skills): they must answer 404 — not
# 401 — for an organization's private skill, and never show it.
ANONYMOUS_READ_PREFIXES = ("hub-", "clawhub-")

# (route name, method) that still validate the body before looking the object up, so an
# outsider's empty body gets 400 (the same for every id: no existence leak, but not the 404
# the house rule asks for). Each entry is a bug for the owning app; remove it once fixed.
VALIDATES_BEFORE_LOOKUP: dict[tuple[str, str], str] = {}


@dataclass
class Route:
    route: str
    name: str | None
    callback: object
    kwargs: tuple[str, ...]

    @property
    def view_class(self):
        return getattr(self.callback, "cls", None) or getattr(self.callback, "view_class", None)

    @property
    def methods(self) -> set[str]:
        """The HTTP methods this route dispatches (a viewset's action map, else the view's)."""
        view_class = self.view_class
        if view_class is None:
            return {"get"}
        allowed = set(getattr(view_class, "http_method_names", METHODS))
        actions = getattr(self.callback, "actions", None)
        if actions:
            return {method for method in actions if method in METHODS} & allowed
        return {m for m in METHODS if hasattr(view_class, m)} & allowed

    def url_for(self, owner) -> str:
        """A URL of this route naming an object of the owner's organization."""
        if not self.kwargs:
            return reverse(self.name)
        if self.name in ROUTE_KWARGS:
            values = ROUTE_KWARGS[self.name](owner)
            return reverse(self.name, kwargs={name: values[name] for name in self.kwargs})
        factory = FACTORIES.get(self.model)
        assert factory is not None, f"no factory for {self.route}"
        obj = factory(owner)
        return reverse(self.name, kwargs={name: obj.pk for name in self.kwargs})

    @property
    def has_factory(self) -> bool:
        return self.name in ROUTE_KWARGS or self.model in FACTORIES

    @property
    def model(self):
        view_class = self.view_class
        model = getattr(view_class, "model", None)
        if model is None:
            queryset = getattr(view_class, "queryset", None)
            model = getattr(queryset, "model", None)
        return model


def _walk(patterns, prefix: str = ""):
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from _walk(pattern.url_patterns, prefix + str(pattern.pattern))
        elif isinstance(pattern, URLPattern):
            yield prefix + str(pattern.pattern), pattern


def _is_public(route: Route) -> bool:
    view_class = route.view_class
    return view_class is not None and getattr(view_class, "permission_classes", None) == []


def api_routes(include_public: bool = False) -> list[Route]:
    routes = []
    for route, pattern in _walk(get_resolver().url_patterns):
        if not route.startswith(API_PREFIX):
            continue
        kwargs = tuple(pattern.pattern.regex.groupindex)
        found = Route(route, pattern.name, pattern.callback, kwargs)
        if include_public or not _is_public(found):
            routes.append(found)
    return routes


def test_public_routes_are_exactly_the_acknowledged_ones():
    public = {route.name for route in api_routes(include_public=True) if _is_public(route)}
    assert public == set(PUBLIC_ROUTES)


def _assert_not_found_body(route: Route, response) -> None:
    if response["Content-Type"].startswith("application/json"):
        assert response.json()["error"]["code"].endswith("not_found"), response.content
    else:
        assert route.name.startswith(PLAIN_TEXT_ERROR_PREFIX), (route.name, response.content)


def _detail_routes() -> list[Route]:
    return [route for route in api_routes() if route.kwargs]


def _list_routes() -> list[Route]:
    return [route for route in api_routes() if not route.kwargs and "get" in route.methods]


@pytest.fixture
def world(org_a, org_b, alice, bob, charlie):
    """alice (owner) and bob (employee) in org A; charlie owns org B."""
    return {"alice": alice, "bob": bob, "charlie": charlie}


@pytest.fixture
def outsiders(world, client_for, key_client):
    """charlie signed in, and charlie's org-B API key with every scope."""
    from cadre.tenancy.roles import SCOPES

    charlie = world["charlie"]
    return {
        "session": client_for(charlie),
        "api_key": key_client(charlie, list(SCOPES)),
    }


def test_the_resolver_finds_the_tenancy_and_audit_routes():
    names = {route.name for route in api_routes()}
    assert {
        "member-detail",
        "member-deactivate",
        "department-list",
        "audit-event-detail",
        "grant-detail",
        "organization",
    } <= names


def test_every_detail_route_model_has_a_factory():
    missing = [
        f"{route.route} (model {route.model})"
        for route in _detail_routes()
        if not route.has_factory
    ]
    assert not missing, "add a factory to tests/api/tenant_objects.py for: " + ", ".join(missing)


@pytest.mark.parametrize("credential", ["session", "api_key"])
def test_outsider_gets_404_on_every_object_route_of_another_org(world, outsiders, credential):
    client = outsiders[credential]
    alice = world["alice"]
    checked = 0
    for route in _detail_routes():
        assert route.name, f"unnamed route {route.route}"
        for method in sorted(route.methods):
            url = route.url_for(alice)
            events_before = AuditEvent.objects.filter(organization=alice.organization).count()
            response = getattr(client, method)(url, {}, format="json")
            if (route.name, method) in VALIDATES_BEFORE_LOOKUP:
                assert response.status_code in (400, 404), (method, url, response.content)
            else:
                assert response.status_code == 404, (
                    method,
                    url,
                    response.status_code,
                    response.content,
                )
                _assert_not_found_body(route, response)
            assert (
                AuditEvent.objects.filter(organization=alice.organization).count() == events_before
            ), f"{method} {url} changed org A"
            checked += 1
    assert checked >= 15


@pytest.mark.parametrize("credential", ["session", "api_key"])
def test_list_endpoints_never_include_another_orgs_objects(world, outsiders, credential):
    client = outsiders[credential]
    alice = world["alice"]
    org_a_ids: dict[type, set[int]] = {}
    for model, factory in FACTORIES.items():
        org_a_ids.setdefault(model, set()).add(factory(alice).pk)
    org_a_ids[Member] |= set(
        Member.objects.filter(organization=alice.organization).values_list("pk", flat=True)
    )
    for route in _list_routes():
        response = client.get(reverse(route.name))
        assert response.status_code < 500, (route.route, response.content)
        # 202: accepted for background work (a vector map being computed); its body is checked.
        if response.status_code not in (200, 202):
            # e.g. no scope carries the permission, or the route needs query parameters
            assert response.status_code in (400, 403, 404), (route.route, response.content)
            continue
        if not response["Content-Type"].startswith("application/json"):
            continue
        body = response.json()
        rows = body["results"] if isinstance(body, dict) and "results" in body else body
        if route.name == "organization":
            assert body["id"] == world["charlie"].organization_id
            continue
        if route.model is None or not isinstance(rows, list) or route.name in NOT_OBJECT_LISTS:
            continue  # not a collection of objects (e.g. a stats summary)
        seen = {row["id"] for row in rows}
        assert not seen & org_a_ids[route.model], (route.route, seen & org_a_ids[route.model])
        if isinstance(body, dict) and "count" in body:
            assert body["count"] == len(rows) or body["count"] > len(rows)


def test_outsider_filtering_by_another_orgs_ids_learns_nothing(world, outsiders):
    """Filtering by an org-A id answers exactly as filtering by an id that does not exist."""
    client = outsiders["session"]
    alice = world["alice"]
    department = FACTORIES[Department](alice)
    for url, param, value in [
        ("/api/v1/members/", "department", department.pk),
        ("/api/v1/members/", "manager", alice.pk),
        ("/api/v1/departments/", "parent", department.pk),
        ("/api/v1/im-identities/", "member", alice.pk),
        ("/api/v1/invitations/", "member", alice.pk),
        ("/api/v1/api-keys/", "created_by", alice.pk),
    ]:
        real = client.get(url, {param: value})
        missing = client.get(url, {param: 10**9})
        assert real.status_code == missing.status_code, (url, param, real.content)
        assert real.json() == missing.json() or real.status_code == 200
        if real.status_code == 200:
            assert real.json()["results"] == []


def test_outsider_cannot_reference_another_orgs_objects_in_relations(world, outsiders):
    alice = world["alice"]
    department = FACTORIES[Department](alice)
    client = outsiders["session"]
    response = client.post(
        "/api/v1/departments/", {"name": "Sneaky", "parent": department.pk}, format="json"
    )
    assert response.status_code == 400
    assert "parent" in response.json()["error"]["details"]
    response = client.post(
        "/api/v1/im-identities/",
        {"member": alice.pk, "platform": "slack", "platform_user_id": "U1"},
        format="json",
    )
    assert response.status_code == 400
    assert "member" in response.json()["error"]["details"]
    response = client.post(
        "/api/v1/grants/",
        {
            "member": world["charlie"].pk,
            "permission": "member.manage",
            "target_type": "department",
            "target_id": department.pk,
        },
        format="json",
    )
    assert response.status_code in (400, 404)
    assert not Department.objects.filter(organization=world["charlie"].organization).exists()


# The sweep itself is hundreds of unauthenticated requests from one address: lift the
# failed-auth limit (tests/console/test_brute_force.py tests it) so each route answers 401.
@override_settings(
    CADRE_API_THROTTLE_RATES={**settings.CADRE_API_THROTTLE_RATES, "auth_failure": "100000/m"}
)
def test_unauthenticated_client_gets_401_on_every_api_route(world):
    client = APIClient()
    alice = world["alice"]
    for route in api_routes():
        url = route.url_for(alice)
        for method in sorted(route.methods):
            response = getattr(client, method)(url, {}, format="json")
            if response.status_code == 404 and route.name.startswith(ANONYMOUS_READ_PREFIXES):
                _assert_not_found_body(route, response)
                continue
            assert response.status_code == 401, (method, url, response.status_code)
            if route.name.startswith(PLAIN_TEXT_ERROR_PREFIX):
                continue
            assert response.json()["error"]["code"] == "not_authenticated"
