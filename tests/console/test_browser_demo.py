# ruff: noqa: F811 - the fixtures imported from tests.console.test_browser_chat are parameters
"""The first minute after `make up`, in a real browser: the demo set-up runs as the first start
runs it, then the demo owner signs in through the form, chats with the demo agent over the
public web chat path (uvicorn, websocket, a real Celery worker) and gets the offline model's
plain reply, finds the demo's pending confirmation and sees the chat in the Memory Viewer.
Screenshots in var/screenshots/demo-*."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.urls import reverse

from cadre.agents.models import Run
from cadre.memory.models import Memory
from cadre.runtime.demo import demo_setup
from tests.agents.fake_models import FakeModelServer
from tests.agents.test_worker_e2e import wait_for, worker  # noqa: F401 - fixture
from tests.conftest import PASSWORD
from tests.console.test_browser_chat import (  # noqa: F401 - fixtures
    agent_bubble,
    browser_page,
    chromium,
    live,
    live_server_url,
    sign_in_through_the_form,
    start_conversation,
)

expect = pytest.importorskip("playwright.sync_api").expect
pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"


def first_start(monkeypatch):
    """The demo set-up as `cadre up` runs it, once the runs worker has taken the demo's queued
    run (after the sample memories' embeddings, which load the local model once) and it waits
    for the owner's confirmation."""
    monkeypatch.setenv("CADRE_DEMO_PASSWORD", PASSWORD)
    account = demo_setup()
    pending = Run.objects.get(agent=account.seed.agent)
    wait_for(pending.pk, statuses={Run.Status.WAITING}, seconds=180)
    return account


@pytest.fixture
def demo(monkeypatch, worker):
    return first_start(monkeypatch)


def chat_once(page, account, text: str):
    """Sign in as the demo owner, ask the demo agent; the finished reply bubble."""
    sign_in_through_the_form(page, account.email)
    assert page.url.endswith(f"/chat/agents/{account.seed.agent.pk}/")
    expect(page.get_by_role("heading", name="Sales assistant (demo) · Demo Admin")).to_be_visible()
    start_conversation(page, text)
    live(page)
    reply = agent_bubble(page)
    expect(reply.locator(".meta")).to_contain_text("Completed")
    return reply


def test_the_demo_owner_chats_with_the_demo_agent_at_once(chromium, live_server_url, demo):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with browser_page(chromium, live_server_url) as page:
        reply = chat_once(page, demo, "What is the standard discount?")
        expect(reply).to_contain_text("Offline model: no language model is configured.")
        expect(reply).to_contain_text("Configure a model under Models.")
        expect(reply).to_contain_text("5 percent")  # the sample memory, retrieved
        text = reply.inner_text()
        assert not re.search(r"\[[a-z_]+(:\d+)?#\d*\]", text), text
        # The owner rates the answer under it.
        rate = page.locator(f'[data-rate-run="{demo.seed.agent.runs.latest("created_at").pk}"]')
        rate.get_by_role("button", name="Helpful", exact=True).click()
        expect(rate).to_contain_text("you rated this answer helpful")
        page.screenshot(path=str(SCREENSHOTS / "demo-chat.png"), full_page=True)

        page.goto(reverse("console:confirmations"))
        expect(page.locator("main")).to_contain_text("task_create")
        page.screenshot(path=str(SCREENSHOTS / "demo-confirmations.png"), full_page=True)

        # The chat seen in the Memory Viewer: the sample memory the reply used is on the
        # heatmap, its trail lists the model call, the timeline draws the demo's memories and
        # the map is computed by the worker and drawn.
        discount = Memory.objects.get(
            organization=demo.seed.agent.organization, content__contains="standard discount"
        )
        _viewer(page, "/memory/heatmap/", "heatmap")
        details = page.locator("[data-viewer-details]")
        expect(details).to_contain_text("standard discount")
        expect(details).to_contain_text("Every memory used is listed as hottest.")
        expect(details.locator("li", has_text="standard discount")).to_have_count(1)
        page.goto(f"/memory/{discount.pk}/")
        expect(page.get_by_test_id("call-count")).not_to_have_text("0")
        expect(page.locator("main")).to_contain_text("What is the standard discount?")
        page.screenshot(path=str(SCREENSHOTS / "demo-memory-trail.png"), full_page=True)
        _viewer(page, "/memory/timeline/", "timeline")
        expect(page.locator("[data-viewer-status]")).to_contain_text("memories in range")
        _viewer(page, "/memory/map/", "map")
        expect(page.locator("[data-viewer-status]")).to_contain_text("memories")
        # The rating is the recall hit rate's signal: the one rated call that was sent
        # memories was a success.
        _viewer(page, "/memory/quality/", "quality")
        expect(page.locator('[data-figure="recall_hit_rate"] .value')).to_have_text("100.0%")


def _viewer(page, path: str, name: str) -> None:
    """A Memory Viewer page opened and its chart drawn (a map first computed by the worker:
    the page polls until it is ready)."""
    page.goto(path)
    expect(page.locator("#memory-viewer[data-ready=true]")).to_be_attached(timeout=60_000)
    expect(page.locator("[data-viewer-chart] canvas, [data-figure] canvas").first).to_be_visible()
    page.screenshot(path=str(SCREENSHOTS / f"demo-viewer-{name}.png"), full_page=True)


def test_the_demo_agent_answers_through_the_model_the_environment_names(
    chromium, live_server_url, worker, monkeypatch
):
    script = [
        # the demo's queued run: the model asks to message all staff, which waits
        {
            "tool_calls": [
                {"name": "im_send", "arguments": {"to": ["group:all-staff"], "text": "hi"}}
            ]
        },
        {"text": "The standard discount is 5 percent."},
    ]
    with FakeModelServer(script) as server:
        monkeypatch.setenv("CADRE_MODEL_BASE_URL", server.base_url)
        monkeypatch.setenv("CADRE_MODEL_NAME", "demo-model")
        account = first_start(monkeypatch)
        with browser_page(chromium, live_server_url) as page:
            reply = chat_once(page, account, "What is the standard discount?")
            expect(reply).to_contain_text("The standard discount is 5 percent.")
            expect(reply).not_to_contain_text("Offline model")
            page.screenshot(path=str(SCREENSHOTS / "demo-chat-model.png"), full_page=True)
        asked = server.requests[-1]["body"]
        assert asked["model"] == "demo-model" and asked["stream"] is True
        assert asked["messages"][-1]["content"] == "What is the standard discount?"
