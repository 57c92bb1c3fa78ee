# ruff: noqa: F811 - the fixtures imported from other test modules are parameters here
"""Providers, generating a template from documents and dispatching a version, in a real browser
(Debian's Chromium through Playwright, pages served by uvicorn), as an owner walks them:

- the first provider added is the organization's default at once; a second one, tested, offers
  "Use for all agents"; an unused provider is deleted, the default is not (saying why);
- a new template is created and written from documents in one go (its v1 draft is filled: the
  "Purpose" paragraph kept, the role named once), and the open draft offers it again;
- a published version's page has "Dispatch", leading to the dispatch form with it preselected.

Screenshots in var/screenshots/providers-*.png, generate-*.png, dispatch-*.png (git-ignored)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agents.fake_models import FakeModelServer
from tests.conftest import PASSWORD
from tests.console.agents_setup import (  # noqa: F401 - fixtures
    owner,
    published,
    sales,
    template,
)
from tests.console.test_browser_chat import (  # noqa: F401 - fixtures and page helpers
    browser_page,
    chromium,
    expect,
    live_server_url,
)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
SHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"

PLAYBOOK = """# Marketing playbook

## Purpose
This assistant helps the marketing team plan campaigns
and keep the brand voice consistent across channels.

## Campaign checklist
1. Define the audience.
2. Draft the copy in the brand voice.

## Rules
- Never publish a campaign without the brand lead's approval.
"""
HANDBOOK_ZH = """# 市场工作手册

## 目的
帮助市场团队策划活动。

## 边界
禁止对外公布未发布的价格。
"""


@pytest.fixture
def page(chromium, live_server_url):
    SHOTS.mkdir(parents=True, exist_ok=True)
    with browser_page(chromium, live_server_url) as page:
        # The console asks before a delete (data-confirm): the person says yes.
        page.on("dialog", lambda dialog: dialog.accept())
        yield page


def _sign_in(page, member, next_url: str = "/") -> None:
    page.goto(f"/login/?next={next_url}")
    page.get_by_label("Email").fill(member.user.email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"**{next_url}")


def _add_vllm(page, name: str, base_url: str) -> None:
    page.goto("/models/")
    page.locator("#provider-presets").get_by_role("link", name="vLLM").click()
    page.get_by_label("Name").fill(name)
    page.get_by_label("Base URL").fill(base_url)
    page.get_by_label("Model").fill("fake-chat")
    page.get_by_label("Timeout (seconds)").fill("10")
    page.get_by_role("button", name="Add provider").click()


def test_first_provider_is_the_default_a_tested_one_is_used_for_all_and_deletes(page, alice):
    from cadre.agents.models import ModelProviderConfig

    with FakeModelServer([{"text": "ok"}] * 10) as server:
        _sign_in(page, alice, "/models/")
        _add_vllm(page, "Loopback A", server.base_url)
        expect(
            page.get_by_text("“Loopback A” was added and is the organization's default")
        ).to_be_visible()
        first = page.locator("#providers tr", has_text="Loopback A")
        expect(first.locator(".badge", has_text="Default")).to_be_visible()
        page.screenshot(path=str(SHOTS / "providers-first-default.png"), full_page=True)

        _add_vllm(page, "Loopback B", server.base_url)
        expect(
            page.get_by_text("“Loopback B” was added. Test its connection next.")
        ).to_be_visible()
        page.locator("#providers tr", has_text="Loopback B").get_by_role(
            "button", name="Test connection"
        ).click()
        report = page.locator("#connection-report")
        expect(report).to_contain_text("Loopback B answered")
        expect(report).to_contain_text("answer with Loopback A")
        page.screenshot(path=str(SHOTS / "providers-use-for-all.png"), full_page=True)
        report.get_by_role("button", name="Use for all agents").click()
    expect(page.get_by_text("“Loopback B” is the organization's default")).to_be_visible()
    second = page.locator("#providers tr", has_text="Loopback B")
    expect(second.locator(".badge", has_text="Default")).to_be_visible()
    assert ModelProviderConfig.objects.get(is_default=True).name == "Loopback B"

    # The default cannot go; the page says why and the row stays.
    second.get_by_role("button", name="Delete").click()
    expect(page.locator(".alert-error, .messages")).to_contain_text(
        "“Loopback B” cannot be deleted while it is in use: it is the organization's default"
    )
    expect(page.locator("#providers tr", has_text="Loopback B")).to_be_visible()
    page.screenshot(path=str(SHOTS / "providers-delete-refused.png"), full_page=True)
    # A is no longer used by anything: it goes.
    page.locator("#providers tr", has_text="Loopback A").get_by_role(
        "button", name="Delete"
    ).click()
    expect(page.get_by_text("“Loopback A” was deleted.")).to_be_visible()
    expect(page.locator("#providers tr", has_text="Loopback A")).to_have_count(0)
    page.screenshot(path=str(SHOTS / "providers-deleted.png"), full_page=True)
    assert list(ModelProviderConfig.objects.values_list("name", flat=True)) == ["Loopback B"]


def test_a_new_template_is_generated_from_documents_into_its_first_draft(page, alice, tmp_path):
    from cadre.agents.models import AgentTemplate

    playbook = tmp_path / "playbook.md"
    playbook.write_text(PLAYBOOK, encoding="utf-8")
    handbook = tmp_path / "手册.md"
    handbook.write_text(HANDBOOK_ZH, encoding="utf-8")

    _sign_in(page, alice, "/templates/new/")
    page.get_by_label("Name").fill("Marketing assistant")
    page.get_by_label("Code").fill("marketing")
    page.screenshot(path=str(SHOTS / "generate-create.png"), full_page=True)
    page.get_by_role("button", name="Create and generate from documents").click()
    expect(page.get_by_role("heading", name="Write draft v1 from documents")).to_be_visible()
    page.get_by_label("Documents").set_input_files([str(playbook), str(handbook)])
    page.screenshot(path=str(SHOTS / "generate-upload.png"), full_page=True)
    page.get_by_role("button", name="Generate draft").click()

    expect(page.get_by_text("Draft v1 was written from the documents (offline)")).to_be_visible()
    expect(page.get_by_role("heading", name="Marketing assistant · v1")).to_be_visible()
    content = page.locator(".kv")
    expect(content).to_contain_text(
        "This assistant helps the marketing team plan campaigns and keep the brand voice"
    )
    expect(content).to_contain_text("1. Define the audience.")
    expect(content).to_contain_text("帮助市场团队策划活动。")
    expect(content).to_contain_text("You are the Marketing assistant of {{member.display_name}}.")
    expect(content).not_to_contain_text("assistant assistant")
    expect(content).to_contain_text("- 禁止对外公布未发布的价格。")
    page.screenshot(path=str(SHOTS / "generate-draft.png"), full_page=True)

    # The open draft offers generating again, here and on the template's page.
    expect(page.get_by_role("link", name="Generate from documents")).to_be_visible()
    page.get_by_role("link", name="Marketing assistant", exact=True).click()
    expect(page.get_by_role("link", name="Generate from documents")).to_be_visible()
    template = AgentTemplate.objects.get(code="marketing")
    assert list(template.versions.values_list("number", "status")) == [(1, "draft")]
    assert "This assistant helps the marketing team" in template.versions.get().sop


def test_a_published_version_is_dispatched_from_its_page(page, alice, template, published, sales):
    from cadre.agents.models import Deployment

    alice.positions.add(sales)
    _sign_in(page, alice, f"/templates/{template.pk}/v{published.number}/")
    dispatch = page.get_by_role("link", name=f"Dispatch v{published.number}")
    expect(dispatch).to_be_visible()
    page.screenshot(path=str(SHOTS / "dispatch-version.png"), full_page=True)
    dispatch.click()
    expect(page.get_by_label("Template version")).to_have_value(str(published.pk))
    page.get_by_label("Name").fill("Sales agents")
    page.get_by_label("Sales").check()
    page.screenshot(path=str(SHOTS / "dispatch-form.png"), full_page=True)
    page.get_by_role("button", name="Dispatch").click()
    expect(page.get_by_text("“Sales agents” was dispatched: 1 agent(s) created.")).to_be_visible()
    page.screenshot(path=str(SHOTS / "dispatch-done.png"), full_page=True)
    deployment = Deployment.objects.get(name="Sales agents")
    assert deployment.version_id == published.pk
    assert list(deployment.agents.values_list("member_id", flat=True)) == [alice.pk]
