"""The skills API under the house tenancy rules: every object route answers an outsider 404
(session or API key) and changes nothing; lists never show another organization's rows."""

from __future__ import annotations

import pytest
from django.urls import reverse

from cadre.governance.models import AuditEvent
from cadre.tenancy.roles import SCOPES
from tests.api.test_cross_tenant import api_routes

pytestmark = pytest.mark.django_db
PREFIX = "api/v1/skills/"


def _skills_routes():
    # ClawHub's own /api/v1/skills… routes (no trailing slash) are the Hub's, swept there.
    return [
        route
        for route in api_routes()
        if route.route.startswith(PREFIX) and (route.name or "").startswith("skill-")
    ]


def test_every_skills_object_route_is_404_for_an_outsider(alice, charlie, client_for, key_client):
    clients = [client_for(charlie), key_client(charlie, list(SCOPES))]
    checked = 0
    for route in _skills_routes():
        if not route.kwargs:
            continue
        for method in sorted(route.methods):
            for client in clients:
                url = route.url_for(alice)
                before = AuditEvent.objects.filter(organization=alice.organization).count()
                response = getattr(client, method)(url, {}, format="json")
                assert response.status_code == 404, (method, url, response.content)
                assert response.json()["error"]["code"].endswith("not_found")
                after = AuditEvent.objects.filter(organization=alice.organization).count()
                assert after == before
                checked += 1
    assert checked >= 12  # candidates: detail, decisions, resubmit; proposals: 3 routes


def test_skills_lists_never_show_another_organizations_rows(alice, charlie, client_for):
    from tests.api.tenant_objects import FACTORIES

    outsider = client_for(charlie)
    for route in _skills_routes():
        if route.kwargs or "get" not in route.methods or route.model is None:
            continue
        own = FACTORIES[route.model](alice)
        response = outsider.get(reverse(route.name))
        assert response.status_code in (200, 403), (route.route, response.content)
        if response.status_code == 200:
            assert own.pk not in {row["id"] for row in response.json()["results"]}


def _queries(client, url: str) -> int:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client.get(url)  # warm up: the first request stores the session's organization
    with CaptureQueriesContext(connection) as context:
        response = client.get(url)
    assert response.status_code == 200
    return len(context.captured_queries)


def test_candidate_lists_run_the_same_queries_for_few_and_many(alice, make_member, client_for):
    from cadre.tenancy import services as tenancy_services
    from cadre.tenancy.actors import member_actor
    from tests.factories import DepartmentFactory
    from tests.skills.factories import tenant_factories

    make = next(f for model, f in tenant_factories().items() if model.__name__ == "SkillCandidate")
    sales = DepartmentFactory(organization=alice.organization, name="Sales")
    reviewer = make_member(display_name="Gina", email="gina@acme.test")
    tenancy_services.object_grant(
        actor=member_actor(alice), member=reviewer, permission="skill.review", target=sales
    )
    author = make_member(roles=("business_admin",), department=sales, email="sam@acme.test")
    make(author)
    urls = ["/api/v1/skills/candidates/", "/api/v1/skills/candidates/?to_decide=true"]
    few = [_queries(client_for(reviewer), url) for url in urls]
    for _ in range(4):
        make(author)
    many = [_queries(client_for(reviewer), url) for url in urls]
    assert many == few
    listed = client_for(reviewer).get(urls[1]).json()
    assert listed["count"] == 5  # the grant on Sales reaches them all
