# ruff: noqa: F811 - the fixtures imported from the other browser tests are parameters here
"""A new admin's first hour in a real browser (Debian's Chromium, uvicorn, a real Celery
worker): the first start's demo data, the first sign-in, the demo agent's offline reply, a
provider added on the Models page against a loopback fake OpenAI-compatible server (the first,
so the default), tested and priced on its edit page, the demo agent answering through it streamed,
its calls and their cost on the Usage page,
and a hard budget at the used amount refusing the next message before any model call.
Screenshots in var/screenshots/first-hour-*.png (git-ignored)."""

from __future__ import annotations

import json
import re
from decimal import Decimal

import pytest
from django.db.models import Sum

from cadre.console.templatetags.console import format_money
from tests.agents.fake_models import FakeModelServer
from tests.console.test_browser_chat import (  # noqa: F401 - fixtures and page helpers
    agent_bubble,
    browser_page,
    chromium,
    expect,
    live,
    live_server_url,
    worker,
)
from tests.console.test_browser_demo import chat_once, demo  # noqa: F401 - fixture
from tests.console.test_browser_models import SHOTS

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
REPLY = "The standard discount is 5 percent, from the loopback model."
USAGE = {"prompt_tokens": 40, "completion_tokens": 12}


def shot(page, name: str) -> None:
    page.screenshot(path=str(SHOTS / f"first-hour-{name}.png"), full_page=True)


def send(page, text: str, replies: int) -> None:
    field = page.locator("#chat-form textarea[name=text]")
    field.fill(text)
    field.press("Enter")
    expect(page.locator("#chat-log .bubble.agent")).to_have_count(replies)
    expect(agent_bubble(page).locator(".meta")).to_contain_text("Completed")


def chat_calls(server) -> list[dict]:
    return [r for r in server.requests if r["path"] == "/v1/chat/completions"]


def test_a_new_admin_goes_from_the_demo_to_a_model_usage_and_a_budget(
    chromium, live_server_url, demo
):
    from cadre.agents.models import ModelProviderConfig, Run
    from cadre.governance.models import Budget, UsageRecord

    SHOTS.mkdir(parents=True, exist_ok=True)
    turn = {"text": REPLY, "usage": USAGE}
    with (
        FakeModelServer([turn] * 20, chunk_delay=0.05) as server,
        browser_page(chromium, live_server_url) as page,
    ):
        page.set_viewport_size({"width": 1280, "height": 900})
        # First sign-in and the demo agent's offline reply.
        reply = chat_once(page, demo, "What is the standard discount?")
        expect(reply).to_contain_text("Offline model: no language model is configured.")
        conversation = page.url  # the conversation the chat moved to
        shot(page, "1-offline-chat")

        # Models: add a vLLM provider at the loopback server (the first: the default), test it.
        page.get_by_role("link", name="Models", exact=True).click()
        expect(page.get_by_role("heading", name="Models", exact=True)).to_be_visible()
        shot(page, "2-models-empty")
        page.get_by_role("link", name="vLLM").click()
        page.get_by_label("Name").fill("Loopback vLLM")
        page.get_by_label("Base URL").fill(server.base_url)
        page.get_by_label("Model").fill("fake-chat")
        page.get_by_label("Timeout (seconds)").fill("10")
        shot(page, "3-provider-form")
        page.get_by_role("button", name="Add provider").click()
        expect(
            page.get_by_text("“Loopback vLLM” was added and is the organization's default")
        ).to_be_visible()
        assert ModelProviderConfig.objects.get(name="Loopback vLLM").is_default
        row = page.locator("#providers tr", has_text="Loopback vLLM")
        expect(row.locator(".badge", has_text="Default")).to_be_visible()
        row.get_by_role("button", name="Test connection").click()
        expect(page.locator("#connection-report")).to_contain_text("Loopback vLLM answered")
        expect(page.locator("#report-models")).to_have_text("fake-chat, fake-large")
        # Already the default: the report offers no "Use for all agents".
        expect(page.get_by_role("button", name="Use for all agents")).to_have_count(0)
        shot(page, "4-tested")
        # Its prices, on its edit page: the calls through it get a cost.
        page.locator("#providers tr", has_text="Loopback vLLM").get_by_role(
            "link", name="Edit"
        ).click()
        page.locator("#id_prices-input").fill("2")
        page.locator("#id_prices-output").fill("10")
        page.get_by_role("button", name="Save prices").click()
        expect(page.get_by_text("Prices of “Loopback vLLM” were saved.")).to_be_visible()
        shot(page, "5b-prices")

        # The demo agent now answers through it, streamed over the chat's websocket.
        received: list[str] = []
        page.on(
            "websocket", lambda ws: ws.on("framereceived", lambda payload: received.append(payload))
        )
        page.goto(conversation)
        live(page)
        send(page, "And for a two-year contract?", replies=2)
        reply = agent_bubble(page)
        expect(reply).to_contain_text(REPLY)
        expect(reply).not_to_contain_text("Offline model")
        shot(page, "6-model-chat")
        run = Run.objects.get(pk=reply.get_attribute("data-run"))
        assert run.output["text"] == REPLY
        calls = chat_calls(server)
        assert calls[-1]["body"]["model"] == "fake-chat" and calls[-1]["body"]["stream"] is True
        assert calls[-1]["body"]["messages"][-1]["content"] == "And for a two-year contract?"
        frames = [json.loads(frame) for frame in received]
        kinds = [f["kind"] for f in frames if f.get("type") == "event" and f.get("run") == run.pk]
        assert kinds.count("delta") >= 2 and kinds.index("delta") < kinds.index("reply"), kinds

        # Usage: the page's totals are the records' sums.
        page.get_by_role("link", name="Usage").click()
        settled = UsageRecord.objects.filter(status="settled")
        sums = settled.aggregate(i=Sum("input_tokens"), o=Sum("output_tokens"), c=Sum("cost"))
        # 40 input and 12 output tokens at 2 and 10 per million
        assert sums["c"] >= Decimal("0.000200")
        used = (sums["i"] or 0) + (sums["o"] or 0)
        assert used >= USAGE["prompt_tokens"] + USAGE["completion_tokens"]
        expect(page.locator('[data-total="tokens"]')).to_have_text(str(used))
        expect(page.locator('[data-total="calls"]')).to_have_text(str(settled.count()))
        expect(page.locator('[data-total="cost"]')).to_have_text(format_money(sums["c"], "USD"))
        shot(page, "7-usage")

        # A hard monthly budget at exactly the used amount.
        page.get_by_role("link", name="Add a budget").first.click()
        page.locator("#id_scope").select_option("organization")
        page.locator("#id_metric").select_option("tokens")
        page.locator("#id_limit").fill(str(used))
        page.locator("#id_enforcement").select_option("hard")
        shot(page, "8-budget-form")
        page.get_by_role("button", name="Add budget").click()
        expect(page.locator("table.budgets")).to_contain_text("(100.0 %)")
        shot(page, "9-budgets")
        budget = Budget.objects.get()
        assert budget.enforcement == "hard" and budget.used_tokens == used

        # The next message is refused with the budget's words; the model never hears of it.
        before = len(chat_calls(server))
        page.goto(conversation)
        live(page)
        send(page, "One more question?", replies=3)
        refused = agent_bubble(page)
        expect(refused).to_contain_text("I can't run this request: The monthly tokens budget")
        expect(refused).to_contain_text(re.compile(rf"{used:,} tokens of {used:,} tokens used"))
        shot(page, "10-refused")
        assert len(chat_calls(server)) == before
    budget.refresh_from_db()
    assert budget.used_tokens == used and budget.reserved_tokens == 0
