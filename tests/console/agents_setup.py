# ruff: noqa: F811 - the fixtures imported from tests.agents.conftest are parameters here
"""Fixtures for the console's agents pages: a published sales template dispatched to alice's
and bob's position (hooks that load the embedding model are off, as in tests/agents)."""

from __future__ import annotations

import pytest
from django.test import Client

from cadre.agents import services

# The runtime tests' own fixtures; this module adds the console's template and deployment.
from tests.agents.conftest import (  # noqa: F401 - fixtures re-exported to the page tests
    bob_agent,
    owner,
    publish,
    published,
    sales,
)

TOOLS = {
    "memory_search": {"risk": "low", "confirmation": "never"},
    "im_send": {"risk": "medium", "confirmation": "high_risk"},
    "task_create": {"risk": "low", "confirmation": "never"},
}
HOOKS_OFF = {
    "assemble_context": [{"name": "memory_retrieval", "enabled": False}],
    "process_memory": [{"name": "memory_write", "enabled": False}],
}


def client(member) -> Client:
    browser = Client()
    browser.force_login(member.user)
    return browser


@pytest.fixture
def template(owner):
    return services.template_create(
        actor=owner,
        name="Sales assistant",
        code="sales-assistant",
        agent_md="# Persona\nYou help {{member.display_name}} sell.",
        sop="# SOP\n## Pricing\nStandard discount is 5 percent.\n",
        user_md_template="# About {{member.display_name}}",
        tool_permissions=TOOLS,
        model_settings={"provider": "offline", "model": "offline-1", "budget": {"max_steps": 6}},
        memory_policy={"read_scopes": ["agent", "user"], "write_scopes": ["agent"]},
        hooks=HOOKS_OFF,
    )


@pytest.fixture
def deployment(owner, template, published, sales, alice, bob):
    alice.positions.add(sales)
    bob.positions.add(sales)
    return services.deployment_create(
        actor=owner, name="Sales agents", template=template, version=published, positions=[sales]
    )


@pytest.fixture
def alice_agent(deployment, alice):
    return deployment.agents.get(member=alice)


@pytest.fixture
def second_version(owner, template, published):
    draft = services.version_draft(actor=owner, template=template)
    services.version_update(
        actor=owner, version=draft, sop="# SOP\n## Pricing\nStandard discount is 7 percent.\n"
    )
    return publish(owner, draft)
