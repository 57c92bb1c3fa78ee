"""MCP servers behind the outbound guard (issue #29, finding 12): the URL is checked when saved
and the client connects to the address it checked, so a name that resolves to a public address
when checked and to loopback when connected (DNS rebinding) reaches nothing."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

import pytest

from cadre.agents import mcp_tools
from cadre.agents.models import McpServer
from cadre.errors import InvalidInput
from tests.agents.fake_mcp_crm import serve_crm

pytestmark = pytest.mark.django_db

NAME = "crm.example.net"


@pytest.fixture
def rebinding(monkeypatch):
    """`crm.example.net` answers a public address to the first `public` lookups, then the
    loopback CRM's; every lookup of it is counted."""
    state = {"public": 2, "asked": 0}
    real = socket.getaddrinfo

    def getaddrinfo(host, port, *args, **kwargs):
        host = host.decode() if isinstance(host, bytes) else host
        if host != NAME:
            return real(host, port, *args, **kwargs)
        state["asked"] += 1
        address = "93.184.216.34" if state["asked"] <= state["public"] else "127.0.0.1"
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return state


def test_dns_rebinding_between_the_check_and_the_connection_reaches_nothing(
    owner, settings, rebinding
):
    settings.CADRE_MCP_ALLOWED_HOSTS = []
    with serve_crm() as url:
        port = urlsplit(url).port
        server = mcp_tools.mcp_server_create(
            actor=owner, name="crm", transport="streamable_http", url=f"http://{NAME}:{port}/mcp"
        )
        # Saved (one lookup, public); discovery checks again (public) and connects: the
        # connection's own lookup answers loopback, and is refused there.
        with pytest.raises(InvalidInput) as refused:
            mcp_tools.mcp_server_discover(actor=owner, server=server)
    assert refused.value.code == "mcp_unavailable"
    assert "refused" in refused.value.message and "127.0.0.1" in refused.value.message
    server.refresh_from_db()
    assert server.tools == [] and server.discovered_at is None


@pytest.mark.parametrize(
    "url",
    ["http://169.254.169.254/mcp", "http://[fd00:ec2::254]/mcp", "http://0.0.0.0:8080/mcp"],
)
def test_a_metadata_url_is_refused_whatever_is_allowed(owner, settings, url):
    settings.CADRE_MCP_ALLOWED_HOSTS = ["*"]
    with pytest.raises(InvalidInput) as refused:
        mcp_tools.mcp_server_create(actor=owner, name="meta", transport="streamable_http", url=url)
    assert refused.value.code == "webhook_url_refused" and "url" in refused.value.details
    assert not McpServer.objects.exists()
