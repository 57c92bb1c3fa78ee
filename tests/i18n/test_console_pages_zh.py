"""Every console page in Simplified Chinese (issue #33's test): the owner of a Chinese demo-like
organization (the demo `make up` creates for a Chinese-speaking installer, plus one of each
object it lacks, tests/console/demo_world.py) opens every page the authorization matrix declares
for GET — the navigation's pages and every detail and edit page, with a real object — and meets
no English sentence (tests/i18n/untranslated.py: visible text and the attributes people read,
less code, product names and identifiers). The same pages for an English member of the same
organization are in English."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from tests.authorization.matrix import declarations
from tests.authorization.test_matrix import ROUTES
from tests.console.demo_world import (
    NOT_PAGES,
    OBJECTS,
    QUERIES,
    demo_like_organization,
)
from tests.i18n.untranslated import english_sentences

pytestmark = pytest.mark.django_db(transaction=True)

# Console GET routes that are not pages a person reads.
NOT_READ = {
    **NOT_PAGES,
    "console:javascript_catalog": "the scripts' catalog (JavaScript), not a page",
}
# Data the test world holds in English whatever the organization's language: made by shared
# test helpers (hub/tests/agent_setup.py's templates and skills), not by Cadre.
DATA = (
    "Assistant",
    "You help with office work",
    "Answer briefly",
    "hello",  # install_and_run's message
    "Fill and merge",  # hub/tests/skill_samples.py
    "crm",  # the MCP server's name
)


def console_pages() -> list[tuple[str, str]]:
    """(URL name, object key or "-") of every console page a signed-in member opens."""
    pages = []
    for declaration in declarations():
        if (
            declaration.method == "GET"
            and declaration.route.startswith("console:")
            and declaration.rule != "public"
            and declaration.route not in NOT_READ
        ):
            pages.append((declaration.route, declaration.object))
    return pages


def _urls(world: dict) -> list[tuple[str, str]]:
    urls = []
    for name, key in console_pages():
        route = ROUTES[name]
        if not route.kwargs:
            urls.append((name, reverse(name)))
            continue
        for variant, obj in world[key]:
            kwargs = OBJECTS[key](obj)
            url = reverse(name, kwargs={arg: kwargs[arg] for arg in route.kwargs})
            if name in QUERIES:
                url += QUERIES[name](world)
            urls.append((f"{name}-{variant}", url))
    return urls


def _read(client: Client, url: str, **headers) -> tuple[int, str, str]:
    response = client.get(url, follow=True, **headers)
    kind = response.headers.get("Content-Type", "")
    body = response.content.decode() if "text/html" in kind else ""
    return response.status_code, kind, body


def _english(html: str) -> list[str]:
    return [
        phrase
        for phrase in english_sentences(html)
        if not any(phrase.startswith(data) for data in DATA)
    ]


def test_a_chinese_owner_meets_no_english_on_any_console_page(monkeypatch):
    world = demo_like_organization(monkeypatch, language="zh-hans")
    owner = world["owner"]
    assert owner.language == "" and world["org"].locale == "zh-hans"  # the organization's
    client = Client()
    client.force_login(owner.user)
    report = {}
    opened = 0
    for label, url in _urls(world):
        status, _, html = _read(client, url)
        if status != 200:
            report[f"{label} {url}"] = [f"status {status}"]
            continue
        if not html:
            continue  # a file or JSON (downloads, chart data)
        opened += 1
        english = _english(html)
        if english:
            report[f"{label} {url}"] = sorted(set(english))
    assert opened >= 60
    assert not report, "English left on the Chinese pages:\n" + "\n".join(
        f"{page}: {phrases}" for page, phrases in sorted(report.items())
    )


def test_an_english_member_of_the_same_organization_reads_english(monkeypatch):
    world = demo_like_organization(monkeypatch, language="zh-hans")
    owner = world["owner"]
    owner.language = "en"
    owner.save(update_fields=["language"])
    client = Client()
    client.force_login(owner.user)
    for name in ("console:home", "console:members", "console:templates", "console:audit"):
        status, _, html = _read(client, reverse(name))
        assert status == 200
        assert '<html lang="en"' in html
        assert english_sentences(html), name  # English sentences: the page speaks English
