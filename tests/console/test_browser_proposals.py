# ruff: noqa: F811 - the fixtures imported from test_browser_chat are parameters here
"""Skill proposals reach the person in web chat, in a real browser (Playwright on Debian's
Chromium, the live ASGI server and a real Celery worker of test_browser_chat): a correction of
the agent's answer shows a "Save as a skill?" card; "Save as skill" turns it into a skill
candidate in review without reloading the page; "Dismiss" on another stores nothing; a stated
preference shows no card; "My skill proposals" is in the navigation and lists what is pending
with the same actions. Screenshots go to var/screenshots/ (git-ignored)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.console.test_browser_chat import (  # noqa: F401 - fixtures and helpers
    agent_bubble,
    bob_agent,
    chromium,
    deployment,
    expect,
    live,
    live_server_url,
    owner,
    page,
    published,
    sales,
    sign_in,
    start_conversation,
    template,
    worker,
)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"
REQUEST = "Prepare the project update for the Shanghai launch."
CORRECTION = "You forgot the risks section; next time also include one."


def _shot(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"proposals-{name}.png"), full_page=True)


def _say(page, text: str) -> None:
    count = page.locator("#chat-log .bubble.agent").count()
    page.locator("#chat-form textarea[name=text]").fill(text)
    page.get_by_role("button", name="Send").click()
    expect(page.locator("#chat-log .bubble.agent")).to_have_count(count + 1)
    expect(agent_bubble(page).locator(".meta")).to_contain_text("Completed")


def test_a_correction_shows_a_card_and_save_as_skill_makes_a_candidate(page, bob):
    from cadre.skills.models import SkillCandidate, SkillProposal

    sign_in(page, bob)
    nav = page.locator("nav, aside").get_by_role("link", name="My skill proposals")
    expect(nav.first).to_be_visible()
    start_conversation(page, REQUEST)
    live(page)
    expect(agent_bubble(page).locator(".meta")).to_contain_text("Completed")
    page.evaluate("window.__cadreMarker = 1")

    _say(page, CORRECTION)
    card = page.locator("#chat-log .proposal-box")
    expect(card).to_have_count(1)
    expect(card).to_contain_text("Save as a skill?")
    proposal = SkillProposal.objects.get()
    expect(card).to_have_attribute("data-proposal", str(proposal.pk))
    expect(card).to_contain_text(proposal.name)
    run_id = agent_bubble(page).get_attribute("data-run")
    expect(card).to_have_attribute("data-run", run_id)
    _shot(page, "1-card-in-chat")

    card.get_by_role("button", name="Save as skill").click()
    expect(card).to_contain_text("Saved as a skill")
    expect(card.get_by_role("button")).to_have_count(0)
    assert page.evaluate("window.__cadreMarker") == 1, "the page reloaded"
    proposal.refresh_from_db()
    assert proposal.status == SkillProposal.Status.CONFIRMED
    candidate = SkillCandidate.objects.get()
    assert proposal.candidate_id == candidate.pk and candidate.requested_by_id == bob.pk
    assert candidate.status == SkillCandidate.Status.IN_REVIEW
    assert candidate.evidence.get().data["confirmed_via"] == "console"
    link = card.get_by_role("link", name="Open the review")
    expect(link).to_have_attribute("href", f"/skills/reviews/{candidate.pk}/")
    _shot(page, "2-saved")

    # A reload no longer offers the decided proposal.
    page.reload()
    live(page)
    expect(page.locator("#chat-log .proposal-box")).to_have_count(0)


def test_dismiss_stores_nothing_a_preference_shows_no_card_and_the_page_lists_pending(page, bob):
    from cadre.skills.models import SkillCandidate, SkillProposal

    sign_in(page, bob)
    start_conversation(page, REQUEST)
    live(page)
    expect(agent_bubble(page).locator(".meta")).to_contain_text("Completed")

    # A correction, left pending, is listed on "My skill proposals".
    _say(page, CORRECTION)
    card = page.locator("#chat-log .proposal-box")
    expect(card).to_have_count(1)
    proposal = SkillProposal.objects.get()

    # A stated preference after it is not a correction: no second card, no proposal.
    _say(page, "From now on, always write reports in bullet points, and my manager is Li Wei.")
    preference_run = int(agent_bubble(page).get_attribute("data-run"))
    _wait_after_hooks(preference_run)
    expect(page.locator("#chat-log .proposal-box")).to_have_count(1)
    assert SkillProposal.objects.count() == 1
    chat_url = page.url
    page.locator("nav, aside").get_by_role("link", name="My skill proposals").first.click()
    page.wait_for_url(re.compile(r"/skills/proposals/$"))
    expect(page.get_by_role("heading", name="My skill proposals")).to_be_visible()
    expect(page.locator("main, body").first).to_contain_text(proposal.name)
    expect(page.get_by_role("button", name="Save as skill")).to_have_count(1)
    expect(page.get_by_role("button", name="Dismiss")).to_have_count(1)
    _shot(page, "3-my-proposals")

    # Back in the chat, the server-rendered card dismisses over the API: nothing stored.
    page.goto(chat_url)
    live(page)
    card = page.locator("#chat-log .proposal-box")
    expect(card).to_have_attribute("data-proposal", str(proposal.pk))
    card.get_by_role("button", name="Dismiss").click()
    expect(card).to_contain_text("Dismissed: nothing was sent to review.")
    _shot(page, "4-dismissed")
    proposal.refresh_from_db()
    assert proposal.status == SkillProposal.Status.DISMISSED
    assert not SkillCandidate.objects.exists()


def _wait_after_hooks(run_id: int, seconds: float = 30) -> None:
    """The proposal (or its absence) is decided by the run's post_process hook, in the worker."""
    import time

    from cadre.agents.models import Step

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        step = Step.objects.filter(run_id=run_id, name="post_process:skill_backflow").first()
        if step is not None and step.status == Step.Status.COMPLETED:
            assert step.output.get("proposal") is None, step.output
            return
        time.sleep(0.1)
    raise AssertionError(f"the after-run hooks of run {run_id} did not finish")
