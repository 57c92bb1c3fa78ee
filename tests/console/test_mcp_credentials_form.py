"""An MCP server's credentials in the console are name/value rows, not JSON: registering with
rows stores them encrypted (header names for HTTP, environment variable names for stdio); a
row without a value, a bad name or a name given twice is shown on the field and stores
nothing; the server's page replaces or removes them, audited, and never shows a value."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from cadre.agents.models import McpServer
from cadre.governance.models import AuditEvent
from tests.console.agents_setup import client

pytestmark = pytest.mark.django_db


def register(browser, names: list[str], values: list[str], **fields):
    data = {
        "name": "crm",
        "transport": "streamable_http",
        "url": "https://crm.example.com/mcp",
        "credential_name": names,
        "credential_value": values,
        **fields,
    }
    return browser.post(reverse("console:mcp_servers"), data)


def test_registering_with_credential_rows_stores_them(alice):
    response = register(
        client(alice), ["Authorization", "X-Tenant", ""], ["Bearer crm-secret", "acme", ""]
    )
    assert response.status_code == 302
    server = McpServer.objects.get(name="crm")
    assert json.loads(server.credentials) == {
        "Authorization": "Bearer crm-secret",
        "X-Tenant": "acme",
    }
    page = client(alice).get(response["Location"]).content.decode()
    assert "crm-secret" not in page and "credentials set" in page


@pytest.mark.parametrize(
    ("names", "values", "transport", "message"),
    [
        (["Authorization"], [""], "streamable_http", "Row 1: Authorization has no value."),
        ([""], ["secret"], "streamable_http", "Row 1: give the value a name."),
        (["Bad Header"], ["x"], "streamable_http", "is not a header name"),
        (["A", "A"], ["1", "2"], "streamable_http", "Row 2: A is given twice."),
        (["API-KEY"], ["x"], "stdio", "is not an environment variable name"),
    ],
)
def test_a_bad_row_is_shown_and_nothing_is_registered(alice, names, values, transport, message):
    response = register(client(alice), names, values, transport=transport, command="crm-mcp")
    assert response.status_code == 400
    assert message in response.context["form"].errors["credentials"][0]
    html = response.content.decode().replace("&#x27;", "'")
    assert message.split(":")[-1].strip() in html
    assert "secret" not in html  # a value typed is never sent back
    assert not McpServer.objects.exists()


def test_the_servers_page_replaces_and_removes_credentials(alice, bob, charlie):
    register(client(alice), ["Authorization"], ["Bearer one"])
    server = McpServer.objects.get(name="crm")
    url = reverse("console:mcp_server", args=[server.pk])
    browser = client(alice)

    empty = browser.post(url, {"credential_name": [""], "credential_value": [""]})
    assert empty.status_code == 400
    assert "Enter at least one name and value." in empty.content.decode()
    server.refresh_from_db()
    assert json.loads(server.credentials) == {"Authorization": "Bearer one"}

    replaced = browser.post(url, {"credential_name": ["X-Api-Key"], "credential_value": ["two"]})
    assert replaced.status_code == 302
    server.refresh_from_db()
    assert json.loads(server.credentials) == {"X-Api-Key": "two"}
    event = AuditEvent.objects.filter(action="mcp_server.update").latest("id")
    assert "two" not in json.dumps(event.changes)

    both = browser.post(
        url, {"credential_name": ["X"], "credential_value": ["three"], "clear": "on"}
    )
    assert "Either enter new credentials or remove them." in both.content.decode()
    removed = browser.post(url, {"credential_name": [""], "credential_value": [""], "clear": "on"})
    assert removed.status_code == 302
    server.refresh_from_db()
    assert server.credentials == ""

    # Without connector.manage, or from another organization: nothing changes.
    for member, status in ((bob, 403), (charlie, 404)):
        response = client(member).post(url, {"credential_name": ["X"], "credential_value": ["y"]})
        assert response.status_code == status
    server.refresh_from_db()
    assert server.credentials == ""
