# ruff: noqa: F811 - the fixtures imported below are parameters here
"""Cadre's MCP server, spoken to by the official SDK's Streamable HTTP client against a live
Cadre (uvicorn on loopback): tools listed, each called with its effect checked in the database,
a revoked key refused, another organization's objects not found, scopes enforced, and every
call audited with the key and a trace id."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import httpx2
import pytest
from django.db import connections
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from cadre.governance import confirmations
from cadre.governance.models import AuditEvent, Confirmation
from cadre.memory.models import Memory
from cadre.tenancy import services as tenancy
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
from tests.live_server import live_server_url  # noqa: F401 - fixture: uvicorn on loopback
from tests.skills.conftest import _instance_signing_key  # noqa: F401 - autouse: a fresh key

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

ALL_SCOPES = ["memory:read", "memory:write", "hub:read", "agents:run"]


def key_for(member, scopes=ALL_SCOPES) -> tuple:
    return tenancy.api_key_create(actor=member_actor(member), name="mcp client", scopes=scopes)


async def _session_calls(url: str, secret: str, calls):
    headers = {"Authorization": f"Bearer {secret}", "User-Agent": "test-agent/1.0"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        streamable_http_client(f"{url}/mcp/", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        return [await call(session) for call in calls]


def run(url, secret, *calls):
    return asyncio.run(_session_calls(url, secret, calls))


def tool(tool_name, **arguments):
    async def call(session):
        result = await session.call_tool(tool_name, arguments)
        text = result.content[0].text if result.content else ""
        if result.is_error:
            return True, text
        return False, result.structured_content or json.loads(text or "null")

    return call


def error_code(outcome) -> str:
    """The code of a refused call's error envelope (Cadre's REST shape, as the result text)."""
    is_error, text = outcome
    assert is_error, outcome
    return json.loads(text[text.index("{") :])["error"]["code"]


def test_tools_are_listed_with_their_schemas(live_server_url, alice):
    _, secret = key_for(alice)

    async def names(session):
        listed = await session.list_tools()
        return {t.name: t for t in listed.tools}

    (tools,) = run(live_server_url, secret, names)
    assert set(tools) == {
        "memory_search",
        "memory_add",
        "memory_feedback",
        "memory_delete",
        "skill_search",
        "skill_get",
        "confirmation_request",
    }
    assert tools["memory_search"].input_schema["required"] == ["query"]
    assert tools["memory_delete"].annotations.destructive_hint is True


def test_memory_tools_write_search_correct_and_delete_through_the_services(live_server_url, alice):
    key, secret = key_for(alice)
    added, searched = run(
        live_server_url,
        secret,
        tool("memory_add", content="Alice prefers green tea in the morning", kind="preference"),
        tool("memory_search", query="what does Alice drink in the morning", force=True),
    )
    assert added[0] is False, added
    memory = Memory.objects.get(pk=added[1]["id"])
    assert memory.organization_id == alice.organization_id
    assert memory.source_ref["via"] == "mcp" and memory.source_ref["api_key"] == key.prefix
    assert memory.source_ref["client"].startswith("test-agent")
    assert searched[0] is False
    assert [hit["memory"]["id"] for hit in searched[1]["hits"]][:1] == [memory.pk]

    feedback, deleted = run(
        live_server_url,
        secret,
        tool("memory_feedback", text="No, Alice prefers black coffee in the morning now"),
        tool("memory_delete", memory_id=memory.pk, reason="client asked"),
    )
    assert feedback[0] is False, feedback
    assert feedback[1]["created"], feedback
    assert deleted[0] is False, deleted
    memory.refresh_from_db()
    assert memory.deleted_at is not None

    calls = AuditEvent.objects.filter(organization=alice.organization, action="mcp.call")
    assert calls.count() == 4
    for event in calls:
        assert event.actor_type == "api_key" and key.prefix in event.actor_label
        assert len(event.trace_id) == 32 and event.request_id
    # the services' own events carry the same key
    assert AuditEvent.objects.filter(
        organization=alice.organization, action="memory.add", actor_type="api_key"
    ).exists()


def test_masking_applies_to_what_leaves(live_server_url, alice):
    _, secret = key_for(alice)
    email = "alice.private@example.com"
    added, found = run(
        live_server_url,
        secret,
        tool("memory_add", content=f"Alice's personal e-mail is {email}"),
        tool("memory_search", query="Alice personal e-mail", force=True),
    )
    assert added[0] is False
    assert found[1]["hits"], found
    assert email not in json.dumps(found[1])


def test_a_revoked_key_is_refused_before_any_tool_runs(live_server_url, alice):
    key, secret = key_for(alice)
    tenancy.api_key_revoke(actor=member_actor(alice), key=key)
    before = Memory.objects.count()
    with pytest.raises(BaseException) as refused:
        run(live_server_url, secret, tool("memory_add", content="should never be stored"))
    # the SDK's client surfaces the HTTP refusal as an MCP error response
    assert "Server returned an error response" in repr(refused.value)
    assert Memory.objects.count() == before
    response = httpx2.post(
        f"{live_server_url}/mcp/",
        headers={"Authorization": f"Bearer {secret}", "Accept": "application/json"},
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
    )
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"
    assert "revoked" in response.json()["error"]["message"]
    assert httpx2.post(f"{live_server_url}/mcp/", json={}).status_code == 401


def test_another_organizations_memory_and_agent_are_not_found(
    live_server_url, alice, charlie, bob_agent
):
    _, alice_secret = key_for(alice)
    _, charlie_secret = key_for(charlie)
    (added,) = run(live_server_url, alice_secret, tool("memory_add", content="Acme price list"))
    memory_id = added[1]["id"]

    async def read_sop(session):
        try:
            await session.read_resource(f"cadre://agents/{bob_agent.pk}/sop")
        except Exception as error:  # the SDK raises the server's error
            return str(error)
        return "read"

    deleted, searched, sop = run(
        live_server_url,
        charlie_secret,
        tool("memory_delete", memory_id=memory_id),
        tool("memory_search", query="Acme price list", force=True),
        read_sop,
    )
    assert error_code(deleted) == "not_found"
    assert searched[1]["hits"] == []
    assert "not_found" in sop
    assert Memory.objects.get(pk=memory_id).deleted_at is None


def test_agent_template_resources(live_server_url, alice, bob, bob_agent):
    _, secret = key_for(alice)

    async def read(session):
        listed = await session.list_resource_templates()
        texts = {}
        for name in ("sop", "agent.md", "user.md"):
            result = await session.read_resource(f"cadre://agents/{bob_agent.pk}/{name}")
            texts[name] = result.contents[0].text
        return [t.uri_template for t in listed.resource_templates], texts

    ((uris, texts),) = run(live_server_url, secret, read)
    assert "cadre://agents/{agent_id}/sop" in uris
    assert "Standard discount" in texts["sop"]
    assert texts["agent.md"] == bob_agent.version.agent_md
    # USER.md names its member: masked on the way out, as every text that leaves
    assert texts["user.md"].startswith("# About ") and "Bob" not in texts["user.md"]
    assert "Bob" in (bob_agent.user_md or bob_agent.version.user_md_template)


def test_scopes_are_enforced(live_server_url, alice):
    _, secret = key_for(alice, scopes=["memory:read"])
    before = Memory.objects.count()
    added, skills, asked = run(
        live_server_url,
        secret,
        tool("memory_add", content="a read-only key cannot write"),
        tool("skill_search", query="pdf"),
        tool("confirmation_request", action="wire money", wait_seconds=0),
    )
    assert error_code(added) == "permission_denied"
    assert error_code(skills) == "permission_denied"
    assert error_code(asked) == "permission_denied"
    assert Memory.objects.count() == before
    assert not Confirmation.objects.exists()
    refused = AuditEvent.objects.filter(action="mcp.call", changes__outcome="permission_denied")
    assert refused.count() == 3


def test_skill_search_and_get_return_a_verified_version(live_server_url, alice, charlie):
    version = hub_publish(alice, "pdf-tools", "1.0.0")
    _, secret = key_for(alice)
    found, got = run(
        live_server_url,
        secret,
        tool("skill_search", query="pdf"),
        tool("skill_get", name=version.package.full_name),
    )
    assert version.package.full_name in [s["name"] for s in found[1]["skills"]]
    assert got[0] is False, got
    assert got[1]["verified"] is True and got[1]["version"] == "1.0.0"
    assert got[1]["skill_md"].startswith("---")
    assert {f["path"] for f in got[1]["files"]} == set(version.files.values_list("path", flat=True))
    _, charlie_secret = key_for(charlie)
    (outsider,) = run(
        live_server_url, charlie_secret, tool("skill_get", name=version.package.full_name)
    )
    if version.package.visibility != "public":
        assert error_code(outsider) in ("not_found", "skill_not_found")


def test_confirmation_request_returns_pending_then_the_decision(live_server_url, alice):
    _, secret = key_for(alice, scopes=["agents:run"])
    (pending,) = run(
        live_server_url,
        secret,
        tool(
            "confirmation_request",
            action="crm.delete_account",
            arguments={"account": "ACME-1"},
            request_key="delete-acme-1",
            wait_seconds=0,
        ),
    )
    assert pending[0] is False, pending
    assert pending[1]["status"] == "pending"
    confirmation = Confirmation.objects.get(pk=pending[1]["confirmation_id"])
    assert confirmation.requester == alice and confirmation.risk_level == "high"
    assert alice.pk in confirmation.decider_ids

    def approve_soon():
        time.sleep(1.0)
        try:
            confirmations.confirmation_decide(
                decision="approve",
                via="console",
                confirmation_id=confirmation.pk,
                actor=member_actor(alice),
            )
        finally:
            connections.close_all()

    approver = threading.Thread(target=approve_soon)
    approver.start()
    started = time.monotonic()
    (waited,) = run(
        live_server_url,
        secret,
        tool(
            "confirmation_request",
            action="crm.delete_account",
            arguments={"account": "ACME-1"},
            request_key="delete-acme-1",
            wait_seconds=20,
        ),
    )
    approver.join()
    assert waited[1]["status"] == "approved", waited
    assert waited[1]["confirmation_id"] == confirmation.pk
    assert time.monotonic() - started < 15
    assert Confirmation.objects.filter(tool="crm.delete_account").count() == 1


def test_bad_arguments_get_the_error_envelope_and_store_nothing(live_server_url, alice):
    _, secret = key_for(alice)
    before = Memory.objects.count()
    bad_kind, no_content, bad_risk = run(
        live_server_url,
        secret,
        tool("memory_add", content="x", kind="not-a-kind"),
        tool("memory_add", content=""),
        tool("confirmation_request", action="deploy", risk="low", wait_seconds=0),
    )
    assert error_code(bad_kind) == "invalid"
    assert "kind" in json.loads(bad_kind[1][bad_kind[1].index("{") :])["error"]["details"]
    assert error_code(no_content) == "invalid"
    assert bad_risk[0] is True  # the tool's schema allows medium, high, critical only
    assert Memory.objects.count() == before
    assert not Confirmation.objects.exists()
