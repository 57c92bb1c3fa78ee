"""Dispatch: deployments create agents; rollouts (all at once, by department) and rollback;
deactivating a member stops their agents."""

from __future__ import annotations

import pytest

from cadre.agents import services
from cadre.agents.models import Agent, Deployment, Rollout, Run
from cadre.agents.runtime.lifecycle import execution as engine
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.errors import Conflict, InvalidInput
from cadre.governance.models import AuditEvent
from cadre.tenancy import services as tenancy_services
from cadre.tenancy.actors import member_actor
from tests.agents.conftest import publish
from tests.factories import MemberFactory

pytestmark = pytest.mark.django_db


def test_deployment_gives_each_targeted_member_an_agent_with_their_user_md(deployment, alice, bob):
    agents = {agent.member_id: agent for agent in deployment.agents.all()}
    assert set(agents) == {alice.pk, bob.pk}
    assert agents[bob.pk].user_md.startswith("# About Bob")
    assert agents[bob.pk].memory_scope_key == f"agent:{agents[bob.pk].pk}"
    assert AuditEvent.objects.filter(action="deployment.create").count() == 1


def test_only_published_versions_deploy(owner, template, sales):
    with pytest.raises(Conflict):
        services.deployment_create(actor=owner, name="x", template=template, positions=[sales])


def test_department_targets_include_sub_departments_and_skip_deactivated(
    owner, org_a, template, published, departments
):
    east, west = departments
    east_north = type(east).objects.create(organization=org_a, name="North", parent=east)
    inside = MemberFactory(organization=org_a, department=east_north)
    MemberFactory(organization=org_a, department=west)
    MemberFactory(organization=org_a, department=east, status="deactivated")
    deployment = services.deployment_create(
        actor=owner, name="East", template=template, departments=[east]
    )
    assert list(deployment.agents.values_list("member_id", flat=True)) == [inside.pk]


def test_sync_adds_agents_for_new_targets(owner, deployment, sales, org_a):
    newcomer = MemberFactory(organization=org_a)
    newcomer.positions.add(sales)
    created = services.deployment_sync(actor=owner, deployment=deployment)
    assert [agent.member_id for agent in created] == [newcomer.pk]
    assert services.deployment_sync(actor=owner, deployment=deployment) == []


def _new_version(owner, template, sop):
    draft = services.version_draft(actor=owner, template=template)
    services.version_update(actor=owner, version=draft, sop=sop)
    return publish(owner, draft)


def test_rollout_all_at_once_then_rollback(owner, deployment, template, published):
    v2 = _new_version(owner, template, "v2 sop")
    rollout = services.rollout_start(actor=owner, deployment=deployment, version=v2)
    assert rollout.status == Rollout.Status.COMPLETED
    assert set(deployment.agents.values_list("version_id", flat=True)) == {v2.pk}
    deployment.refresh_from_db()
    assert deployment.version_id == v2.pk
    services.rollout_rollback(actor=owner, rollout=rollout, reason="bad answers")
    assert set(deployment.agents.values_list("version_id", flat=True)) == {published.pk}
    deployment.refresh_from_db()
    assert deployment.version_id == published.pk
    assert AuditEvent.objects.filter(action="deployment.rollback", reason="bad answers").exists()
    with pytest.raises(Conflict):
        services.rollout_rollback(actor=owner, rollout=rollout)


def test_rollout_department_by_department(
    owner, deployment, template, published, departments, alice, bob
):
    east, west = departments
    alice.department = west
    alice.save(update_fields=["department"])
    bob.department = east
    bob.save(update_fields=["department"])
    v2 = _new_version(owner, template, "v2 sop")
    rollout = services.rollout_start(
        actor=owner, deployment=deployment, version=v2, strategy="by_department"
    )
    assert rollout.department_order == [east.pk, west.pk]  # by name
    versions = dict(deployment.agents.values_list("member_id", "version_id"))
    assert versions == {bob.pk: v2.pk, alice.pk: published.pk}
    deployment.refresh_from_db()
    assert deployment.status == Deployment.Status.ROLLING_OUT
    assert deployment.version_id == published.pk
    with pytest.raises(Conflict):  # one rollout at a time
        services.rollout_start(actor=owner, deployment=deployment, version=v2)
    rollout = services.rollout_advance(actor=owner, rollout=rollout)
    assert rollout.status == Rollout.Status.COMPLETED
    deployment.refresh_from_db()
    assert deployment.version_id == v2.pk and deployment.status == Deployment.Status.ACTIVE
    with pytest.raises(Conflict):
        services.rollout_advance(actor=owner, rollout=rollout)


def test_partial_rollout_can_be_rolled_back(
    owner, deployment, template, published, departments, alice, bob
):
    east, west = departments
    bob.department = east
    bob.save(update_fields=["department"])
    alice.department = west
    alice.save(update_fields=["department"])
    v2 = _new_version(owner, template, "v2")
    rollout = services.rollout_start(
        actor=owner, deployment=deployment, version=v2, strategy="by_department"
    )
    services.rollout_rollback(actor=owner, rollout=rollout)
    assert set(deployment.agents.values_list("version_id", flat=True)) == {published.pk}


def test_rollout_needs_a_published_version_of_the_same_template(owner, deployment, template):
    draft = services.version_draft(actor=owner, template=template)
    with pytest.raises(Conflict):
        services.rollout_start(actor=owner, deployment=deployment, version=draft)
    other = services.template_create(actor=owner, name="Other", code="other")
    other_v1 = publish(owner, other.versions.get())
    with pytest.raises(InvalidInput):
        services.rollout_start(actor=owner, deployment=deployment, version=other_v1)


def test_deactivating_a_member_stops_their_agents_and_runs(
    owner, deployment, bob, bob_agent, django_capture_on_commit_callbacks
):
    run = runtime.run_start(actor=member_actor(bob), agent=bob_agent, text="hello")
    stopped = services.agents_stop_for_member(actor=owner, member=bob)
    assert stopped == 1
    bob_agent.refresh_from_db()
    run.refresh_from_db()
    assert bob_agent.status == Agent.Status.STOPPED
    assert run.status == Run.Status.CANCELLED
    assert AuditEvent.objects.filter(action="agent.stop", target_id=str(bob_agent.pk)).exists()
    with pytest.raises(Conflict):
        runtime.run_start(actor=member_actor(bob), agent=bob_agent, text="again")


def test_member_deactivation_stops_their_agents_through_the_registered_listener(
    owner, deployment, bob, bob_agent
):
    run = runtime.run_start(actor=member_actor(bob), agent=bob_agent, text="hello")
    tenancy_services.member_deactivate(actor=owner, member=bob, reason="left")
    bob_agent.refresh_from_db()
    run.refresh_from_db()
    assert bob_agent.status == Agent.Status.STOPPED and bob_agent.stop_reason == "left"
    assert run.status == Run.Status.CANCELLED


def test_member_deactivation_with_no_listener_stops_no_agent(owner, deployment, bob, bob_agent):
    with tenancy_services.member_deactivated.overridden():
        tenancy_services.member_deactivate(actor=owner, member=bob)
    bob.refresh_from_db()
    bob_agent.refresh_from_db()
    assert bob.status == "deactivated"
    assert bob_agent.status == Agent.Status.ACTIVE
    assert not AuditEvent.objects.filter(action="agent.stop").exists()


def test_runtime_refuses_to_run_for_a_deactivated_member(deployment, bob, bob_agent):
    run = runtime.run_start(actor=member_actor(bob), agent=bob_agent, text="hello")
    bob.status = "deactivated"
    bob.save(update_fields=["status"])
    assert engine.run_execute(run.pk) == Run.Status.CANCELLED
    run.refresh_from_db()
    assert run.error == "the member is deactivated"
    assert not run.steps.exists()


def test_user_md_is_the_members_to_edit(deployment, bob, alice, bob_agent, make_member):
    services.agent_update_user_md(actor=member_actor(bob), agent=bob_agent, user_md="I like tea")
    bob_agent.refresh_from_db()
    assert bob_agent.user_md == "I like tea"
    colleague = make_member()
    with pytest.raises(Exception):  # noqa: B017 - NotPermitted
        services.agent_update_user_md(actor=member_actor(colleague), agent=bob_agent, user_md="x")
