# ruff: noqa: F811 - the fixtures imported from other test modules are parameters here
"""The template editor without JSON, in a real browser (Debian's Chromium through Playwright,
pages served by uvicorn): alice edits a draft with the pickers only — a target position
ticked, two Hub skills chosen (one added with "Add a skill"), an MCP tool allowed at high risk
with confirmation, a tool taken away, memory scopes, retention and experience retrieval, the
hook pipeline reordered and switched on — and the saved version holds exactly that. A
negative retention is shown on its field and stores nothing. Screenshots in
var/screenshots/template-forms-*.png (git-ignored)."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.urls import reverse

from cadre.agents.models import McpServer
from hub.models import DistTag, HubNamespace, SkillPackage, SkillVersion
from tests.conftest import PASSWORD
from tests.console.agents_setup import (  # noqa: F401 - fixtures
    owner,
    sales,
    template,
)
from tests.console.test_browser_chat import (  # noqa: F401 - fixtures and page helpers
    browser_page,
    chromium,
    expect,
    live_server_url,
)
from tests.factories import PositionFactory

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
SHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"


@pytest.fixture
def page(chromium, live_server_url):
    SHOTS.mkdir(parents=True, exist_ok=True)
    with browser_page(chromium, live_server_url) as page:
        page.set_viewport_size({"width": 1400, "height": 900})
        page.problems = []
        page.on(
            "console",
            lambda message: (
                page.problems.append(f"console {message.type}: {message.text}")
                if message.type in ("error", "warning")
                else None
            ),
        )
        yield page


@pytest.fixture
def organization_things(alice, org_a, sales):
    """A second position, an MCP server with discovered tools and two Hub skills."""
    PositionFactory(organization=org_a, name="Key accounts", code="key-accounts")
    McpServer.objects.create(
        organization=org_a,
        name="crm",
        transport="streamable_http",
        url="http://127.0.0.1:9/mcp",
        tools=[
            {"name": "get_contact", "description": "Read a contact"},
            {"name": "delete_contact", "annotations": {"destructiveHint": True}},
        ],
    )
    namespace = HubNamespace.objects.create(organization=org_a, handle="acme")
    for name, number in (("pdf-tools", "1.2.0"), ("crm-notes", "2.0.1")):
        package = SkillPackage.objects.create(
            organization=org_a, namespace=namespace, name=name, owner=alice
        )
        major, minor, patch = (int(part) for part in number.split("."))
        version = SkillVersion.objects.create(
            package=package,
            version=number,
            major=major,
            minor=minor,
            patch=patch,
            status=SkillVersion.Status.PUBLISHED,
            fingerprint="0" * 64,
            created_by=alice,
        )
        DistTag.objects.create(package=package, tag="latest", version=version)


def content(version) -> dict:
    version.refresh_from_db()
    return {name: getattr(version, name) for name in version.CONTENT_FIELDS}


def test_a_draft_is_edited_with_pickers_only(page, alice, template, organization_things):
    version = template.versions.get()
    before = content(version)
    page.goto(f"/login/?next={reverse('console:template_version', args=[template.pk, 1])}")
    page.get_by_label("Email").fill(alice.user.email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("link", name="Edit draft").click()
    expect(page.get_by_role("heading", name="Edit draft v1")).to_be_visible()
    expect(
        page.get_by_role("navigation", name="Editor view").get_by_role(
            "link", name="Advanced (JSON)"
        )
    ).to_be_visible()
    assert page.locator("textarea[name=tool_permissions]").count() == 0  # no JSON here
    page.screenshot(path=str(SHOTS / "template-forms-1-opened.png"), full_page=True)

    # Target positions: the organization's, ticked.
    page.get_by_label("Key accounts (key-accounts)").check()
    page.get_by_label("Sales (sales)").check()

    # Skills: the empty row, then one more from "Add a skill".
    page.get_by_label("Skill 1", exact=True).select_option("@acme/pdf-tools")
    page.get_by_label("Select skill 1 by").select_option("tag")
    page.get_by_label("Range or tag of skill 1").fill("latest")
    page.get_by_role("button", name="Add a skill").click()
    expect(page.get_by_label("Skill 2", exact=True)).to_be_visible()
    page.get_by_label("Skill 2", exact=True).select_option("@acme/crm-notes")
    page.get_by_label("Range or tag of skill 2").fill("^2")
    page.get_by_label("Updates of skill 2").select_option("pinned")

    # Tools, with their own risk shown: allow the CRM's read at high risk, always confirmed.
    row = page.locator("#tool-rows tr[data-tool='mcp__crm__delete_contact']")
    expect(row).to_contain_text("high")
    page.get_by_label("Allow mcp__crm__get_contact").check()
    page.get_by_label("Risk of mcp__crm__get_contact").select_option("high")
    page.get_by_label("Confirmation for mcp__crm__get_contact").select_option("always")
    page.get_by_label("Allow task_create").uncheck()
    expect(page.locator("#tool-rows tr[data-tool='task_create']")).to_have_class("off")

    # Memory: position scope read, user scope written, a negative retention first.
    page.locator("#id_read_scopes").get_by_label(
        "Position — shared by everyone in the role"
    ).check()
    page.locator("#id_write_scopes").get_by_label("User — the person the agent serves").check()
    page.get_by_label("Experience (task trajectory)").check()
    page.get_by_label("Retention (days)").fill("-3")

    # Hooks: skills moved to the top of the context, memory retrieval switched on.
    context_hooks = page.locator(".hook-point[data-point=assemble_context] li")
    expect(context_hooks.first).to_have_attribute("data-hook", "memory_retrieval")
    page.get_by_role("button", name="Move skills up").click()
    page.get_by_role("button", name="Move skills up").click()
    expect(context_hooks.first).to_have_attribute("data-hook", "skills")
    page.get_by_label("Run memory_retrieval (assemble_context)").check()
    page.get_by_label("Run skills (assemble_context)").check()

    page.get_by_role("button", name="Save draft").click()
    retention = page.locator(".field", has=page.get_by_label("Retention (days)"))
    expect(retention.locator(".field-errors")).to_contain_text(
        "Ensure this value is greater than or equal to 1."
    )
    expect(page.get_by_role("alert")).to_contain_text("Please correct the fields marked below.")
    page.screenshot(path=str(SHOTS / "template-forms-2-negative-retention.png"), full_page=True)
    assert content(version) == before  # nothing stored, not even the valid choices

    # What was chosen is still chosen; fix the retention and save.
    expect(page.get_by_label("Skill 2", exact=True)).to_have_value("@acme/crm-notes")
    expect(context_hooks.first).to_have_attribute("data-hook", "skills")
    page.get_by_label("Retention (days)").fill("90")
    page.get_by_role("button", name="Save draft").click()
    expect(page.get_by_text("Draft v1 was saved.")).to_be_visible()
    page.screenshot(path=str(SHOTS / "template-forms-3-saved.png"), full_page=True)

    saved = content(version)
    assert saved["target_positions"] == ["key-accounts", "sales"]
    assert saved["skills"] == [
        {"package": "@acme/pdf-tools", "tag": "latest", "policy": "auto"},
        {"package": "@acme/crm-notes", "range": "^2", "policy": "pinned"},
    ]
    assert saved["tool_permissions"] == {
        "memory_search": {"risk": "low", "confirmation": "never"},
        "im_send": {"risk": "medium", "confirmation": "high_risk"},
        "mcp__crm__get_contact": {"risk": "high", "confirmation": "always"},
    }
    assert saved["memory_policy"] == {
        "read_scopes": ["agent", "user", "position"],
        "write_scopes": ["agent", "user"],
        "retention_days": 90,
        "retrieve_kinds": ["fact", "preference", "requirement", "experience"],
    }
    assert saved["hooks"]["assemble_context"] == [
        {"name": "skills", "enabled": True},
        {"name": "memory_retrieval", "enabled": True},
        {"name": "standing_memories", "enabled": False},
    ]
    assert saved["hooks"]["process_memory"] == before["hooks"]["process_memory"]
    for unchanged in ("name", "model_settings", "agent_md", "user_md_template"):
        assert saved[unchanged] == before[unchanged]

    # The form shows the saved version again; the Advanced (JSON) view holds the same.
    page.goto(reverse("console:template_version_edit", args=[template.pk, 1]))
    expect(page.get_by_label("Retention (days)")).to_have_value("90")
    expect(page.get_by_label("Allow mcp__crm__get_contact")).to_be_checked()
    page.get_by_role("navigation", name="Editor view").get_by_role(
        "link", name="Advanced (JSON)"
    ).click()
    expect(page.locator("textarea[name=memory_policy]")).to_contain_text('"retention_days": 90')
    page.screenshot(path=str(SHOTS / "template-forms-4-advanced.png"), full_page=True)
    assert page.problems == []
