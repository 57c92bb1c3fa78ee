"""Fixtures for the memory suite: Celery tasks run eagerly (in process) after commit, an org
chart for scope tests, and a loopback OpenAI-compatible server standing in for a model."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from cadre.celery import app as celery_app
from cadre.tenancy.actors import member_actor
from tests.factories import DepartmentFactory, PositionFactory


@pytest.fixture(autouse=True)
def eager_celery():
    """Tasks sent with .delay() run in this process (on commit), and their errors surface."""
    previous = (celery_app.conf.task_always_eager, celery_app.conf.task_eager_propagates)
    celery_app.conf.task_always_eager = True
    celery_app.conf.task_eager_propagates = True
    yield
    celery_app.conf.task_always_eager, celery_app.conf.task_eager_propagates = previous


@pytest.fixture
def run_async(django_capture_on_commit_callbacks):
    """`with run_async():` — the on-commit callbacks (task sends) of the block are executed."""

    def make():
        return django_capture_on_commit_callbacks(execute=True)

    return make


@pytest.fixture
def chart(org_a, alice, bob, make_member):
    """Acme: Sales (bob) with sub-department Sales/East (erin); Support (dave); a position."""
    sales = DepartmentFactory(organization=org_a, name="Sales")
    east = DepartmentFactory(organization=org_a, name="East", parent=sales)
    support = DepartmentFactory(organization=org_a, name="Support")
    account_manager = PositionFactory(organization=org_a, name="Account manager", code="am")
    bob.department = sales
    bob.save(update_fields=["department"])
    bob.positions.add(account_manager)
    erin = make_member(display_name="Erin", email="erin@acme.test", department=east)
    dave = make_member(display_name="Dave", email="dave@acme.test", department=support)
    auditor = make_member(roles=("auditor",), display_name="Audrey", email="audrey@acme.test")
    return {
        "sales": sales,
        "east": east,
        "support": support,
        "position": account_manager,
        "bob": bob,
        "erin": erin,
        "dave": dave,
        "auditor": auditor,
        "alice": alice,
    }


def actor(member):
    return member_actor(member)


class FakeModelServer:
    """An OpenAI-compatible /chat/completions endpoint on 127.0.0.1 that answers with the JSON
    the test's `answer(request_body) -> dict` returns (as the message content)."""

    def __init__(self, answer):
        self.answer = answer
        self.requests: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(
                    {
                        "path": self.path,
                        "body": body,
                        "authorization": self.headers.get("Authorization"),
                    }
                )
                if not self.path.endswith("/chat/completions"):
                    self.send_response(404)
                    self.end_headers()
                    return
                content = json.dumps(server.answer(body), ensure_ascii=False)
                payload = json.dumps(
                    {
                        "id": "chatcmpl-test",
                        "object": "chat.completion",
                        "model": body.get("model"),
                        "choices": [
                            {
                                "index": 0,
                                "finish_reason": "stop",
                                "message": {"role": "assistant", "content": content},
                            }
                        ],
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def fake_model(monkeypatch):
    """Start a fake model server answering with `answer`; memory's provider configuration
    (CADRE_MEMORY_PROVIDER_*) points at it."""
    servers = []

    def start(answer):
        server = FakeModelServer(answer)
        servers.append(server)
        monkeypatch.setenv("CADRE_MEMORY_PROVIDER_KIND", "openai_compatible")
        monkeypatch.setenv("CADRE_MEMORY_PROVIDER_BASE_URL", server.base_url)
        monkeypatch.setenv("CADRE_MEMORY_PROVIDER_MODEL", "fake-memory-model")
        monkeypatch.setenv("CADRE_MEMORY_PROVIDER_API_KEY", "sk-test-key")
        return server

    yield start
    for server in servers:
        server.close()
