"""/api/v1/mcp-servers/: register an MCP server (credentials write-only), discover its tools
from a live fake CRM over Streamable HTTP, set each tool's risk, revoke; refusals change
nothing; an API key needs `connectors:write`."""

from __future__ import annotations

import pytest

from cadre.agents.models import McpServer
from cadre.governance.models import AuditEvent
from tests.agents.fake_mcp_crm import serve_crm
from tests.refusals import nothing_changes

pytestmark = pytest.mark.django_db

URL = "/api/v1/mcp-servers/"


@pytest.fixture(autouse=True)
def _loopback_allowed(settings):
    settings.CADRE_MCP_ALLOWED_HOSTS = ["127.0.0.1"]


def test_register_discover_set_risks_and_revoke(alice, client_for):
    client = client_for(alice)
    with serve_crm() as url:
        created = client.post(
            URL,
            {
                "name": "crm",
                "transport": "streamable_http",
                "url": url,
                "credentials": {"Authorization": "Bearer crm-secret"},
            },
            format="json",
        )
        assert created.status_code == 201, created.json()
        body = created.json()
        assert body["credentials_set"] is True and "credentials" not in body
        assert "crm-secret" not in created.content.decode()
        assert body["tools"] == []

        discovered = client.post(f"{URL}{body['id']}/discover/")
    assert discovered.status_code == 200, discovered.json()
    tools = {tool["name"]: tool for tool in discovered.json()["tools"]}
    assert tools["get_contact"]["risk"] == "medium"
    assert tools["delete_contact"]["risk"] == tools["delete_contact"]["default_risk"] == "high"
    assert tools["delete_contact"]["exposed_name"] == "mcp__crm__delete_contact"
    assert tools["delete_contact"]["annotations"]["destructiveHint"] is True

    risks = client.put(
        f"{URL}{body['id']}/tool-risks/", {"risks": {"get_contact": "low"}}, format="json"
    )
    assert risks.status_code == 200
    assert {t["name"]: t["risk"] for t in risks.json()["tools"]} == {
        "get_contact": "low",
        "delete_contact": "high",
    }
    back = client.put(
        f"{URL}{body['id']}/tool-risks/", {"risks": {"get_contact": None}}, format="json"
    )
    assert {t["name"]: t["risk"] for t in back.json()["tools"]}["get_contact"] == "medium"

    revoked = client.post(f"{URL}{body['id']}/revoke/")
    assert revoked.status_code == 200 and revoked.json()["is_active"] is False
    again = client.post(f"{URL}{body['id']}/discover/")
    assert again.status_code == 409 and again.json()["error"]["code"] == "mcp_server_revoked"
    actions = set(AuditEvent.objects.values_list("action", flat=True))
    assert {
        "mcp_server.create",
        "mcp_server.discover",
        "mcp_server.tool_risks",
        "mcp_server.revoke",
    } <= actions


def test_bad_input_is_refused_and_nothing_is_stored(alice, client_for):
    client = client_for(alice)
    with nothing_changes(McpServer):
        for body, field in [
            ({"name": "CRM!", "transport": "streamable_http", "url": "https://x.test/"}, "name"),
            ({"name": "crm", "transport": "streamable_http"}, "url"),
            ({"name": "crm", "transport": "carrier-pigeon"}, "transport"),
            ({"name": "crm", "transport": "stdio", "command": "sh"}, "command"),
            ({"name": "crm", "transport": "streamable_http", "url": "http://10.0.0.5/"}, "url"),
        ]:
            response = client.post(URL, body, format="json")
            assert response.status_code == 400, (body, response.json())
            assert field in response.json()["error"]["details"], (body, response.json())


def test_an_unknown_tool_or_risk_is_refused(alice, client_for):
    client = client_for(alice)
    server = client.post(
        URL,
        {"name": "crm", "transport": "streamable_http", "url": "https://mcp.example.test/"},
        format="json",
    ).json()
    stored = McpServer.objects.get(pk=server["id"])
    stored.tools = [{"name": "get_contact", "input_schema": {"type": "object"}}]
    stored.save()
    for risks in ({"nope": "low"}, {"get_contact": "critical"}):
        with nothing_changes(stored):
            response = client.put(
                f"{URL}{server['id']}/tool-risks/", {"risks": risks}, format="json"
            )
        assert response.status_code == 400


def test_an_unreachable_server_answers_400_not_500(alice, client_for):
    client = client_for(alice)
    server = client.post(
        URL,
        {"name": "down", "transport": "streamable_http", "url": "http://127.0.0.1:9/mcp"},
        format="json",
    ).json()
    response = client.post(f"{URL}{server['id']}/discover/")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "mcp_unavailable"


def test_employees_and_keys_without_the_scope_are_refused(alice, bob, client_for, key_client):
    # Refusals are audited by design (permission denials): only the registry is watched.
    with nothing_changes(McpServer, audit=False, enqueued=False):
        body = {"name": "crm", "transport": "streamable_http", "url": "https://mcp.example.test/"}
        assert client_for(bob).post(URL, body, format="json").status_code == 403
        assert client_for(bob).get(URL).status_code == 403
        assert (
            key_client(alice, ["templates:write"]).post(URL, body, format="json").status_code == 403
        )
    allowed = key_client(alice, ["connectors:write"]).post(URL, body, format="json")
    assert allowed.status_code == 201
