# ruff: noqa: F811 - the fixtures imported from other test modules are parameters here
"""What a person is asked, and what they are told, about an agent's message, in a real browser
(headless Chromium, the ASGI server and the real Celery worker of test_browser_chat.py): the
confirmation of a message to the whole staff says how many people it reaches, as a sentence;
a message no IM connector can deliver is never asked about, and its call chain and
transcript show the send failed. Screenshots: var/screenshots/effects-*.png (git-ignored)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cadre.agents.models import Run, Step
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.agents.runtime.records import delivery
from cadre.governance.models import Confirmation
from cadre.tenancy.actors import member_actor
from cadre.tenancy.models import Member
from tests.agents.test_worker_e2e import wait_for, worker  # noqa: F401 - fixture: a worker
from tests.console.agents_setup import (  # noqa: F401 - fixtures (offline, no embedding hooks)
    bob_agent,
    deployment,
    owner,
    published,
    sales,
    template,
)
from tests.console.test_browser_chat import (  # noqa: F401 - fixtures
    PASSWORD,
    browser_page,
    chromium,
    expect,
    live_server_url,
)
from tests.factories import MemberFactory

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"


def _sign_in(page, member, next_url: str) -> None:
    page.goto(f"/login/?next={next_url}")
    page.get_by_label("Email").fill(member.user.email)
    page.get_by_label("Password").fill(PASSWORD)
    with page.expect_navigation():
        page.get_by_role("button", name="Sign in").click()


def test_a_group_send_is_asked_with_its_reach_and_an_undeliverable_one_is_not(
    chromium, live_server_url, worker, bob, bob_agent, org_a
):
    for index in range(10):
        MemberFactory(organization=org_a, display_name=f"Colleague {index}")
    people = Member.objects.filter(organization=org_a, status=Member.Status.ACTIVE).count()
    asked = runtime.run_start(
        actor=member_actor(bob), agent=bob_agent, text="send hello to group:all-staff"
    )
    assert wait_for(asked.pk, statuses=[Run.Status.WAITING]).status == Run.Status.WAITING
    confirmation = Confirmation.objects.get(run_id=asked.pk)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with browser_page(chromium, live_server_url) as page:
        page.set_viewport_size({"width": 1400, "height": 900})
        _sign_in(page, bob, f"/confirmations/{confirmation.pk}/")
        page.wait_for_url(f"**/confirmations/{confirmation.pk}/")
        expect(page.get_by_test_id("blast-radius")).to_have_text(
            f"Sends to {people} people in All staff."
        )
        expect(page.locator("body")).not_to_contain_text("recipients: 1")
        page.screenshot(path=str(SCREENSHOTS / "effects-confirmation.png"), full_page=True)

        # With no IM connector, the same request is never put to anyone: it fails at once.
        with delivery.channels.overridden():
            refused = runtime.run_start(
                actor=member_actor(bob), agent=bob_agent, text="send hello to group:all-staff"
            )
            assert wait_for(refused.pk).status == Run.Status.COMPLETED
        assert Confirmation.objects.filter(run_id=refused.pk).count() == 0
        step = Run.objects.get(pk=refused.pk).steps.get(kind="tool_call", name="im_send")
        assert step.status == Step.Status.FAILED

        page.goto(f"/runs/{refused.pk}/call-chain/")
        tool = page.locator('[data-kind="tool_call"]')
        expect(tool.locator(".badge")).to_have_text("Failed")
        expect(tool).to_contain_text("Not done: no connector for channel")
        page.screenshot(path=str(SCREENSHOTS / "effects-call-chain-failed.png"), full_page=True)

        page.goto(f"/sessions/{refused.session_id}/")
        transcript = page.locator(f"#run-{refused.pk}")
        expect(transcript.locator(".badge-failed").first).to_have_text("Failed")
        expect(transcript).to_contain_text("Not done: no connector for channel")
        expect(transcript).not_to_contain_text("im_send done")
        page.screenshot(path=str(SCREENSHOTS / "effects-transcript-failed.png"), full_page=True)
