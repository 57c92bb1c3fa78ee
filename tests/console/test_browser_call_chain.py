# ruff: noqa: F811 - the fixtures imported from other test modules are parameters here
"""The call chain page in a real browser (headless Chromium, the ASGI server of
test_browser_chat.py): the root run and its delegated run render with their events, and the
transcript's link leads there. A screenshot is written to var/screenshots/ (git-ignored)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agents.conftest import (  # noqa: F401 - fixtures
    deployment,
    owner,
    published,
    sales,
    template,
)
from tests.agents.test_call_chain import delegated, drain  # noqa: F401 - fixture
from tests.console.test_browser_chat import (  # noqa: F401 - fixtures
    PASSWORD,
    browser_page,
    chromium,
    expect,
    live_server_url,
)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"


def test_the_call_chain_page_renders_in_a_browser(chromium, live_server_url, alice, delegated):
    with browser_page(chromium, live_server_url) as page:
        page.goto(f"/login/?next=/sessions/{delegated.session_id}/")
        page.get_by_label("Email").fill(alice.user.email)
        page.get_by_label("Password").fill(PASSWORD)
        with page.expect_navigation():
            page.get_by_role("button", name="Sign in").click()
        page.locator(f"#run-{delegated.pk}").get_by_test_id("call-chain").click()
        page.wait_for_url(f"**/runs/{delegated.pk}/call-chain/")
        runs = page.get_by_test_id("chain-run")
        expect(runs).to_have_count(2)
        expect(runs.first.locator('[data-kind="inbound"]')).to_contain_text("ask agent")
        expect(runs.first.locator('[data-kind="reply"]')).to_be_visible()
        expect(runs.nth(1)).to_contain_text(f"delegated by run {delegated.pk}")
        expect(page.get_by_test_id("trace")).to_have_text(delegated.trace_id)
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.set_viewport_size({"width": 1280, "height": 900})
        page.screenshot(path=str(SCREENSHOTS / "call_chain.png"), full_page=True)
