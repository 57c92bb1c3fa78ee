# ruff: noqa: F811 - the fixtures imported below are parameters here
"""/mcp/ in the cross-tenant sweep: every tool Cadre's MCP server lists (a new tool without an
entry here fails) and every resource template is called by another organization's key, with
all scopes, naming Acme's memory, member, agent and skill. Nothing of Acme's comes back and
nothing of Acme's changes; what is refused is refused as not found (or, for scopes, as
permission denied), never as a server error."""

from __future__ import annotations

import json

import pytest

from cadre.governance.models import Confirmation
from cadre.memory import services
from cadre.memory.models import Memory
from cadre.tenancy.actors import member_actor
from hub.tests.factories import publish as hub_publish
from tests.agents.conftest import (  # noqa: F401 - fixtures: bob's agent on a published template
    bob_agent,
    deployment,
    owner,
    published,
    sales,
    template,
)
from tests.api.test_mcp_server import key_for, run, tool
from tests.live_server import live_server_url  # noqa: F401 - fixture: uvicorn on loopback
from tests.skills.conftest import _instance_signing_key  # noqa: F401 - autouse: a fresh key

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

SECRET = "Acme's vault code is kept in the blue folder"

# tool -> arguments naming Acme's objects ({memory}, {alice}, {agent}, {skill})
OUTSIDER_CALLS = {
    "memory_search": {"query": "vault code blue folder", "scopes": ["user:{alice}"], "force": True},
    "memory_add": {"content": "Acme owes us money", "scope": "user", "scope_id": "{alice}"},
    "memory_feedback": {
        "text": "No, the vault code is in the red folder",
        "scopes": ["user:{alice}"],
    },
    "memory_delete": {"memory_id": "{memory}"},
    "skill_search": {"query": "acme-vault"},
    "skill_get": {"name": "{skill}"},
    "confirmation_request": {
        "action": "acme.wire_money",
        "arguments": {"agent": "{agent}"},
        "request_key": "acme-{agent}",
        "wait_seconds": 0,
    },
}
RESOURCES = ("sop", "agent.md", "user.md")


def _fill(value, names: dict):
    if isinstance(value, str):
        for key, replacement in names.items():
            if value == "{" + key + "}":
                return replacement
            value = value.replace("{" + key + "}", str(replacement))
        return value
    if isinstance(value, list):
        return [_fill(item, names) for item in value]
    if isinstance(value, dict):
        return {key: _fill(item, names) for key, item in value.items()}
    return value


def test_every_tool_and_resource_of_another_organization_stays_out(
    live_server_url, alice, charlie, bob_agent
):
    memory = services.memory_add(
        actor=member_actor(alice),
        scope="user",
        kind="fact",
        content=SECRET,
        source_kind="user_statement",
    )
    skill = hub_publish(alice, "acme-vault", "1.0.0").package
    names = {
        "memory": memory.pk,
        "alice": alice.pk,
        "agent": bob_agent.pk,
        "skill": skill.full_name,
    }
    _, secret = key_for(charlie)

    async def listed(session):
        tools = await session.list_tools()
        templates = await session.list_resource_templates()
        return [t.name for t in tools.tools], [t.uri_template for t in templates.resource_templates]

    def read(uri):
        async def call(session):
            try:
                result = await session.read_resource(uri)
            except Exception as error:  # the SDK raises the server's error
                return True, str(error)
            return False, json.dumps([c.model_dump() for c in result.contents], default=str)

        return call

    ((tool_names, templates),) = run(live_server_url, secret, listed)
    assert set(tool_names) == set(OUTSIDER_CALLS), "a tool without an outsider call in the sweep"
    assert {t.rsplit("/", 1)[-1] for t in templates} == set(RESOURCES)
    acme_before = list(
        Memory.objects.filter(organization=alice.organization).values_list(
            "pk", "content", "status", "version"
        )
    )
    confirmations_before = Confirmation.objects.filter(organization=alice.organization).count()

    calls = [tool(name, **_fill(arguments, names)) for name, arguments in OUTSIDER_CALLS.items()]
    calls += [read(f"cadre://agents/{bob_agent.pk}/{name}") for name in RESOURCES]
    outcomes = run(live_server_url, secret, *calls)

    for label, (is_error, payload) in zip([*OUTSIDER_CALLS, *RESOURCES], outcomes, strict=True):
        text = payload if isinstance(payload, str) else json.dumps(payload, default=str)
        assert SECRET not in text and "vault code is kept" not in text, label
        if is_error:
            assert any(code in text for code in ("not_found", "permission_denied", "invalid")), (
                label,
                text,
            )
    by_name = dict(zip([*OUTSIDER_CALLS, *RESOURCES], outcomes, strict=True))
    assert by_name["memory_delete"][0] and "not_found" in by_name["memory_delete"][1]
    assert by_name["skill_get"][0] and "not_found" in by_name["skill_get"][1]
    for resource in RESOURCES:
        assert by_name[resource][0] and "not_found" in by_name[resource][1]
    if not by_name["memory_search"][0]:
        assert by_name["memory_search"][1]["hits"] == []
    if not by_name["skill_search"][0] and skill.visibility != "public":
        assert skill.full_name not in json.dumps(by_name["skill_search"][1])

    assert acme_before == list(
        Memory.objects.filter(organization=alice.organization).values_list(
            "pk", "content", "status", "version"
        )
    )
    assert (
        Confirmation.objects.filter(organization=alice.organization).count() == confirmations_before
    )
