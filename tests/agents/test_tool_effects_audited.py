"""Every effect a built-in tool has on the world is audited: `http_request` and `task_create`
leave `tool.<name>` (run, tool, target, outcome) in the effect's transaction, and a failed
effect leaves `tool.<name>.failed` with nothing else stored."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

import pytest

from cadre.agents import services
from cadre.agents.models import AgentTask, Run, ToolEffect
from cadre.agents.runtime.lifecycle import execution as engine
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.agents.runtime.steps.executor import perform_effect
from cadre.agents.tools import registry
from cadre.governance.audit_models import AuditEvent
from cadre.tenancy.actors import member_actor
from tests.agents.conftest import publish

pytestmark = pytest.mark.django_db

# Effectful built-ins whose handler's service writes the audit event itself.
AUDITED_BY_THEIR_SERVICE = {
    "memory_write": "memory.add",
    "im_send": "agents.message.<status>",
    "notify_subscribers": "agent.publish",
}


class _Status(BaseHTTPRequestHandler):
    def do_GET(self):
        self.server.received.append(self.path)
        self.send_response(200)
        self.send_header("Content-Length", "5")
        self.end_headers()
        self.wfile.write(b"green")

    def log_message(self, *args):
        pass


@pytest.fixture
def status_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Status)
    server.received = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def http_agent(owner, bob, status_server):
    template = services.template_create(
        actor=owner,
        name="Ops",
        code="ops-http-audit",
        tool_permissions={
            "http_request": {
                "risk": "medium",
                "confirmation": "never",
                "allowed_hosts": [f"127.0.0.1:{status_server.server_address[1]}"],
            }
        },
        hooks={"assemble_context": [{"name": "memory_retrieval", "enabled": False}]},
    )
    publish(owner, template.versions.get())
    return services.deployment_create(
        actor=owner, name="Ops", template=template, members=[bob]
    ).agents.get()


def _run(bob, agent, text):
    run = runtime.run_start(actor=member_actor(bob), agent=agent, text=text)
    assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    return run


def test_an_http_request_is_audited_with_host_and_path_but_not_the_query(
    bob, http_agent, status_server
):
    port = status_server.server_address[1]
    run = _run(bob, http_agent, f"fetch http://127.0.0.1:{port}/status?customer=acme-4711")
    assert status_server.received == ["/status?customer=acme-4711"]
    step = run.steps.get(kind="tool_call")
    event = AuditEvent.objects.get(action="tool.http_request")
    assert (event.target_type, event.target_id) == ("run", str(run.pk))
    assert event.changes["tool"] == "http_request"
    assert event.changes["outcome"] == "done"
    assert event.changes["idempotency_key"] == step.idempotency_key
    assert event.changes["target"] == {
        "method": "GET",
        "host": f"127.0.0.1:{port}",
        "path": "/status",
        "status": 200,
    }
    assert "acme-4711" not in str(event.changes)


def test_a_refused_http_request_is_audited_as_failed_and_sends_nothing(
    bob, http_agent, status_server
):
    run = _run(bob, http_agent, "fetch http://example.test/export?customer=acme-4711")
    assert status_server.received == []
    assert not ToolEffect.objects.filter(tool="http_request").exists()
    assert not AuditEvent.objects.filter(action="tool.http_request").exists()
    event = AuditEvent.objects.get(action="tool.http_request.failed")
    assert (event.target_type, event.target_id) == ("run", str(run.pk))
    assert event.changes["outcome"] == "failed"
    assert event.changes["error"] == "host_not_allowed"
    assert event.changes["target"] == {"method": "GET", "host": "example.test", "path": "/export"}
    assert "acme-4711" not in str(event.changes)


def test_a_created_task_is_audited_with_title_and_assignee(bob, bob_agent):
    run = _run(bob, bob_agent, "remind me to call ACME on 2030-01-02")
    task = AgentTask.objects.get()
    event = AuditEvent.objects.get(action="tool.task_create")
    assert (event.target_type, event.target_id) == ("run", str(run.pk))
    assert event.changes["tool"] == "task_create"
    assert event.changes["outcome"] == "done"
    assert event.changes["target"] == {"title": "call ACME", "assignee": bob.pk, "task_id": task.pk}


def test_a_failed_task_is_audited_as_failed_and_nothing_is_stored(bob, bob_agent):
    run = _run(bob, bob_agent, "remind me to call ACME on 2030-01-02 1")
    assert run.steps.get(kind="tool_call").output["error"] == "bad_date"
    assert not AgentTask.objects.exists()
    assert not ToolEffect.objects.filter(tool="task_create").exists()
    assert not AuditEvent.objects.filter(action="tool.task_create").exists()
    event = AuditEvent.objects.get(action="tool.task_create.failed")
    assert (event.target_type, event.target_id) == ("run", str(run.pk))
    assert event.changes["outcome"] == "failed" and event.changes["error"] == "bad_date"
    assert event.changes["target"] == {"title": "call ACME", "assignee": bob.pk}


def test_a_replayed_effect_is_not_audited_twice(bob, bob_agent):
    run = _run(bob, bob_agent, "remind me to call ACME on 2030-01-02")
    step = run.steps.get(kind="tool_call")
    tool = registry.get("task_create")
    context = SimpleNamespace(key=step.idempotency_key, run=run)
    replay = perform_effect(tool, context, {"title": "call ACME"})
    assert replay["replayed"] is True
    assert AuditEvent.objects.filter(action="tool.task_create").count() == 1


def test_every_effectful_builtin_is_audited():
    for tool in registry.all_tools():
        if tool.side_effect == "none" or tool.control or tool.name.startswith("mcp__"):
            continue
        assert tool.audit_target is not None or tool.name in AUDITED_BY_THEIR_SERVICE, (
            f"{tool.name} has an effect on the world and no audit event"
        )
