"""Agents calling external MCP servers' tools through Cadre's tool gate, against a fake CRM
written with the official SDK and served over real Streamable HTTP on loopback (and once over
stdio): discovery with default risks, a read that runs (arguments re-identified, result
masked), a destructive write that waits for a confirmation and runs exactly once when approved
(also across a crash between steps), a tool the template does not allow refused with nothing
sent, and revoked or unknown servers refused with a clear reason."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from cadre.agents import mcp_tools, services
from cadre.agents.models import McpServer, Run, Step, ToolEffect, Wait
from cadre.agents.runtime.lifecycle import execution as engine
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.agents.runtime.records import crashpoints
from cadre.errors import InvalidInput
from cadre.governance import confirmations
from cadre.governance.models import AuditEvent, Confirmation
from cadre.tenancy.actors import member_actor
from tests.agents.conftest import publish
from tests.agents.fake_mcp_crm import calls_of, serve_crm
from tests.agents.fake_models import FakeModelServer

pytestmark = pytest.mark.django_db

EMAIL = "zhang.san@example.com"
PHONE = "13812345678"  # the CRM answers with it: masked before the model reads it
READ = "mcp__crm__get_contact"
WRITE = "mcp__crm__delete_contact"


@pytest.fixture(autouse=True)
def _loopback_allowed(settings):
    settings.CADRE_MCP_ALLOWED_HOSTS = ["127.0.0.1"]
    settings.CADRE_MCP_STDIO_COMMANDS = [sys.executable]


@pytest.fixture
def crm_url():
    with serve_crm() as url:
        yield url


@pytest.fixture
def crm(owner, crm_url):
    server = mcp_tools.mcp_server_create(
        actor=owner,
        name="crm",
        transport="streamable_http",
        url=crm_url,
        credentials={"Authorization": "Bearer crm-secret"},
    )
    return mcp_tools.mcp_server_discover(actor=owner, server=server)


def _agent(owner, bob, model, tools: dict, name="CRM desk"):
    config = services.provider_config_create(
        actor=owner,
        name=f"fake {name}",
        kind="openai_compatible",
        base_url=model.base_url,
        api_key="sk-test",
        default_model="m",
    )
    template = services.template_create(
        actor=owner,
        name=name,
        code=re.sub(r"\W+", "-", name.lower()),
        model_settings={
            "provider": "openai_compatible",
            "provider_config": config.pk,
            "model": "m",
        },
        tool_permissions=tools,
    )
    publish(owner, template.versions.get())
    return services.deployment_create(
        actor=owner, name=name, template=template, members=[bob]
    ).agents.get()


def _start(bob, agent, text):
    return runtime.run_start(actor=member_actor(bob), agent=agent, text=text)


def _call(name, **arguments):
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def _result(step) -> dict:
    """What the tool answered: its structured content, else its JSON text."""
    output = step.output
    if "structured_content" in output:
        return output["structured_content"]
    return json.loads(output["content"][0]["text"])


def _sent_to_model(model) -> str:
    return json.dumps([request["body"] for request in model.requests], ensure_ascii=False)


def test_discovery_lists_tools_with_schemas_and_default_risks(crm):
    tools = {tool["name"]: tool for tool in mcp_tools.tools_with_risk(crm)}
    assert set(tools) == {"get_contact", "delete_contact"}
    assert tools["get_contact"]["risk"] == "medium"  # no destructiveHint: medium
    assert tools["delete_contact"]["risk"] == "high"  # destructiveHint: high
    assert tools["delete_contact"]["exposed_name"] == WRITE
    assert tools["get_contact"]["input_schema"]["properties"]["email"]["type"] == "string"
    assert crm.discovered_at is not None
    # Credentials are stored encrypted, never as typed.
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT credentials FROM agents_mcpserver WHERE id = %s", [crm.pk])
        (stored,) = cursor.fetchone()
    assert "crm-secret" not in stored


def test_a_read_runs_with_real_arguments_and_a_masked_result(owner, bob, crm):
    with FakeModelServer([_call(READ, email="<EMAIL_1>"), {"text": "Found them."}]) as model:
        agent = _agent(owner, bob, model, {READ: {"risk": "low", "confirmation": "never"}})
        run = _start(bob, agent, f"Look up {EMAIL} in the CRM")
        assert engine.run_execute(run.pk) == Run.Status.COMPLETED

    # The model saw the tool with the server's schema, under its namespaced name.
    tools = {t["function"]["name"]: t["function"] for t in model.requests[0]["body"]["tools"]}
    assert tools[READ]["parameters"]["properties"]["email"]["type"] == "string"
    assert WRITE not in tools  # not allowed by the template: not offered either
    # The CRM got the real address (re-identified from the vault), the step keeps the mask.
    (call,) = calls_of("get_contact")
    assert call["arguments"] == {"email": EMAIL}
    step = run.steps.get(kind=Step.Kind.TOOL_CALL)
    assert step.input["arguments"] == {"email": "<EMAIL_1>"}
    assert call["idempotency_key"] == step.idempotency_key
    assert call["meta"].get(mcp_tools.IDEMPOTENCY_META) == step.idempotency_key
    # The CRM's answer passed the `retrieved` stage: the phone number never reached the model.
    assert _result(step)["found"] is True
    assert PHONE not in _sent_to_model(model) and EMAIL not in _sent_to_model(model)
    audit = AuditEvent.objects.get(action="tool.mcp_call")
    assert audit.changes["target"]["server"] == "crm"
    assert audit.changes["target"]["tool"] == "get_contact" and audit.changes["outcome"] == "done"


def _approve(run):
    """The member the agent serves approves (the confirmation is routed to them)."""
    confirmation = Confirmation.objects.get(run_id=run.pk)
    confirmations.confirmation_decide(
        confirmation=confirmation, actor=member_actor(run.member), decision="approve", via="console"
    )


def test_a_destructive_write_waits_for_confirmation_and_runs_once(owner, bob, crm):
    script = [_call(WRITE, email=EMAIL, reason="duplicate"), {"text": "Deleted."}]
    with FakeModelServer(script) as model:
        # The template asks for no confirmation: the tool's own high risk does.
        agent = _agent(owner, bob, model, {WRITE: {"risk": "low", "confirmation": "never"}})
        run = _start(bob, agent, "Delete the duplicate contact")
        assert engine.run_execute(run.pk) == Run.Status.WAITING
        wait = Wait.objects.get(run=run)
        assert wait.kind == "confirmation" and wait.details["risk"] == "high"
        assert calls_of("delete_contact") == []  # nothing sent before the decision

        _approve(run)
        assert engine.run_execute(run.pk) == Run.Status.COMPLETED
        assert engine.run_execute(run.pk) == Run.Status.COMPLETED  # a redelivery: nothing more
    assert len(calls_of("delete_contact")) == 1
    step = run.steps.get(kind=Step.Kind.TOOL_CALL, name=WRITE)
    # The CRM's answer named the address: masked by the `retrieved` stage like any result.
    assert _result(step) == {"deleted": True, "email": "<EMAIL_1>"}
    assert ToolEffect.objects.filter(key=step.idempotency_key, tool=WRITE).count() == 1
    assert AuditEvent.objects.filter(action="tool.mcp_call").count() == 1


def test_a_crash_between_steps_does_not_repeat_the_write(owner, bob, crm):
    script = [_call(WRITE, email=EMAIL), {"text": "Deleted."}]
    with FakeModelServer(script) as model:
        agent = _agent(owner, bob, model, {WRITE: {"risk": "high", "confirmation": "high_risk"}})
        run = _start(bob, agent, "Delete the contact")
        assert engine.run_execute(run.pk) == Run.Status.WAITING
        _approve(run)
        # The worker dies after the call's effect, before its step is marked completed.
        with crashpoints.crash_after("tool_call", WRITE), pytest.raises(crashpoints.SimulatedCrash):
            engine.run_execute(run.pk)
        assert len(calls_of("delete_contact")) == 1
        assert engine.run_execute(run.pk) == Run.Status.COMPLETED  # the redelivered task
    assert len(calls_of("delete_contact")) == 1  # the CRM saw it once
    step = run.steps.get(kind=Step.Kind.TOOL_CALL, name=WRITE)
    assert step.attempts == 2 and step.output["replayed"] is True
    assert Confirmation.objects.filter(run_id=run.pk).count() == 1


def test_a_tool_the_template_does_not_allow_is_refused_and_nothing_is_sent(owner, bob, crm):
    script = [_call(WRITE, email=EMAIL), {"text": "I could not."}]
    with FakeModelServer(script) as model:
        agent = _agent(owner, bob, model, {READ: {"risk": "low", "confirmation": "never"}})
        run = _start(bob, agent, "Delete the contact")
        assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    assert calls_of("delete_contact") == [] and calls_of("get_contact") == []
    step = run.steps.get(kind=Step.Kind.TOOL_CALL)
    assert step.output["error"] == "denied" and "not allowed" in step.output["message"]
    assert not Confirmation.objects.exists() and not ToolEffect.objects.exists()
    assert AuditEvent.objects.filter(action="tool.denied").exists()


def test_a_server_wildcard_allows_each_listed_tool(owner, bob, crm):
    script = [_call(READ, email="li.si@example.com"), {"text": "Done."}]
    with FakeModelServer(script) as model:
        agent = _agent(owner, bob, model, {"mcp__crm__*": {"risk": "low"}})
        run = _start(bob, agent, "Look up Li Si")
        assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    offered = {t["function"]["name"] for t in model.requests[0]["body"]["tools"]}
    assert {READ, WRITE} <= offered
    assert len(calls_of("get_contact")) == 1


def test_a_revoked_server_is_refused_clearly_and_not_called(owner, bob, crm):
    script = [_call(READ, email=EMAIL), {"text": "Unavailable."}]
    with FakeModelServer(script) as model:
        agent = _agent(owner, bob, model, {READ: {"risk": "low"}})
        mcp_tools.mcp_server_set_active(actor=owner, server=crm, active=False)
        run = _start(bob, agent, "Look up the contact")
        assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    assert "tools" not in model.requests[0]["body"] or READ not in json.dumps(
        model.requests[0]["body"]["tools"]
    )
    step = run.steps.get(kind=Step.Kind.TOOL_CALL)
    assert step.output == {"error": "denied", "message": "the MCP server 'crm' is revoked"}
    assert calls_of("get_contact") == []


def test_an_unknown_server_or_tool_is_refused_clearly(owner, bob, crm):
    script = [_call("mcp__crm__drop_database"), _call("mcp__ghost__read"), {"text": "No."}]
    with FakeModelServer(script) as model:
        agent = _agent(owner, bob, model, {"mcp__crm__*": {"risk": "low"}})
        # A template naming an unregistered server does not publish.
        with pytest.raises(InvalidInput):
            _agent(owner, bob, model, {"mcp__ghost__read": {}}, name="Ghost desk")
        # One allowed by a wildcard whose server was deleted since.
        agent.version.tool_permissions["mcp__ghost__*"] = {"risk": "low"}
        type(agent.version).objects.filter(pk=agent.version.pk).update(
            tool_permissions=agent.version.tool_permissions
        )
        run = _start(bob, agent, "Drop it all")
        assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    outputs = [s.output for s in run.steps.filter(kind=Step.Kind.TOOL_CALL).order_by("index")]
    assert outputs[0]["message"] == "the MCP server 'crm' lists no tool 'mcp__crm__drop_database'"
    assert outputs[1]["message"] == "there is no MCP server named 'ghost'"
    assert calls_of("get_contact") == [] and calls_of("delete_contact") == []


def test_an_unreachable_server_tells_the_model_and_records_no_effect(owner, bob, crm):
    McpServer.objects.filter(pk=crm.pk).update(url="http://127.0.0.1:9/mcp", timeout_seconds=3)
    with FakeModelServer([_call(READ, email=EMAIL), {"text": "Down."}]) as model:
        agent = _agent(owner, bob, model, {READ: {"risk": "low"}})
        run = _start(bob, agent, "Look up the contact")
        assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    step = run.steps.get(kind=Step.Kind.TOOL_CALL)
    assert step.output["error"] == "mcp_unavailable"
    assert "could not be reached" in step.output["message"]
    assert not ToolEffect.objects.exists()


def test_a_stdio_server_is_discovered_and_called(owner, bob, tmp_path):
    log = tmp_path / "crm.log"
    server = mcp_tools.mcp_server_create(
        actor=owner,
        name="crm-local",
        transport="stdio",
        command=sys.executable,
        args=[str(Path(__file__).with_name("fake_mcp_crm.py"))],
        credentials={"FAKE_CRM_LOG": str(log), "PYTHONPATH": ":".join(sys.path)},
    )
    server = mcp_tools.mcp_server_discover(actor=owner, server=server)
    assert {tool["name"] for tool in server.tools} == {"get_contact", "delete_contact"}
    name = "mcp__crm-local__get_contact"
    with FakeModelServer([_call(name, email=EMAIL), {"text": "Found."}]) as model:
        agent = _agent(owner, bob, model, {name: {"risk": "low"}})
        run = _start(bob, agent, "Look up the contact")
        assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [line["tool"] for line in lines] == ["get_contact"]
    step = run.steps.get(kind=Step.Kind.TOOL_CALL)
    assert _result(step)["name"] == "Zhang San"
    assert lines[0]["meta"].get(mcp_tools.IDEMPOTENCY_META) == step.idempotency_key


def test_a_stdio_command_the_operator_did_not_list_is_refused(owner, settings):
    settings.CADRE_MCP_STDIO_COMMANDS = []
    with pytest.raises(InvalidInput) as refused:
        mcp_tools.mcp_server_create(actor=owner, name="shell", transport="stdio", command="sh")
    assert "command" in refused.value.details
    assert not McpServer.objects.exists()


def test_an_internal_url_is_refused_unless_allowed(owner, settings):
    settings.CADRE_MCP_ALLOWED_HOSTS = []
    with pytest.raises(InvalidInput) as refused:
        mcp_tools.mcp_server_create(
            actor=owner, name="crm", transport="streamable_http", url="http://127.0.0.1:1/mcp"
        )
    assert "url" in refused.value.details
    assert not McpServer.objects.exists()
