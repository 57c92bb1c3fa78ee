# ruff: noqa: F811 - the fixtures imported from the other browser tests are parameters here
"""The first hour and the learning loop in Simplified Chinese, in a real browser (Debian's
Chromium asking for zh-CN, uvicorn, a real Celery worker): a Chinese-speaking installer's demo
organization (演示公司), its owner signing in, chatting with the demo agent on the offline
model, reading the pages of the first hour, stating a preference that becomes a memory and
correcting it — every page and message in Chinese (tests/i18n/untranslated.py), CJK text drawn
(Debian's fonts-noto-cjk), no layout broken by the longer or shorter words; then the switcher
turns the console to English and back. Screenshots in var/screenshots/zh-*.png (git-ignored)."""

from __future__ import annotations

import re
from contextlib import contextmanager

import pytest

from cadre.agents.models import Run
from cadre.memory.models import STATEMENT_KINDS, Memory
from tests.agents.test_worker_e2e import wait_for
from tests.conftest import PASSWORD
from tests.console.test_browser_chat import (  # noqa: F401 - fixtures and page helpers
    TIMEOUT_MS,
    agent_bubble,
    expect,
    launched_chromium,
    live_server_url,
    worker,
)
from tests.console.test_browser_demo import first_start
from tests.console.test_browser_navigation import LAYOUT_PROBLEMS, SHOTS, VIEWPORT
from tests.console.test_learning_loop import after_hooks_done
from tests.i18n.untranslated import english_sentences

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

REPLY_MS = 120_000
PREFERENCE = "以后写报告都用项目符号列出要点。"
FEEDBACK = "不要用项目符号，改用编号列表。"


@pytest.fixture
def demo_zh(monkeypatch, worker):
    monkeypatch.setenv("CADRE_LANGUAGE", "zh-hans")  # a Chinese-speaking installer
    return first_start(monkeypatch)


@pytest.fixture(scope="module")
def chromium_zh():
    """Debian's Chromium with a Chinese interface (--lang=zh-CN: its own date fields too)."""
    with launched_chromium("--lang=zh-CN") as browser:
        yield browser


@contextmanager
def chinese_page(chromium, base_url: str):
    """A browser asking for Chinese (Accept-Language and navigator.language zh-CN)."""
    context = chromium.new_context(base_url=base_url, locale="zh-CN", viewport=VIEWPORT)
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    page.problems = []
    page.on("pageerror", lambda error: page.problems.append(f"page error: {error}"))
    page.on(
        "console",
        lambda message: (
            page.problems.append(f"console {message.type}: {message.text}")
            if message.type == "error"
            else None
        ),
    )
    try:
        yield page
    finally:
        context.close()


def shot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=str(SHOTS / f"zh-{name}.png"), full_page=True)


def read_in_chinese(page, name: str) -> None:
    """The page as it stands: Chinese, no English sentence, nothing overflowing; a screenshot."""
    page.wait_for_load_state("networkidle")
    expect(page.locator("html")).to_have_attribute("lang", "zh-hans")
    english = english_sentences(page.content())
    problems = page.problems + page.evaluate(LAYOUT_PROBLEMS)
    shot(page, name)
    assert not english, f"{name}: English on a Chinese page: {sorted(set(english))}"
    assert not problems, f"{name}: {problems}"


def cjk_is_drawn(page) -> bool:
    """A CJK font is installed: Chinese text is not drawn as the fallback's empty boxes (which
    all measure the same width, whatever the character)."""
    return page.evaluate("""() => {
      const probe = (text) => {
        const span = document.createElement("span");
        span.style.cssText = "font-size:40px;position:absolute;visibility:hidden";
        span.textContent = text;
        document.body.append(span);
        const width = span.getBoundingClientRect().width;
        span.remove();
        return width;
      };
      return probe("一") !== probe("鑫") || probe("一一") > 0 && probe("一") > 20;
    }""")


def live(page) -> None:
    """The chat's socket is open ("Live", in Chinese)."""
    expect(page.locator("#chat-status")).to_have_text("已连接")


def send(page, text: str, *, new: bool = False) -> Run:
    """Send `text` (Enter), as a new conversation when `new`; the run, once it completed and
    its reply is on the page."""
    before = Run.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
    page.locator("#chat-form textarea[name=text]").fill(text)
    if new:  # the first message posts the form (no socket yet); then Enter sends (chat.js)
        page.locator("#chat-form button[type=submit]").click()
    else:
        page.locator("#chat-form textarea[name=text]").press("Enter")
    if new:
        page.wait_for_url(re.compile(r"/chat/sessions/\d+/$"))
        live(page)
    expect(page.locator("#chat-log .bubble.agent[data-run]").last).not_to_have_attribute(
        "data-run", str(before), timeout=REPLY_MS
    )
    run = Run.objects.get(pk=agent_bubble(page).get_attribute("data-run"))
    wait_for(run.pk, statuses={Run.Status.COMPLETED}, seconds=REPLY_MS / 1000)
    expect(agent_bubble(page)).not_to_have_text("…", timeout=REPLY_MS)
    return run


def test_a_chinese_speaking_admin_walks_the_first_hour_and_the_learning_loop(
    chromium_zh, live_server_url, demo_zh
):
    owner = demo_zh.seed.agent.member
    with chinese_page(chromium_zh, live_server_url) as page:
        # Signing in: the page a browser asking for Chinese gets.
        page.goto("/login/?next=/chat/")
        read_in_chinese(page, "01-sign-in")
        assert cjk_is_drawn(page)
        page.locator("input[name=username]").fill(demo_zh.email)
        page.locator("input[name=password]").fill(PASSWORD)
        page.locator("form button[type=submit]").first.click()
        expect(page.locator("#chat")).to_be_visible()
        expect(page.get_by_role("heading", name=re.compile("销售助理"))).to_be_visible()

        # The demo agent answers on the offline model, in Chinese.
        send(page, "标准折扣是多少？", new=True)
        expect(agent_bubble(page)).to_contain_text("离线模型")
        read_in_chinese(page, "02-offline-chat")

        # The first hour's pages.
        for index, path in enumerate(
            ("/", "/members/", "/templates/", "/models/", "/confirmations/", "/usage/", "/audit/")
        ):
            page.goto(path)
            read_in_chinese(page, f"03-{index}-{path.strip('/') or 'home'}")

        # The learning loop: a preference stated in chat becomes a memory...
        page.goto(f"/chat/agents/{demo_zh.seed.agent.pk}/")
        stated = send(page, PREFERENCE, new=True)
        after_hooks_done(stated)
        memory = Memory.objects.get(
            subject=owner,
            status=Memory.Status.ACTIVE,
            kind__in=STATEMENT_KINDS,
            content__contains="项目符号",
        )
        read_in_chinese(page, "04-preference")
        page.goto("/memory/")
        expect(page.locator("tr", has_text="项目符号")).to_have_count(1)
        read_in_chinese(page, "05-memory")

        # ...and a correction replaces it; the chat says so in Chinese.
        page.goto(f"/chat/sessions/{stated.session_id}/")
        live(page)
        corrected = send(page, FEEDBACK)
        told = page.locator(f'#chat-log [data-memory-feedback="{corrected.pk}"]')
        expect(told).to_contain_text("编号列表")
        assert not english_sentences(told.inner_html())
        after_hooks_done(corrected)
        memory.refresh_from_db()
        assert memory.status == Memory.Status.SUPERSEDED
        read_in_chinese(page, "06-corrected")

        # The switcher: English for this member on every device, then Chinese again.
        page.goto("/")
        account_menu = page.locator("details.menu:has([data-testid=language-switcher]) > summary")
        account_menu.click()
        page.locator('[data-testid=language-switcher] button[value="en"]').click()
        expect(page.locator("html")).to_have_attribute("lang", "en")
        owner.refresh_from_db()
        assert owner.language == "en"
        shot(page, "07-english")
        account_menu.click()
        page.locator('[data-testid=language-switcher] button[value="zh-hans"]').click()
        expect(page.locator("html")).to_have_attribute("lang", "zh-hans")
