"""Fixtures for the agents suite: a published template deployed to alice's and bob's position."""

from __future__ import annotations

import pytest

from cadre.agents import services
from cadre.tenancy.actors import member_actor
from tests.factories import DepartmentFactory, PositionFactory

OFFLINE_TOOLS = {
    "memory_search": {"risk": "low", "confirmation": "never"},
    "im_send": {"risk": "medium", "confirmation": "high_risk"},
    "task_create": {"risk": "low", "confirmation": "never"},
    "await_event": {"risk": "low", "confirmation": "never"},
    "delegate": {"risk": "medium", "confirmation": "never"},
}


def publish(actor, version):
    services.version_submit(actor=actor, version=version)
    return services.version_publish(actor=actor, version=version, reason="ready")


@pytest.fixture
def owner(alice):
    return member_actor(alice)


@pytest.fixture
def sales(org_a):
    return PositionFactory(organization=org_a, name="Sales", code="sales")


@pytest.fixture
def template(owner):
    return services.template_create(
        actor=owner,
        name="Sales assistant",
        code="sales-assistant",
        agent_md="# Persona\nYou help {{member.display_name}} sell.",
        sop="# SOP\n## Pricing\nStandard discount is 5 percent.\n",
        user_md_template="# About {{member.display_name}}\nTitle: {{member.title}}",
        tool_permissions=OFFLINE_TOOLS,
        model_settings={"provider": "offline", "model": "offline-1", "budget": {"max_steps": 6}},
        memory_policy={"read_scopes": ["agent", "user"], "write_scopes": ["agent"]},
        # Retrieval embeds the query with the local model (seconds on first load): tested on
        # its own in test_hooks.py, off elsewhere to keep the suite fast.
        hooks={"assemble_context": [{"name": "memory_retrieval", "enabled": False}]},
    )


@pytest.fixture
def published(owner, template):
    return publish(owner, template.versions.get())


@pytest.fixture
def deployment(owner, template, published, sales, alice, bob):
    alice.positions.add(sales)
    bob.positions.add(sales)
    return services.deployment_create(
        actor=owner, name="Sales agents", template=template, positions=[sales]
    )


@pytest.fixture
def bob_agent(deployment, bob):
    return deployment.agents.get(member=bob)


@pytest.fixture
def departments(org_a):
    return (
        DepartmentFactory(organization=org_a, name="East"),
        DepartmentFactory(organization=org_a, name="West"),
    )
