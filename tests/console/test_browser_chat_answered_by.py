# ruff: noqa: F811 - the fixtures imported from other test modules are parameters here
"""Which model answered, in a real browser (Debian's Chromium; pages served by uvicorn, runs
executed by a real Celery worker): a reply streamed over the chat's websocket names the provider
and model under it, and so does the page after a reload; an agent on the offline model says
"offline model". Screenshots in var/screenshots/chat-answered-by-*.png (git-ignored)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cadre.agents import providers, services
from tests.agents.fake_models import FakeModelServer
from tests.console.agents_setup import (  # noqa: F401 - fixtures
    alice_agent,
    bob_agent,
    deployment,
    owner,
    published,
    sales,
    template,
)
from tests.console.test_browser_chat import (  # noqa: F401 - fixtures and page helpers
    agent_bubble,
    browser_page,
    chromium,
    expect,
    live,
    live_server_url,
    sign_in,
    start_conversation,
    worker,
)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
SHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"
REPLY = "The standard discount is 5 percent."


@pytest.fixture
def page(chromium, live_server_url, worker, alice_agent, bob_agent):
    with browser_page(chromium, live_server_url) as page:
        page.set_viewport_size({"width": 1400, "height": 900})
        yield page


def test_a_live_reply_and_the_reloaded_page_name_the_model(page, owner, alice):
    SHOTS.mkdir(parents=True, exist_ok=True)
    with FakeModelServer([{"text": REPLY}] * 10, chunk_delay=0.05) as server:
        config = services.provider_config_create(
            actor=owner,
            name="Loopback vLLM",
            kind="openai_compatible",
            base_url=server.base_url,
            default_model="fake-chat",
        )
        providers.provider_config_set_default(actor=owner, config=config)
        sign_in(page, alice)
        start_conversation(page, "hello")
        live(page)
        expect(agent_bubble(page).locator(".meta")).to_contain_text("Completed")

        # The next reply arrives over the socket, without a reload, naming the model.
        page.evaluate("window.__cadreMarker = 1")
        field = page.locator("#chat-form textarea[name=text]")
        field.fill("What is the standard discount?")
        field.press("Enter")
        expect(page.locator("#chat-log .bubble.agent")).to_have_count(2)
        reply = agent_bubble(page)
        expect(reply.locator(".meta")).to_contain_text("Completed")
        expect(reply).to_contain_text(REPLY)
        expect(reply.locator("[data-answered-by]")).to_have_text(
            "Answered by: Loopback vLLM · fake-chat"
        )
        assert page.evaluate("window.__cadreMarker") == 1  # the same page: it came live
        page.screenshot(path=str(SHOTS / "chat-answered-by-1-live.png"), full_page=True)

        page.reload()
        live(page)
        answered = page.locator("#chat-log .bubble.agent [data-answered-by]")
        expect(answered).to_have_count(2)
        expect(answered).to_have_text(["Answered by: Loopback vLLM · fake-chat"] * 2)
        page.screenshot(path=str(SHOTS / "chat-answered-by-2-reloaded.png"), full_page=True)
    assert any(r["path"] == "/v1/chat/completions" for r in server.requests)


def test_an_offline_agent_says_the_offline_model_answered(page, bob):
    sign_in(page, bob)
    start_conversation(page, "hello")
    live(page)
    page.evaluate("window.__cadreMarker = 1")
    field = page.locator("#chat-form textarea[name=text]")
    field.fill("What is the standard discount?")
    field.press("Enter")
    expect(page.locator("#chat-log .bubble.agent")).to_have_count(2)
    reply = agent_bubble(page)
    expect(reply.locator(".meta")).to_contain_text("Completed")
    expect(reply.locator("[data-answered-by]")).to_have_text("Answered by: offline model")
    assert page.evaluate("window.__cadreMarker") == 1
    page.screenshot(path=str(SHOTS / "chat-answered-by-3-offline.png"), full_page=True)
    page.reload()
    expect(page.locator("#chat-log .bubble.agent [data-answered-by]")).to_have_text(
        ["Answered by: offline model"] * 2
    )
