# ruff: noqa: F811 - the fixtures imported from other test modules are parameters here
"""The Models page in a real browser (Debian's Chromium through Playwright, pages served by
uvicorn, runs executed by a real Celery worker): alice adds a provider pointing at a loopback
fake OpenAI-compatible server — the organization's first, so its default —, tests its
connection (latency and the model list), and her agent — whose template names no provider —
answers through it, streamed over the chat's websocket. Screenshots in
var/screenshots/models-*.png (git-ignored)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.agents.fake_models import FakeModelServer
from tests.console.agents_setup import (  # noqa: F401 - fixtures
    alice_agent,
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
REPLY = "The standard discount is 5 percent, answered by the loopback model."


@pytest.fixture
def page(chromium, live_server_url, worker, alice_agent):
    with browser_page(chromium, live_server_url) as page:
        yield page


def test_add_a_provider_test_it_make_it_default_and_chat_through_it(
    page, alice, alice_agent, template
):
    from cadre.agents.models import ModelProviderConfig, Run

    SHOTS.mkdir(parents=True, exist_ok=True)
    # Every request gets the same answer: the connection test and the runs alike.
    with FakeModelServer([{"text": REPLY}] * 20, chunk_delay=0.05) as server:
        sign_in(page, alice)
        page.get_by_role("link", name="Models", exact=True).click()
        expect(page.get_by_role("heading", name="Models", exact=True)).to_be_visible()
        expect(page.get_by_text("No model provider yet")).to_be_visible()

        page.get_by_role("link", name="vLLM").click()
        expect(page.get_by_role("heading", name="Add vLLM")).to_be_visible()
        page.get_by_label("Name").fill("Loopback vLLM")
        page.get_by_label("Base URL").fill(server.base_url)
        page.get_by_label("Model").fill("fake-chat")
        page.get_by_label("Timeout (seconds)").fill("10")
        page.get_by_role("button", name="Add provider").click()
        # The organization's first provider is its default at once.
        expect(
            page.get_by_text("“Loopback vLLM” was added and is the organization's default")
        ).to_be_visible()

        row = page.locator("#providers tr", has_text="Loopback vLLM")
        row.get_by_role("button", name="Test connection").click()
        report = page.locator("#connection-report")
        expect(report).to_contain_text("Loopback vLLM answered")
        expect(page.locator("#report-latency")).to_have_text(re.compile(r"^\d+$"))
        expect(page.locator("#report-models")).to_have_text("fake-chat, fake-large")
        page.screenshot(path=str(SHOTS / "models-tested.png"), full_page=True)

        row = page.locator("#providers tr", has_text="Loopback vLLM")
        expect(row.locator(".badge", has_text="Default")).to_be_visible()
        assert ModelProviderConfig.objects.get(name="Loopback vLLM").is_default
        page.screenshot(path=str(SHOTS / "models-default.png"), full_page=True)

        # The template editor offers the provider and its listed models as selects.
        from cadre.agents import services
        from cadre.tenancy.actors import member_actor

        draft = services.version_draft(actor=member_actor(alice), template=template)
        page.goto(f"/templates/{draft.template_id}/v{draft.number}/edit/")
        provider_select = page.locator("select[name=provider_config]")
        expect(provider_select.locator("option").first).to_have_text(
            "Organization default — Loopback vLLM"
        )
        model_select = page.locator("select[name=model]")
        expect(model_select.locator("optgroup")).to_have_attribute("label", "Loopback vLLM")
        model_select.select_option("fake-large")
        provider_select.scroll_into_view_if_needed()
        page.screenshot(path=str(SHOTS / "models-version-editor.png"))

        received: list[str] = []
        page.on(
            "websocket", lambda ws: ws.on("framereceived", lambda payload: received.append(payload))
        )
        page.get_by_role("link", name="Chat", exact=True).click()
        start_conversation(page, "hello")
        live(page)
        expect(agent_bubble(page).locator(".meta")).to_contain_text("Completed")
        field = page.locator("#chat-form textarea[name=text]")
        field.fill("What is the standard discount?")
        field.press("Enter")
        expect(page.locator("#chat-log .bubble.agent")).to_have_count(2)
        reply = agent_bubble(page)
        expect(reply.locator(".meta")).to_contain_text("Completed")
        expect(reply).to_contain_text(REPLY)
        page.screenshot(path=str(SHOTS / "models-chat.png"), full_page=True)

    run = Run.objects.get(pk=reply.get_attribute("data-run"))
    assert run.output["text"] == REPLY and run.tokens_in == 11
    chats = [r for r in server.requests if r["path"] == "/v1/chat/completions"]
    assert chats[-1]["body"]["model"] == "fake-chat" and chats[-1]["body"]["stream"] is True
    # Streamed: the reply reached the page in pieces before the final reply event.
    frames = [json.loads(frame) for frame in received]
    kinds = [f["kind"] for f in frames if f.get("type") == "event" and f.get("run") == run.pk]
    assert kinds.count("delta") >= 2 and kinds.index("delta") < kinds.index("reply"), kinds


def test_an_unreachable_default_fails_the_reply_fast_and_points_to_models(page, alice):
    from cadre.agents import providers
    from cadre.agents.models import Run
    from cadre.agents.runtime.records.delivery import NOTICES
    from cadre.tenancy.actors import member_actor
    from tests.agents.fake_models import closed_port

    owner = member_actor(alice)
    config = providers.provider_config_create(
        actor=owner,
        name="Gone",
        kind="openai_compatible",
        base_url=closed_port(),
        default_model="fake-chat",
        timeout_seconds=10,
    )
    providers.provider_config_set_default(actor=owner, config=config)
    sign_in(page, alice)
    start_conversation(page, "hello")
    live(page)
    expect(agent_bubble(page).locator(".meta")).to_have_text("Failed")
    field = page.locator("#chat-form textarea[name=text]")
    field.fill("are you there?")
    field.press("Enter")  # over the socket: chat.js adds the hint as the status arrives
    expect(page.locator("#chat-log .bubble.agent")).to_have_count(2)
    reply = agent_bubble(page)
    expect(reply.locator(".meta")).to_have_text("Failed", timeout=10_000)
    # The bubble says what the person's IM would; the endpoint's error is for who can fix it.
    expect(reply).to_contain_text(NOTICES["failed"])
    expect(reply).not_to_contain_text("127.0.0.1")
    run_id = reply.get_attribute("data-run")
    hint = page.locator(f'[data-models-hint="{run_id}"]')
    expect(hint).to_contain_text("Model provider failed: could not reach host 127.0.0.1:")
    expect(hint.get_by_role("link", name="check it under Models")).to_have_attribute(
        "href", "/models/"
    )
    page.screenshot(path=str(SHOTS / "models-chat-failed.png"), full_page=True)
    run = Run.objects.get(pk=run_id)
    assert run.status == Run.Status.FAILED and run.attempts == 1  # no task retries
    assert (run.finished_at - run.started_at).total_seconds() < 8
    hint.get_by_role("link").click()
    expect(page.get_by_role("heading", name="Models", exact=True)).to_be_visible()
