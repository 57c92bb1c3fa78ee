# ruff: noqa: F811 - the fixtures imported from test_browser_chat and agents_setup are parameters
"""Every page of the console's navigation opened in a real browser (Debian's Chromium) by an
owner, with data on it: no JavaScript or console error, no failed request (the favicon
included), no element wider than the viewport, no short list stretched to the page's height,
icons drawn as SVG rather than glyphs; the Pending badge is amber.
The pages come from cadre.console.navigation, so a page added there is walked too; every detail
and edit page is opened by test_browser_detail_pages.py.
Screenshots in var/screenshots/nav-*.png."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.urls import reverse

from cadre.console.navigation import NAVIGATION
from tests.console.agents_setup import (  # noqa: F401 - fixtures
    alice_agent,
    bob_agent,
    deployment,
    owner,
    published,
    sales,
    template,
)
from tests.console.test_agents_pages_sessions import _run
from tests.console.test_browser_chat import (  # noqa: F401 - fixtures and helpers
    browser_page,
    chromium,
    expect,
    live_server_url,
    sign_in_through_the_form,
)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
SHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"
VIEWPORT = {"width": 1280, "height": 800}

# Elements wider than the viewport, and lists of a few items as tall as the window (the
# sign-in page's full-height layout leaking into a page's list).
LAYOUT_PROBLEMS = """() => {
  const width = document.documentElement.clientWidth;
  const problems = [];
  if (document.documentElement.scrollWidth > width) {
    problems.push(`the page scrolls sideways: ${document.documentElement.scrollWidth}px`);
  }
  const describe = (element) => element.tagName.toLowerCase()
    + (element.id ? "#" + element.id : "")
    + (element.className && typeof element.className === "string"
       ? "." + element.className.trim().split(/\\s+/).join(".") : "");
  for (const element of document.querySelectorAll("body *")) {
    const box = element.getBoundingClientRect();
    const size = (value) => `${Math.round(value)}px`;
    if (box.width > width + 1) problems.push(`${describe(element)} is ${size(box.width)} wide`);
    if ((element.tagName === "UL" || element.tagName === "OL") && element.children.length < 10
        && box.height >= window.innerHeight * 0.9) {
      const items = element.children.length;
      problems.push(`${describe(element)} (${items} items) is ${size(box.height)} tall`);
    }
  }
  // Icons are inline SVGs: a glyph would need an emoji or CJK font the machine may lack.
  for (const element of document.querySelectorAll(".empty-icon, .caret, .check")) {
    if (!element.querySelector("svg") || element.textContent.trim()) {
      problems.push(`${describe(element)} is drawn with a glyph, not an icon`);
    }
  }
  return problems;
}"""


@pytest.fixture
def page(chromium, live_server_url):
    SHOTS.mkdir(parents=True, exist_ok=True)
    with browser_page(chromium, live_server_url) as page:
        page.set_viewport_size(VIEWPORT)
        page.problems = []
        page.on(
            "console",
            lambda message: (
                page.problems.append(f"console {message.type}: {message.text}")
                if message.type in ("error", "warning")
                else None
            ),
        )
        page.on(
            "requestfailed",
            lambda request: page.problems.append(f"request failed: {request.url}"),
        )
        page.on(
            "response",
            lambda response: (
                page.problems.append(f"{response.status} for {response.url}")
                if response.status >= 400
                else None
            ),
        )
        yield page


def test_an_owner_opens_every_page_of_the_navigation(page, alice, bob, bob_agent, alice_agent):
    run = _run(bob, bob_agent, "What is the standard discount?")  # a transcript to look at
    sign_in_through_the_form(page, alice.user.email)
    expect(page.locator(".sidebar")).to_be_visible()

    shown = page.locator(".sidebar .nav-link").evaluate_all(
        "links => links.map(link => link.getAttribute('href'))"
    )
    pages = [(item.label, reverse(item.url_name)) for item in NAVIGATION]
    assert shown == [url for _, url in pages]  # an owner sees the whole navigation
    pages.append(("Session transcript", reverse("console:session", args=[run.session_id])))

    report = {}
    for index, (label, url) in enumerate(pages):
        page.problems.clear()
        response = page.goto(url)
        page.wait_for_load_state("networkidle")
        assert response.status == 200, f"{label}: {response.status} at {url}"
        slug = label.lower().replace(" & ", "-").replace(" ", "-")
        page.screenshot(path=SHOTS / f"nav-{index:02d}-{slug}.png", full_page=True)
        problems = page.problems + page.evaluate(LAYOUT_PROBLEMS)
        if problems:
            report[f"{label} ({url})"] = problems
    assert report == {}

    # A pending status reads as waiting (amber), not as done (green).
    colours = page.evaluate("""() => Object.fromEntries(["pending", "active"].map(
      (status) => {
        const badge = document.createElement("span");
        badge.className = `badge badge-${status}`;
        document.body.append(badge);
        const colour = getComputedStyle(badge).color;
        badge.remove();
        return [status, colour];
      }))""")
    assert colours["pending"] != colours["active"]
    assert colours["pending"] == "rgb(161, 92, 7)"
