# ruff: noqa: F811 - the fixtures imported from other test modules are parameters here
"""The MCP servers page in a real browser (Debian's Chromium through Playwright, pages served
by uvicorn): alice registers the fake CRM (an MCP server written with the SDK, on loopback)
with a credential (a name/value row), discovers its tools — the destructive one defaults to
high risk — sets the read tool's risk, replaces the credential, and revokes the server.
Screenshots in var/screenshots/mcp-*.png (git-ignored)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.agents.fake_mcp_crm import serve_crm
from tests.conftest import PASSWORD
from tests.console.test_browser_chat import (  # noqa: F401 - fixtures and page helpers
    browser_page,
    chromium,
    expect,
    live_server_url,
)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
SHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"


@pytest.fixture
def page(chromium, live_server_url, settings):
    settings.CADRE_MCP_ALLOWED_HOSTS = ["127.0.0.1"]
    with browser_page(chromium, live_server_url) as page:
        yield page


def test_register_a_server_discover_its_tools_and_set_their_risk(page, alice):
    from cadre.agents.models import McpServer

    SHOTS.mkdir(parents=True, exist_ok=True)
    with serve_crm() as url:
        page.goto("/login/?next=/")
        page.get_by_label("Email").fill(alice.user.email)
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        page.get_by_role("link", name="MCP servers", exact=True).click()
        expect(page.get_by_role("heading", name="MCP servers", exact=True)).to_be_visible()
        expect(page.get_by_text("No MCP server yet")).to_be_visible()

        form = page.locator("#mcp-server-form")
        form.get_by_label("Name", exact=True).fill("crm")
        form.get_by_label("URL").fill(url)
        # Credentials are name/value rows, not JSON.
        form.get_by_label("Credential name 1").fill("Authorization")
        form.get_by_label("Credential value 1").fill("Bearer crm-secret")
        form.get_by_label("Description").fill("The sales CRM")
        form.get_by_role("button", name="Register server").click()
        expect(page.get_by_text("crm was registered.")).to_be_visible()
        expect(page.get_by_text("No tools known")).to_be_visible()

        page.get_by_role("button", name="Discover tools").click()
        expect(page.get_by_text("crm lists 2 tools.")).to_be_visible()
    tools = page.locator("#mcp-tools")
    expect(tools.locator("tr[data-tool=delete_contact]")).to_contain_text("destructive")
    expect(tools.locator("tr[data-tool=delete_contact]")).to_contain_text(
        "mcp__crm__delete_contact"
    )
    expect(page.get_by_label("Risk of delete_contact")).to_have_value("default")
    expect(page.get_by_label("Risk of delete_contact").locator("option:checked")).to_have_text(
        "Default (high)"
    )
    expect(page.get_by_label("Risk of get_contact").locator("option:checked")).to_have_text(
        "Default (medium)"
    )
    page.get_by_label("Risk of get_contact").select_option("low")
    page.get_by_role("button", name="Save risks").click()
    expect(page.get_by_text("Tool risks saved.")).to_be_visible()
    expect(page.get_by_label("Risk of get_contact")).to_have_value("low")
    page.screenshot(path=str(SHOTS / "mcp-server-tools.png"), full_page=True)

    server = McpServer.objects.get(name="crm")
    assert server.tool_risks == {"get_contact": "low"}
    assert json.loads(server.credentials) == {"Authorization": "Bearer crm-secret"}
    assert "crm-secret" not in page.content()  # write-only

    # Replaced on the server's page, from the same rows; a name without a value is refused.
    credentials = page.locator("#mcp-credentials-form")
    credentials.get_by_label("Credential name 1").fill("X-Api-Key")
    credentials.get_by_role("button", name="Replace credentials").click()
    expect(credentials.locator(".field-errors")).to_contain_text("X-Api-Key has no value")
    credentials.get_by_label("Credential value 1").fill("key-2")
    page.screenshot(path=str(SHOTS / "mcp-server-credentials.png"), full_page=True)
    credentials.get_by_role("button", name="Replace credentials").click()
    expect(page.get_by_text("crm's credentials were replaced.")).to_be_visible()
    server.refresh_from_db()
    assert json.loads(server.credentials) == {"X-Api-Key": "key-2"}
    assert "key-2" not in page.content()

    page.get_by_role("button", name="Revoke").click()
    expect(page.get_by_text("crm was revoked")).to_be_visible()
    page.get_by_role("navigation", name="Breadcrumb").get_by_role(
        "link", name="MCP servers"
    ).click()
    expect(page.locator("#mcp-servers tr", has_text="crm")).to_contain_text("Revoked")
    page.screenshot(path=str(SHOTS / "mcp-servers-list.png"), full_page=True)
    server.refresh_from_db()
    assert server.is_active is False
