# ruff: noqa: F811 - the fixtures imported from test_browser_navigation are parameters
"""Every detail and edit page of the console opened in a real browser (Debian's Chromium) by
the owner of a demo-like organization (the demo `make up` creates, plus what it lacks: an API
key, OIDC and SAML identity providers, a connector, a budget, an alert rule, an evaluation
suite and run, a skill candidate...), each with a real object: a 200 on the URL asked for, no
server error, no template source ("{{" or "{%") and no "None"/"undefined" where a value
belongs, no JavaScript error and no failed request.

The pages come from the URLconf: every console route with parameters that the authorization
matrix (tests/authorization/matrix.py) declares for GET and that is not public. Its object key
there picks the object here (OBJECTS), so a new page on an object already named is opened
without touching this test; a page naming a new kind of object fails until OBJECTS says which
object it shows. A route that is not a page says why in NOT_PAGES.
Screenshots in var/screenshots/detail-*.png."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from tests.authorization.test_matrix import ROUTES
from tests.console.demo_world import (
    FRAGMENTS,
    NOT_PAGES,
    OBJECTS,
    QUERIES,
    REDIRECTS,
    demo_like_organization,
    detail_pages,
)
from tests.console.test_browser_chat import expect, sign_in_through_the_form
from tests.console.test_browser_navigation import (  # noqa: F401 - fixtures
    LAYOUT_PROBLEMS,
    SHOTS,
    browser_page,
    chromium,
    live_server_url,
    page,
)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

# Text that means the server failed or a value went missing on the way to the page.
SERVER_ERROR = re.compile(
    r"Server Error|Internal Server Error|Traceback|Exception Value|Page not found"
)
MISSING_VALUE = re.compile(r"\bNone\b|\bundefined\b|\bNaN\b|\[object Object\]")
TEMPLATE_SOURCE = re.compile(r"\{\{|\{%")
# A page's visible text, less what shows a template's source on purpose: the persona and
# instructions of a role template carry "{{member.display_name}}" placeholders, shown as written
# in the editor's fields and in the version's source view.
VISIBLE_TEXT = """() => {
  const copy = document.body.cloneNode(true);
  for (const source of copy.querySelectorAll("textarea, input, [data-template-source]")) {
    source.remove();
  }
  for (const help of copy.querySelectorAll(".help")) {
    if (help.textContent.includes("Placeholders:")) help.remove();
  }
  return copy.innerText;
}"""


def test_every_console_page_naming_an_object_is_opened():
    pages = detail_pages()
    missing = sorted({key for _, key in pages} - set(OBJECTS))
    assert not missing, f"say in OBJECTS which object these pages show: {missing}"
    names = {name for name, _ in pages}
    # The pages the issue names are among them.
    for name in ("member", "member_edit", "department", "department_edit", "position_edit"):
        assert f"console:{name}" in names
    for name in ("api_key_revoke", "identity_provider_edit", "audit_event", "budget_edit"):
        assert f"console:{name}" in names
    explained = set(NOT_PAGES) | set(FRAGMENTS) | set(QUERIES) | {name for name, _ in REDIRECTS}
    assert explained <= set(ROUTES)


def test_an_owner_opens_every_detail_and_edit_page(page, monkeypatch):
    world = demo_like_organization(monkeypatch)
    sign_in_through_the_form(page, world["owner"].user.email)
    expect(page.locator(".sidebar")).to_be_visible()

    for stale in SHOTS.glob("detail-*.png"):  # a page no longer opened leaves no picture
        stale.unlink()
    report: dict[str, list[str]] = {}
    opened = 0
    for name, key in detail_pages():
        route = ROUTES[name]
        for variant, obj in world[key]:
            kwargs = OBJECTS[key](obj)
            url = reverse(name, kwargs={arg: kwargs[arg] for arg in route.kwargs})
            landing = url
            if (name, variant) in REDIRECTS:
                landing = reverse(REDIRECTS[name, variant][0], kwargs=kwargs)
            if name in QUERIES:
                url = landing = url + QUERIES[name](world)
            label = f"{name.removeprefix('console:')}-{variant}"
            page.problems.clear()
            response = page.goto(url)
            page.wait_for_load_state("networkidle")
            opened += 1
            shot = SHOTS / f"detail-{label.replace('_', '-')}.png"
            page.screenshot(path=shot, full_page=True)
            problems = page.problems + page.evaluate(LAYOUT_PROBLEMS)
            if response.status != 200:
                problems.append(f"status {response.status}")
            if not page.url.endswith(landing):
                problems.append(f"redirected to {page.url}")
            fragment = name in FRAGMENTS
            if (page.locator(".sidebar").count() == 1) == fragment:
                problems.append("not a fragment" if fragment else "not in the console layout")
            text = page.evaluate(VISIBLE_TEXT)
            for pattern, what in (
                (SERVER_ERROR, "server error"),
                (TEMPLATE_SOURCE, "template source"),
                (MISSING_VALUE, "missing value"),
            ):
                for match in pattern.finditer(text):
                    around = text[max(0, match.start() - 60) : match.end() + 60]
                    problems.append(f"{what}: …{around.strip()!r}…")
            if problems:
                report[f"{label} ({url})"] = problems
    assert opened >= 40
    assert not report, "\n".join(f"{page}: {problems}" for page, problems in report.items())
