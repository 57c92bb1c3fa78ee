"""A failed MCP tool call is audited like any tool effect (`tool.mcp_call.failed`), against a
server written with the official SDK on loopback: the server answering a JSON-RPC error, a
call that outlasts the server's timeout, and a server nothing listens for. The event names the
server, the tool and the failure's class; never the error's text (it quotes the person's
data), the arguments or the server's credentials."""

from __future__ import annotations

import json
import sys
import threading

import anyio
import pytest
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR

from cadre.agents import mcp_tools
from cadre.agents.models import McpServer, Run, Step, ToolEffect
from cadre.agents.runtime.lifecycle import execution as engine
from cadre.governance.models import AuditEvent
from tests.agents.fake_mcp_crm import serve_crm
from tests.agents.fake_models import FakeModelServer, closed_port
from tests.agents.test_mcp_tools import _agent, _call, _start

pytestmark = pytest.mark.django_db

EMAIL = "zhang.san@example.com"
SECRET = "Bearer flaky-secret"
BACKEND_TEXT = "ledger backend down"
LOOKUP = "mcp__flaky__lookup"
SLOW = "mcp__flaky__slow_search"

flaky = MCPServer("flaky-crm", instructions="A CRM that fails, for Cadre's tests.")
RELEASE = threading.Event()  # set by the test once the client gave up on `slow_search`


@flaky.tool()
async def lookup(email: str) -> dict:
    """Look up a contact (this server answers a JSON-RPC error)."""
    raise MCPError(INTERNAL_ERROR, f"{BACKEND_TEXT} while reading {email}")


@flaky.tool()
async def slow_search(email: str) -> dict:
    """Search slowly: answers only once the test releases it."""
    with anyio.move_on_after(30):
        while not RELEASE.is_set():
            await anyio.sleep(0.01)
    return {"found": False, "email": email}


@pytest.fixture(autouse=True)
def _loopback_allowed(settings):
    settings.CADRE_MCP_ALLOWED_HOSTS = ["127.0.0.1"]
    settings.CADRE_MCP_STDIO_COMMANDS = [sys.executable]


@pytest.fixture
def server(owner):
    RELEASE.clear()
    with serve_crm(flaky) as url:
        registered = mcp_tools.mcp_server_create(
            actor=owner,
            name="flaky",
            transport="streamable_http",
            url=url,
            credentials={"Authorization": SECRET},
        )
        yield mcp_tools.mcp_server_discover(actor=owner, server=registered)
        RELEASE.set()


def _fail(owner, bob, tool: str) -> tuple[Step, AuditEvent]:
    """Run an agent whose model calls `tool` once; the failed step and its audit event."""
    with FakeModelServer([_call(tool, email=EMAIL), {"text": "It failed."}]) as model:
        agent = _agent(owner, bob, model, {tool: {"risk": "low", "confirmation": "never"}})
        run = _start(bob, agent, f"Look up {EMAIL} in the CRM")
        assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    step = run.steps.get(kind=Step.Kind.TOOL_CALL)
    assert step.output["error"] == "mcp_unavailable"
    assert not ToolEffect.objects.exists()  # nothing recorded: a later retry may call again
    assert not AuditEvent.objects.filter(action="tool.mcp_call").exists()
    event = AuditEvent.objects.get(action="tool.mcp_call.failed")
    assert event.target_type == "run" and event.target_id == str(run.pk)
    assert event.changes["tool"] == tool and event.changes["step"] == step.index
    assert event.changes["idempotency_key"] == step.idempotency_key
    assert event.changes["outcome"] == "failed" and event.changes["error"] == "mcp_unavailable"
    return step, event


def _assert_nothing_personal_or_secret(event: AuditEvent) -> None:
    stored = json.dumps([event.changes, event.target_label, event.reason], ensure_ascii=False)
    assert EMAIL not in stored and "<EMAIL_1>" not in stored  # the person's data, either form
    assert "flaky-secret" not in stored and BACKEND_TEXT not in stored


def test_a_server_answering_an_error_is_audited_with_its_class(owner, bob, server):
    step, event = _fail(owner, bob, LOOKUP)
    assert "answered an error" in step.output["message"]  # the model is told
    assert event.changes["target"] == {"server": "flaky", "server_id": server.pk, "tool": "lookup"}
    assert event.changes["failure"] == {"error_class": "server_error", "exception": "MCPError"}
    _assert_nothing_personal_or_secret(event)


def test_a_call_outlasting_the_timeout_is_audited_as_a_timeout(owner, bob, server):
    McpServer.objects.filter(pk=server.pk).update(timeout_seconds=1)
    try:
        step, event = _fail(owner, bob, SLOW)
    finally:
        RELEASE.set()
    assert "did not answer in time" in step.output["message"]
    assert event.changes["target"]["tool"] == "slow_search"
    assert event.changes["failure"]["error_class"] == "timeout"
    _assert_nothing_personal_or_secret(event)


def test_a_server_nothing_listens_for_is_audited_as_unreachable(owner, bob, server):
    McpServer.objects.filter(pk=server.pk).update(
        url=closed_port().replace("/v1", "/mcp"), timeout_seconds=3
    )
    step, event = _fail(owner, bob, LOOKUP)
    assert "could not be reached" in step.output["message"]
    assert event.changes["target"]["server"] == "flaky"
    assert event.changes["failure"]["error_class"] == "unreachable"
    _assert_nothing_personal_or_secret(event)
