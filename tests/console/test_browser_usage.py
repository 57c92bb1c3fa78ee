# ruff: noqa: F811 - the fixtures imported from test_browser_chat are parameters here
"""The Usage page in a real browser (Debian's Chromium): the totals and the chart show the
recorded calls, no element is wider than the viewport, a budget is added through the form and
listed with how much of it is used. Screenshots in var/screenshots/usage-*.png (git-ignored)."""

from __future__ import annotations

import re
from itertools import pairwise
from pathlib import Path

import pytest

from cadre.governance.models import Budget
from tests.conftest import PASSWORD
from tests.console.test_browser_chat import (  # noqa: F401 - fixtures and helpers
    browser_page,
    chromium,
    expect,
    live_server_url,
)
from tests.console.test_browser_csp import _sign_in
from tests.console.test_usage_pages import spending  # noqa: F401 - fixture

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
SHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"


def test_usage_page_shows_the_calls_and_takes_a_budget(chromium, live_server_url, alice, spending):
    SHOTS.mkdir(parents=True, exist_ok=True)
    with browser_page(chromium, live_server_url) as page:
        page.set_viewport_size({"width": 1280, "height": 900})
        assert _sign_in(page, alice.user.email, PASSWORD).status == 200
        page.get_by_role("link", name="Usage").click()
        expect(page.locator('[data-total="tokens"]')).to_have_text("560")
        # A bar per day of the month so far; today's holds every token.
        expect(page.locator('svg.usage-chart rect[data-tokens="560"]')).to_have_count(1)
        # The cost in the prices' currency, and a chart whose axes say what they measure.
        expect(page.locator('[data-total="cost"]')).to_have_text("$1.85")
        expect(page.locator(".stat", has=page.locator('[data-total="cost"]'))).to_contain_text(
            "Cost · USD"
        )
        expect(page.locator('[data-axis-title="y"]')).to_have_text("Tokens")
        expect(page.locator('[data-axis="y-max"]')).to_have_text("560")
        expect(page.locator('[data-axis-title="x"]')).to_have_text("Day")
        expect(page.locator('[data-axis="x"]').first).to_have_text(
            re.compile(r"^\d{4}-\d{2}-\d{2}$")
        )
        for label in page.locator('[data-axis="x"], [data-axis="y-max"]').all():
            expect(label).to_be_visible()
        # Day labels do not run into each other.
        boxes = [label.bounding_box() for label in page.locator('[data-axis="x"]').all()]
        assert all(a["x"] + a["width"] <= b["x"] for a, b in pairwise(boxes))
        expect(page.locator("table.usage-breakdown")).to_contain_text("$1.75")
        wide = page.evaluate(
            "() => [...document.querySelectorAll('body *')]"
            ".filter(e => e.getBoundingClientRect().right > window.innerWidth + 1).length"
        )
        assert wide == 0
        page.screenshot(path=SHOTS / "usage-1-page.png", full_page=True)

        page.get_by_role("link", name="Add a budget").first.click()
        page.locator("#id_scope").select_option("organization")
        page.locator("#id_metric").select_option("tokens")
        page.locator("#id_limit").fill("700")
        page.screenshot(path=SHOTS / "usage-2-budget-form.png", full_page=True)
        page.get_by_role("button", name="Add budget").click()
        expect(page.locator("table.budgets")).to_contain_text("the organization")
        expect(page.locator("table.budgets")).to_contain_text("(80.0 %)")
        page.screenshot(path=SHOTS / "usage-3-budgets.png", full_page=True)
    assert Budget.objects.get().used_tokens == 560
