# ruff: noqa: F811 - the fixtures imported from test_browser_chat are parameters here
"""The console under its Content-Security-Policy in a real browser (Debian's Chromium): pages,
htmx swaps and the behaviours moved out of inline handlers work and the browser reports no
violation; the sign-in lock reads as words. Screenshots in var/screenshots/csp-*.png."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import PASSWORD
from tests.console.test_browser_chat import (  # noqa: F401 - fixtures and helpers
    browser_page,
    chromium,
    expect,
    live_server_url,
)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
SHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"


@pytest.fixture
def page(chromium, live_server_url):
    SHOTS.mkdir(parents=True, exist_ok=True)
    with browser_page(chromium, live_server_url) as page:
        violations: list[str] = []
        page.on(
            "console",
            lambda message: (
                violations.append(message.text)
                if "Content Security Policy" in message.text
                else None
            ),
        )
        page.csp_violations = violations
        yield page
        assert violations == [], f"CSP violations: {violations}"


def _sign_in(page, email: str, password: str):
    page.goto("/login/")
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(password)
    with page.expect_navigation() as navigation:
        page.get_by_role("button", name="Sign in").click()
    return navigation.value


def test_console_pages_work_under_the_policy(page, alice, make_member):
    make_member(display_name="Zoe Quist", email="zoe@acme.test")
    assert _sign_in(page, alice.user.email, PASSWORD).status == 200
    expect(page.locator(".sidebar")).to_be_visible()
    page.screenshot(path=SHOTS / "csp-1-home.png", full_page=True)

    page.goto("/members/")
    page.locator("#id_q").press_sequentially("Zoe")  # htmx swaps the results in (keyup)
    expect(page.locator("#member-results")).to_contain_text("Zoe Quist")
    expect(page.locator("#member-results")).not_to_contain_text("Alice")
    page.screenshot(path=SHOTS / "csp-2-members-htmx.png", full_page=True)

    page.goto("/deployments/")
    with page.expect_navigation():
        page.locator("select[name=status]").select_option("active")  # data-autosubmit
    assert "status=active" in page.url
    page.screenshot(path=SHOTS / "csp-3-deployments-filter.png", full_page=True)

    page.goto("/api/docs/")
    expect(page.locator(".swagger-ui .info")).to_be_visible()
    page.screenshot(path=SHOTS / "csp-4-api-docs.png")


def test_the_sign_in_lock_reads_as_words(page, bob):
    for _ in range(10):
        _sign_in(page, bob.user.email, "not-the-password")
    response = _sign_in(page, bob.user.email, PASSWORD)
    assert response.status == 429
    assert int(response.headers["retry-after"]) > 0
    expect(page.get_by_role("alert")).to_contain_text("Too many failed sign-in attempts")
    expect(page.get_by_role("alert")).to_contain_text("locked for about 15 minutes")
    assert page.url.endswith("/login/")
    page.screenshot(path=SHOTS / "csp-5-sign-in-locked.png", full_page=True)
