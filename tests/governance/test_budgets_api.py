"""Budgets API: CRUD with an audit event per change, validation errors with codes that store
nothing, permissions (an employee may not set budgets), an outsider gets 404; provider prices."""

from __future__ import annotations

import pytest

from cadre.agents import services as agent_services
from cadre.governance.models import AuditEvent, Budget
from cadre.tenancy.actors import member_actor
from tests.factories import DepartmentFactory

pytestmark = pytest.mark.django_db

URL = "/api/v1/budgets/"


def _create(client, **fields):
    body = {"scope": "organization", "period": "monthly", "metric": "tokens", "limit": "1000"}
    return client.post(URL, {**body, **fields}, format="json")


def test_owner_creates_reads_changes_and_deletes_a_budget_each_audited(alice, client_for):
    client = client_for(alice)
    sales = DepartmentFactory(organization=alice.organization, name="Sales")
    created = _create(client, scope="department", department=sales.pk, enforcement="soft")
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["subject"] == "department Sales" and body["enforcement"] == "soft"
    assert body["used_tokens"] == 0 and body["percent_used"] == 0.0
    budget_id = body["id"]
    assert client.get(URL).json()["results"][0]["id"] == budget_id
    changed = client.patch(f"{URL}{budget_id}/", {"limit": "2000.5"}, format="json")
    assert changed.status_code == 400  # a token limit is a whole number
    assert changed.json()["error"]["code"] == "invalid"
    assert Budget.objects.get().limit == 1000
    changed = client.patch(f"{URL}{budget_id}/", {"limit": "2000"}, format="json")
    assert changed.status_code == 200 and changed.json()["limit"] == "2000.000000"
    assert client.delete(f"{URL}{budget_id}/").status_code == 204
    assert not Budget.objects.exists()
    actions = list(
        AuditEvent.objects.filter(action__startswith="budget.")
        .order_by("id")
        .values_list("action", flat=True)
    )
    assert actions == ["budget.create", "budget.update", "budget.delete"]


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"scope": "department"}, "department"),
        ({"scope": "member"}, "member"),
        ({"scope": "template", "template": 999999}, "template"),
        ({"limit": "0"}, "limit"),
        ({"limit": "-5"}, "limit"),
        ({"metric": "bananas"}, "metric"),
        ({"scope": "organization", "member": "me"}, "member"),
    ],
)
def test_invalid_budget_is_a_400_naming_its_field_and_stores_nothing(
    alice, client_for, fields, field
):
    response = _create(client_for(alice), **fields)
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] and field in error["details"], error
    assert not Budget.objects.exists()
    assert not AuditEvent.objects.filter(action="budget.create").exists()


def test_a_second_budget_for_the_same_subject_and_period_is_a_conflict(alice, client_for):
    client = client_for(alice)
    assert _create(client).status_code == 201
    again = _create(client, limit="5")
    assert again.status_code == 409 and again.json()["error"]["code"] == "duplicate"
    assert Budget.objects.count() == 1


def test_employee_may_not_set_or_see_budgets(bob, client_for):
    client = client_for(bob)
    assert _create(client).status_code == 403
    assert client.get(URL).status_code == 403
    assert client.get("/api/v1/usage/summary/").status_code == 403
    assert not Budget.objects.exists()


def test_outsider_gets_404_for_another_organizations_budget(alice, charlie, client_for):
    budget_id = _create(client_for(alice)).json()["id"]
    outsider = client_for(charlie)
    assert outsider.get(f"{URL}{budget_id}/").status_code == 404
    assert outsider.patch(f"{URL}{budget_id}/", {"limit": "1"}, format="json").status_code == 404
    assert outsider.delete(f"{URL}{budget_id}/").status_code == 404
    assert outsider.get(URL).json()["results"] == []
    assert Budget.objects.get().limit == 1000
    # Nor may it aim a budget at the other organization's department.
    sales = DepartmentFactory(organization=alice.organization, name="Sales")
    response = _create(outsider, scope="department", department=sales.pk)
    assert response.status_code == 400 and not Budget.objects.filter(scope="department").exists()


def test_template_budget_names_the_template(alice, client_for):
    template = agent_services.template_create(
        actor=member_actor(alice), name="Sales assistant", code="sales"
    )
    response = _create(client_for(alice), scope="template", template=template.pk)
    assert response.status_code == 201
    assert response.json()["subject"] == "template Sales assistant"
    assert response.json()["template"] == template.pk


def test_provider_prices_per_model_are_validated_and_audited(alice, client_for):
    client = client_for(alice)
    config = agent_services.provider_config_create(
        actor=member_actor(alice), name="OpenAI", kind="openai_compatible"
    )
    url = f"/api/v1/model-providers/{config.pk}/prices/"
    bad = client.put(url, {"input": "-1"}, format="json")
    assert bad.status_code == 400 and "input" in bad.json()["error"]["details"]
    config.refresh_from_db()
    assert config.prices == {}
    prices = {
        "input": "0.5",
        "output": "1.5",
        "models": {"gpt-4o": {"input": "2.5", "cached_input": "1.25", "output": "10"}},
    }
    response = client.put(url, prices, format="json")
    assert response.status_code == 200, response.content
    config.refresh_from_db()
    assert config.prices == prices
    assert AuditEvent.objects.filter(action="provider.prices_set").count() == 1


def test_budget_list_takes_the_same_queries_for_more_budgets(alice, client_for):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client = client_for(alice)
    actor = member_actor(alice)

    def add(index: int) -> None:
        department = DepartmentFactory(organization=alice.organization, name=f"D{index}")
        template = agent_services.template_create(actor=actor, name=f"T{index}", code=f"t{index}")
        assert _create(client, scope="department", department=department.pk).status_code == 201
        assert _create(client, scope="template", template=template.pk).status_code == 201

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get(URL).status_code == 200
        return len(captured)

    add(1)
    few = queries()
    for index in range(2, 6):
        add(index)
    assert queries() == few
    subjects = {row["subject"] for row in client.get(URL).json()["results"]}
    assert {"department D3", "template T5"} <= subjects
