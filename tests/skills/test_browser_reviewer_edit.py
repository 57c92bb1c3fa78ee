# ruff: noqa: F811 - the fixtures imported from tests.console.test_browser_chat are parameters here
"""A reviewer edits a drafted skill on its review page in a real browser (headless Chromium,
pages served by uvicorn), then approves it with an internal comment: the published version is
the edited text and its changelog the one the reviewer wrote, not the comment. Screenshots go
to var/screenshots/."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("playwright.sync_api")

from django.urls import reverse

from cadre.skills import services
from cadre.skills.models import SkillCandidate
from cadre.tenancy.actors import member_actor
from hub.models import SkillVersion
from tests.conftest import PASSWORD
from tests.console.test_browser_chat import (  # noqa: F401 - fixtures
    browser_page,
    chromium,
    expect,
    live_server_url,
)
from tests.skills.conftest import skill_md

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
SHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"
COMMENT = "Internal: the draft said bullet points, fixed it."


def shot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"reviewer-edit-{name}.png"), full_page=True)


def test_a_reviewer_edits_the_draft_on_the_review_page_then_approves_it(
    chromium, live_server_url, alice, make_member
):
    dave = make_member(roles=("business_admin",), display_name="Dave", email="dave@acme.test")
    candidate = services.candidate_create(
        actor=member_actor(dave),
        source="upload",
        files={
            "SKILL.md": skill_md(
                "weekly-report-format",
                "Format weekly reports the way the team reads them.",
                ["Use bullet points"],
            )
        },
        requested_by=dave,
    )
    with browser_page(chromium, live_server_url) as page:
        page.goto("/login/?next=" + reverse("console:skill_review", args=[candidate.pk]))
        page.get_by_label("Email").fill(alice.user.email)
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(f"**/skills/reviews/{candidate.pk}/")

        page.locator("#edit-candidate summary").click()
        body = page.locator("textarea[name=edit-body]")
        expect(body).to_contain_text("Use bullet points")
        body.fill("# Weekly report format\n\n## Steps\n\n1. Use numbered lists.")
        page.locator("textarea[name=edit-changelog]").fill("Numbered lists, not bullet points.")
        page.locator("textarea[name=edit-note]").fill("the draft had it backwards")
        shot(page, "1-edit")
        page.get_by_role("button", name="Save edit").click()
        expect(page.locator(".alert-success, .messages")).to_contain_text("new revision")
        expect(page.locator("#candidate-changelog")).to_contain_text("Numbered lists")
        candidate.refresh_from_db()
        assert candidate.revision == 2

        page.get_by_label("Approve").check()
        page.locator("textarea[name=comment]").fill(COMMENT)
        shot(page, "2-decide")
        page.get_by_role("button", name="Record decision").click()
        expect(page.locator("h1")).to_contain_text("Published")
        shot(page, "3-published")

    candidate.refresh_from_db()
    assert candidate.status == SkillCandidate.Status.PUBLISHED
    version = SkillVersion.objects.get(package__name="weekly-report-format")
    assert "1. Use numbered lists." in version.body and "bullet" not in version.body
    assert version.changelog == "Numbered lists, not bullet points."
    assert COMMENT not in version.changelog
