"""The agents' http_request tool goes through the outbound guard: a host name the template's
rule allows is still refused when it resolves to the cloud metadata service, or to loopback or a
private network the instance has not allowed (CADRE_AGENT_HTTP_ALLOWED_HOSTS), and nothing is
connected to."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

import pytest

from cadre.agents.tools.builtins import _http_request
from cadre.agents.tools.registry import ToolFailed
from connectors.tests import guard
from connectors.tests.guard import reached

dns = guard.dns
connections = guard.connections
METADATA = "169.254.169.254"


def _ctx(*hosts: str):
    return SimpleNamespace(rule={"allowed_hosts": list(hosts)}, key="effect-key")


class _Receiver(BaseHTTPRequestHandler):
    def do_GET(self):
        self.server.received.append(self.path)
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass


@pytest.fixture
def receiver():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    server.received = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("allowed", [[], ["*"], ["crm.example.test"]])
def test_an_allowed_name_resolving_to_metadata_is_refused_and_not_connected(
    dns, connections, settings, allowed
):
    # Whatever the instance allows: metadata addresses are never an outbound destination.
    settings.CADRE_AGENT_HTTP_ALLOWED_HOSTS = allowed
    dns["crm.example.test"] = METADATA
    with pytest.raises(ToolFailed) as refused:
        _http_request(
            _ctx("crm.example.test"), {"url": "http://crm.example.test/latest/meta-data/"}
        )
    assert refused.value.code == "host_not_allowed"
    assert reached(connections, METADATA, "crm.example.test") == []
    assert connections == []


def test_an_allowed_name_resolving_to_loopback_needs_the_instance_setting(
    dns, connections, settings, receiver
):
    port = receiver.server_address[1]
    dns["crm.example.test"] = "127.0.0.1"
    url = f"http://crm.example.test:{port}/admin"
    settings.CADRE_AGENT_HTTP_ALLOWED_HOSTS = []
    with pytest.raises(ToolFailed) as refused:
        _http_request(_ctx(f"crm.example.test:{port}"), {"url": url})
    assert refused.value.code == "host_not_allowed"
    assert receiver.received == [] and connections == []

    # An administrator allows the internal host: the agent reaches it.
    settings.CADRE_AGENT_HTTP_ALLOWED_HOSTS = ["crm.example.test"]
    result = _http_request(_ctx(f"crm.example.test:{port}"), {"url": url})
    assert result == {"status": 200, "body": "ok"}
    assert receiver.received == ["/admin"]


def test_the_rules_host_names_are_still_checked(dns, connections, settings):
    settings.CADRE_AGENT_HTTP_ALLOWED_HOSTS = ["*"]
    dns["other.example.test"] = "127.0.0.1"
    with pytest.raises(ToolFailed) as refused:
        _http_request(_ctx("crm.example.test"), {"url": "http://other.example.test/"})
    assert refused.value.code == "host_not_allowed"
    assert connections == []
