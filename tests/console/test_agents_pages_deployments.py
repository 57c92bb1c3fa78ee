# ruff: noqa: F811 - the fixtures imported from tests.console.agents_setup are parameters here
"""Deployments in the console: who may see and dispatch, dispatch creates agents, rollouts (at
once and department by department) and rollback change the agents' versions."""

from __future__ import annotations

import pytest
from django.urls import reverse

from cadre.agents.models import Agent, Deployment, Rollout
from tests.console.agents_setup import (  # noqa: F401 - fixtures
    client,
    deployment,
    owner,
    published,
    sales,
    second_version,
    template,
)
from tests.factories import DepartmentFactory

pytestmark = pytest.mark.django_db


def test_managers_dispatch_auditors_read_employees_are_denied(deployment, bob, make_member):
    admin = make_member(roles=["business_admin"])
    listing = client(admin).get(reverse("console:deployments"))
    assert listing.status_code == 200
    assert "Sales agents" in listing.content.decode()
    assert client(admin).get(reverse("console:deployment_create")).status_code == 200
    auditor = make_member(roles=["auditor"])
    read = client(auditor).get(reverse("console:deployment", args=[deployment.pk]))
    assert read.status_code == 200
    assert "Start rollout" not in read.content.decode()
    assert client(auditor).get(reverse("console:deployment_create")).status_code == 403
    assert client(bob).get(reverse("console:deployments")).status_code == 403
    assert client(bob).get(reverse("console:deployment", args=[deployment.pk])).status_code == 403


def test_outsider_gets_404_for_deployment_pages(deployment, charlie):
    outsider = client(charlie)
    assert outsider.get(reverse("console:deployment", args=[deployment.pk])).status_code == 404
    assert (
        outsider.post(reverse("console:deployment_sync", args=[deployment.pk])).status_code == 404
    )
    assert outsider.get(reverse("console:deployment_stop", args=[deployment.pk])).status_code == 404


def test_dispatch_from_the_console_gives_each_target_an_agent(
    alice, bob, make_member, published, sales
):
    carol = make_member(display_name="Carol")
    bob.positions.add(sales)
    response = client(alice).post(
        reverse("console:deployment_create"),
        {
            "name": "Sales pilot",
            "version": published.pk,
            "positions": [sales.pk],
            "members": [carol.pk],
            "channels": ["console", "feishu"],
        },
    )
    deployment = Deployment.objects.get(name="Sales pilot")
    assert response.status_code == 302
    assert deployment.channels == ["console", "feishu"]
    assert set(deployment.agents.values_list("member_id", flat=True)) == {bob.pk, carol.pk}
    page = client(alice).get(response["Location"]).content.decode()
    assert "Bob" in page and "Carol" in page
    assert 'data-testid="agent-total">2<' in page


def test_dispatch_needs_a_target(alice, published):
    response = client(alice).post(
        reverse("console:deployment_create"),
        {"name": "Nobody", "version": published.pk, "channels": ["console"]},
    )
    assert response.status_code == 200
    assert "Choose at least one position, department or member." in response.content.decode()
    assert not Deployment.objects.filter(name="Nobody").exists()


def test_rollout_all_at_once_then_rollback(alice, deployment, published, second_version):
    browser = client(alice)
    started = browser.post(
        reverse("console:deployment_rollout", args=[deployment.pk]),
        {"version": second_version.pk, "strategy": "all"},
    )
    assert started.status_code == 302
    versions = set(deployment.agents.values_list("version__number", flat=True))
    assert versions == {2}
    rollout = Rollout.objects.get(deployment=deployment)
    page = browser.get(reverse("console:deployment", args=[deployment.pk])).content.decode()
    assert 'data-version="2">2<' in page
    assert "Roll back to v1" in page

    browser.post(
        reverse("console:rollout_rollback", args=[deployment.pk, rollout.pk]),
        {"reason": "too chatty"},
    )
    assert set(deployment.agents.values_list("version__number", flat=True)) == {1}
    rollout.refresh_from_db()
    deployment.refresh_from_db()
    assert rollout.status == Rollout.Status.ROLLED_BACK
    assert deployment.version_id == published.pk


def test_rollout_department_by_department(alice, bob, owner, published, second_version, sales):
    from cadre.agents import services

    east = DepartmentFactory(organization=alice.organization, name="East")
    west = DepartmentFactory(organization=alice.organization, name="West")
    for member, department in ((alice, east), (bob, west)):
        member.department = department
        member.save(update_fields=["department"])
        member.positions.add(sales)
    deployment = services.deployment_create(
        actor=owner,
        name="Regional",
        template=published.template,
        version=published,
        positions=[sales],
    )
    browser = client(alice)
    browser.post(
        reverse("console:deployment_rollout", args=[deployment.pk]),
        {"version": second_version.pk, "strategy": "by_department"},
    )
    agents = Agent.objects.filter(deployment=deployment)
    assert agents.get(member=alice).version_id == second_version.pk  # East first
    assert agents.get(member=bob).version_id == published.pk
    page = browser.get(reverse("console:deployment", args=[deployment.pk])).content.decode()
    assert "1 of 2 agents moved" in page
    rollout = Rollout.objects.get(deployment=deployment)
    browser.post(reverse("console:rollout_advance", args=[deployment.pk, rollout.pk]))
    assert agents.get(member=bob).version_id == second_version.pk
    rollout.refresh_from_db()
    assert rollout.status == Rollout.Status.COMPLETED


def test_rollout_to_an_unpublished_version_is_refused(alice, deployment, template, owner):
    from cadre.agents import services

    draft = services.version_draft(actor=owner, template=template)
    response = client(alice).post(
        reverse("console:deployment_rollout", args=[deployment.pk]),
        {"version": draft.pk, "strategy": "all"},
    )
    assert response.status_code == 400
    assert "Select a valid choice" in response.content.decode()
    assert not Rollout.objects.filter(deployment=deployment).exists()


def test_the_rollout_form_offers_the_newest_version_and_refuses_none_with_a_reason(
    alice, deployment, second_version
):
    browser = client(alice)
    page = browser.get(reverse("console:deployment", args=[deployment.pk])).content.decode()
    assert f'<option value="{second_version.pk}" selected>v2' in page
    assert "---------" not in page
    response = browser.post(
        reverse("console:deployment_rollout", args=[deployment.pk]), {"strategy": "all"}
    )
    assert response.status_code == 400
    assert "Choose the published version to roll out." in response.content.decode()
    assert not Rollout.objects.filter(deployment=deployment).exists()
    assert set(deployment.agents.values_list("version__number", flat=True)) == {1}


def test_stop_from_the_console_stops_the_agents(alice, deployment):
    response = client(alice).post(
        reverse("console:deployment_stop", args=[deployment.pk]), {"reason": "pilot over"}
    )
    assert response.status_code == 302
    assert set(deployment.agents.values_list("status", flat=True)) == {Agent.Status.STOPPED}
