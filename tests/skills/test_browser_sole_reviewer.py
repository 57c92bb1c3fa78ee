# ruff: noqa: F811 - the fixtures imported from tests.console.test_browser_chat are parameters here
"""A sole admin finishes the skill loop in a real browser (headless Chromium, pages served by
uvicorn): edits the review stages in the console (a refused save shows its error and changes
nothing), approves their own candidate as sole reviewer with a justification, and the Hub
version page says so. Screenshots of each step go to var/screenshots/."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("playwright.sync_api")

from django.urls import reverse

from cadre.skills import selectors, services
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
JUSTIFICATION = "Two-person company: I am the only admin, nobody else can review."


def shot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"sole-reviewer-{name}.png"), full_page=True)


def test_a_sole_admin_edits_stages_and_publishes_their_own_skill(chromium, live_server_url, alice):
    with browser_page(chromium, live_server_url) as page:
        page.goto("/login/?next=" + reverse("console:skill_review_stages"))
        page.get_by_label("Email").fill(alice.user.email)
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url("**/skills/reviews/stages/")
        name = page.locator("input[name=stages-0-name]")
        expect(name).to_have_value("Skill review")
        shot(page, "1-stages")

        # A stage nobody could decide is refused: the error is shown, nothing is saved.
        name.fill("Owner review")
        page.locator("select[name=stages-0-permission]").select_option("")
        page.get_by_role("button", name="Save stages").click()
        expect(page.locator("#stage-errors")).to_contain_text("nobody could decide")
        shot(page, "2-refused")
        assert selectors.stages_for(alice.organization)[0]["name"] == "Skill review"

        page.locator("input[name=stages-0-name]").fill("Owner review")
        page.locator("select[name=stages-0-permission]").select_option("skill.review")
        page.locator("input[name=stages-0-roles][value=owner]").check()
        page.get_by_role("button", name="Save stages").click()
        expect(page.locator(".alert-success, .messages")).to_contain_text("Saved 1 review stage")
        shot(page, "3-saved")
        stage = selectors.stages_for(alice.organization)[0]
        assert stage["name"] == "Owner review" and stage["roles"] == ["owner"]

        files = {
            "SKILL.md": skill_md(
                "booth-budget",
                "Plan a trade-show booth budget: space, travel, materials and follow-up.",
                ["List the costs", "Compare with last year", "Send it for approval"],
                example="Canton Fair, autumn.",
            )
        }
        candidate = services.candidate_create(
            actor=member_actor(alice), source="upload", files=files, requested_by=alice
        )
        page.goto(reverse("console:skill_review", args=[candidate.pk]))
        expect(page.locator("#sole-reviewer-note")).to_contain_text("sole reviewer")
        page.get_by_label("Approve").check()
        page.get_by_label("Sole reviewer justification").fill(JUSTIFICATION)
        shot(page, "4-decide")
        page.get_by_role("button", name="Record decision").click()
        expect(page.locator("h1")).to_contain_text("Published")
        shot(page, "5-published")
        candidate.refresh_from_db()
        assert candidate.status == SkillCandidate.Status.PUBLISHED

        version = SkillVersion.objects.get(package__name="booth-budget")
        page.goto(
            reverse(
                "console:hub_version",
                args=[version.package.namespace.handle, "booth-budget", version.version],
            )
        )
        review = page.locator("#version-review")
        expect(review).to_contain_text("decided by the requester, Alice, as sole reviewer")
        expect(review).to_contain_text(JUSTIFICATION)
        expect(review).to_contain_text("Owner review")
        shot(page, "6-hub-version")
