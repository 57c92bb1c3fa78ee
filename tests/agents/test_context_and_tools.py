"""Context assembly within a token budget, the HTTP tool's host allow-list and idempotency
key, and usage aggregation."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from cadre.agents import services
from cadre.agents.models import Run, ToolEffect
from cadre.agents.runtime.lifecycle import execution as engine
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.agents.runtime.records import crashpoints
from cadre.agents.runtime.steps.context import ContextPieces, fit
from cadre.agents.tools.builtins import host_allowed
from cadre.llm import estimate_tokens
from cadre.tenancy.actors import member_actor
from tests.agents.conftest import publish


def test_context_keeps_the_essentials_and_drops_old_turns_first():
    turns = []
    for i in range(40):
        turns += [
            {"role": "user", "content": f"question {i} " + "words " * 20},
            {"role": "assistant", "content": f"answer {i} " + "words " * 20},
        ]
    pieces = ContextPieces(
        agent_md="# Persona\nYou are helpful.",
        sop="# SOP\n" + "step. " * 3000,
        user_md="# About Bob",
        skills=[{"name": "crm-notes", "description": "CRM notes"}],
        memories=[
            {"id": i, "content": f"memory {i} " + "fact " * 10, "scope": "agent:1"}
            for i in range(30)
        ],
        turns=turns,
        input_text="what now?",
    )
    messages, report = fit(pieces, 1500)
    total = sum(estimate_tokens(m["content"]) for m in messages)
    assert total <= 1500
    system = messages[0]["content"]
    assert "You are helpful." in system and "# About Bob" in system
    assert "[…truncated to fit the context budget]" in system  # the SOP shrank
    assert messages[-1] == {"role": "user", "content": "what now?"}
    assert report["dropped"]["turns"] > 0


def test_context_with_room_keeps_everything_in_order():
    pieces = ContextPieces(
        agent_md="A",
        sop="S",
        user_md="U",
        memories=[{"id": 1, "content": "M", "scope": "user:1"}],
        turns=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
        input_text="q",
    )
    messages, report = fit(pieces, 8000)
    system = messages[0]["content"]
    assert system.index("A") < system.index("(SOP)") < system.index("About the user")
    # this request's memories come after the turns, just before the input
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "system", "user"]
    assert messages[3]["content"].startswith("# Relevant memories")
    assert report["dropped"] == {} and report["memories_kept"] == 1
    legacy, _ = fit(pieces, 8000, order="legacy")  # today's order: one system message
    system = legacy[0]["content"]
    assert (
        system.index("A")
        < system.index("About the user")
        < system.index("(SOP)")
        < system.index("Relevant memories")
    )
    assert [m["role"] for m in legacy] == ["system", "user", "assistant", "user"]


def test_host_allow_list():
    assert host_allowed("https://api.crm.test/x", ["api.crm.test"])
    assert host_allowed("https://eu.crm.test/x", [".crm.test"])
    assert host_allowed("http://127.0.0.1:8080/x", ["127.0.0.1:8080"])
    assert not host_allowed("https://crm.test.evil.test/", ["crm.test"])
    assert not host_allowed("file:///etc/passwd", ["localhost"])
    assert not host_allowed("https://other.test/", [])


class _Echo:
    def __init__(self):
        self.requests = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                server.requests.append(dict(self.headers))
                body = json.dumps({"status": "green"}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.httpd.server_address[1]}"


@pytest.mark.django_db
def test_http_tool_calls_allowed_hosts_once_with_the_idempotency_key(owner, bob):
    echo = _Echo()
    try:
        template = services.template_create(
            actor=owner,
            name="Ops",
            code="ops-http",
            tool_permissions={
                "http_request": {
                    "risk": "medium",
                    "confirmation": "never",
                    "allowed_hosts": [echo.host],
                }
            },
            hooks={"assemble_context": [{"name": "memory_retrieval", "enabled": False}]},
        )
        publish(owner, template.versions.get())
        agent = services.deployment_create(
            actor=owner, name="Ops", template=template, members=[bob]
        ).agents.get()
        allowed = runtime.run_start(
            actor=member_actor(bob), agent=agent, text=f"fetch http://{echo.host}/status"
        )
        with crashpoints.crash_after("tool_call"), pytest.raises(crashpoints.SimulatedCrash):
            engine.run_execute(allowed.pk)
        assert engine.run_execute(allowed.pk) == Run.Status.COMPLETED
        assert len(echo.requests) == 1  # recorded before the crash: not repeated
        step = allowed.steps.get(kind="tool_call")
        assert echo.requests[0]["Idempotency-Key"] == step.idempotency_key
        assert ToolEffect.objects.get(key=step.idempotency_key).result["status"] == 200
        allowed.refresh_from_db()
        assert "green" in allowed.output["text"]

        refused = runtime.run_start(
            actor=member_actor(bob), agent=agent, text="fetch http://example.test/"
        )
        engine.run_execute(refused.pk)
        assert len(echo.requests) == 1
        output = refused.steps.get(kind="tool_call").output
        assert output["error"] == "host_not_allowed"
    finally:
        echo.httpd.shutdown()


@pytest.mark.django_db
def test_usage_is_aggregated_per_member_agent_template_and_organization(
    client_for, alice, bob, deployment
):
    for member in (alice, bob):
        agent = deployment.agents.get(member=member)
        run = runtime.run_start(actor=member_actor(member), agent=agent, text="hello")
        engine.run_execute(run.pk)
    api = client_for(alice)
    by_member = api.get("/api/v1/runs/usage/?by=member").json()
    assert {row["label"] for row in by_member} == {"Alice", "Bob"}
    assert all(row["runs"] == 1 and row["tokens_in"] > 0 for row in by_member)
    by_org = api.get("/api/v1/runs/usage/?by=organization").json()
    assert len(by_org) == 1 and by_org[0]["runs"] == 2
    by_template = api.get("/api/v1/runs/usage/?by=template").json()
    assert by_template[0]["label"] == "Sales assistant"
    mine = client_for(bob).get("/api/v1/runs/usage/?by=member").json()
    assert [row["label"] for row in mine] == ["Bob"]  # an employee sees their own
    assert api.get("/api/v1/runs/usage/?by=planet").status_code == 400
