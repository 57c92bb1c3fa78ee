# ruff: noqa: F811 - the fixtures imported from other test modules are parameters here
"""The web chat never leaves a person guessing, in a real browser (Debian's Chromium; pages
served by uvicorn): a message no worker takes says how long it has waited and that no worker
is taking runs, and Cancel cancels it; Retry hands it to a worker that started meanwhile;
Enter sends the first message of a new conversation (Shift+Enter is a new line); a decided
confirmation keeps its card and decision after a reload; tool results read as sentences.
Screenshots in var/screenshots/chat-*.png (git-ignored)."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest

from cadre.agents import selectors
from cadre.agents.models import Run, TemplateVersion
from cadre.governance.models import AuditEvent, Confirmation
from tests.console.agents_setup import (  # noqa: F401 - fixtures
    TOOLS,
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


@pytest.fixture
def quick_grace(monkeypatch):
    """The page judges the workers one second after a message was queued, not ten."""
    monkeypatch.setattr(selectors, "CHAT_QUEUE_GRACE", timedelta(seconds=1))


@pytest.fixture
def page(chromium, live_server_url, bob_agent, quick_grace):
    """A chat with no worker running: runs stay queued until a test starts one."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    with browser_page(chromium, live_server_url) as page:
        page.set_viewport_size({"width": 1400, "height": 900})
        yield page


def queue_box(page, run_id: int):
    return page.locator(f'#chat-log [data-queue-run="{run_id}"]')


def test_a_message_no_worker_takes_says_so_and_cancel_cancels_it(page, bob):
    sign_in(page, bob)
    session_id = start_conversation(page, "hello there")
    live(page)
    run = Run.objects.get(session_id=session_id)
    assert run.status == Run.Status.QUEUED
    box = queue_box(page, run.pk)
    waited = re.compile(r"^Waiting for \d+ seconds?\.$")
    expect(box.locator("[data-queue-waited]")).to_have_text(waited)
    expect(box.locator("[data-queue-workers]")).to_contain_text("No worker is taking runs")
    expect(box).to_have_attribute("data-workers", "none")
    expect(agent_bubble(page).locator(".meta")).to_have_text("Queued")
    page.screenshot(path=str(SHOTS / "chat-queued-no-worker.png"), full_page=True)

    # A message sent over the socket meanwhile gets its own line once it has waited.
    page.evaluate("window.__cadreMarker = 1")
    field = page.locator("#chat-form textarea[name=text]")
    field.fill("are you there?")
    field.press("Enter")
    expect(page.locator("#chat-log .queue-box")).to_have_count(2)
    second = int(agent_bubble(page).get_attribute("data-run"))
    expect(queue_box(page, second).locator("[data-queue-workers]")).to_contain_text(
        "No worker is taking runs"
    )

    box.get_by_role("button", name="Cancel").click()
    expect(box).to_have_count(0)
    first = page.locator(f'#chat-log .bubble.agent[data-run="{run.pk}"]')
    expect(first.locator(".meta")).to_have_text("Cancelled")
    assert page.evaluate("window.__cadreMarker") == 1, "the page reloaded"
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED
    assert AuditEvent.objects.filter(action="run.cancel", target_id=str(run.pk)).count() == 1
    assert Run.objects.get(pk=second).status == Run.Status.QUEUED
    page.screenshot(path=str(SHOTS / "chat-queued-cancelled.png"), full_page=True)

    page.reload()
    live(page)
    expect(page.locator("#chat-log .queue-box")).to_have_count(1)
    expect(queue_box(page, second).locator("[data-queue-workers]")).to_contain_text(
        "No worker is taking runs"
    )


def test_retry_hands_a_waiting_message_to_a_worker_that_started_meanwhile(page, bob, request):
    sign_in(page, bob)
    session_id = start_conversation(page, "What is the standard discount?")
    live(page)
    run = Run.objects.get(session_id=session_id)
    box = queue_box(page, run.pk)
    expect(box).to_have_attribute("data-workers", "none")

    # A worker starts on its own queue: the message's task, sent before, never reaches it.
    request.getfixturevalue("worker")
    box.get_by_role("button", name="Retry").click()
    reply = agent_bubble(page)
    expect(reply.locator(".meta")).to_have_text("Completed")
    expect(reply).to_contain_text("5 percent")
    expect(box).to_have_count(0)
    assert AuditEvent.objects.filter(action="run.requeue", target_id=str(run.pk)).count() == 1
    assert Run.objects.get(pk=run.pk).status == Run.Status.COMPLETED
    page.screenshot(path=str(SHOTS / "chat-queued-retried.png"), full_page=True)


def test_enter_sends_the_first_message_and_shift_enter_is_a_new_line(page, bob, bob_agent):
    sign_in(page, bob)
    expect(page.locator("#chat-status")).to_have_text("New conversation")
    field = page.locator("#chat-form textarea[name=text]")
    field.click()
    field.type("first line")
    field.press("Shift+Enter")
    field.type("second line")
    expect(field).to_have_value("first line\nsecond line")
    assert page.url.endswith(f"/chat/agents/{bob_agent.pk}/")
    field.press("Enter")
    page.wait_for_url(re.compile(r"/chat/sessions/\d+/$"))
    session_id = int(re.search(r"/chat/sessions/(\d+)/$", page.url).group(1))
    expect(page.locator("#chat-log .bubble.user")).to_have_text(["first line\nsecond line"])
    run = Run.objects.get(session_id=session_id)
    # A form posts a textarea's new lines as CRLF (the HTML standard): one message, two lines.
    assert run.input["text"].splitlines() == ["first line", "second line"]
    assert run.agent_id == bob_agent.pk


@pytest.fixture
def asking_tools(published):
    """The agent asks before creating a task and may remember what the person says."""
    tools = {
        **TOOLS,
        "task_create": {"risk": "low", "confirmation": "always"},
        "memory_write": {"risk": "low", "confirmation": "never"},
    }
    TemplateVersion.objects.filter(pk=published.pk).update(tool_permissions=tools)


def test_after_a_reload_the_confirmation_card_keeps_its_decision(page, bob, asking_tools, request):
    request.getfixturevalue("worker")
    sign_in(page, bob)
    start_conversation(page, "hello there")
    live(page)
    expect(agent_bubble(page).locator(".meta")).to_contain_text("Completed")
    field = page.locator("#chat-form textarea[name=text]")
    field.fill("remind me to call the supplier")
    field.press("Enter")
    box = page.locator("#chat-log .confirm-box")
    expect(box).to_contain_text("Confirmation needed")
    run_id = int(agent_bubble(page).get_attribute("data-run"))
    confirmation = Confirmation.objects.get(run_id=run_id)

    # Reloaded while pending: the card is there with its buttons.
    page.reload()
    live(page)
    card = page.locator(f'#chat-log [data-confirmation="{confirmation.pk}"]')
    expect(card).to_contain_text("Confirmation needed")
    expect(card.get_by_role("button", name="Approve")).to_be_visible()
    card.get_by_role("button", name="Approve").click()
    expect(card.locator("[data-decision]")).to_have_text(
        f"Decision: approved by {bob.display_name}."
    )
    reply = agent_bubble(page)
    expect(reply.locator(".meta")).to_have_text("Completed")
    expect(reply).to_contain_text("Added a task: call the supplier.")

    # Reloaded after the decision: the card stays in the transcript, decided, no buttons.
    page.reload()
    live(page)
    card = page.locator(f'#chat-log [data-confirmation="{confirmation.pk}"]')
    expect(card).to_have_count(1)
    expect(card.locator("[data-decision]")).to_have_text(
        f"Decision: approved by {bob.display_name}."
    )
    expect(card.get_by_role("button")).to_have_count(0)
    expect(card).to_have_attribute("data-confirmation-status", "approved")
    expect(card).to_contain_text("Create the task “call the supplier”.")
    expect(card).not_to_contain_text("Arguments:")
    page.screenshot(path=str(SHOTS / "chat-confirmation-reloaded.png"), full_page=True)


def test_tool_results_read_as_sentences(page, bob, asking_tools, request):
    request.getfixturevalue("worker")
    sign_in(page, bob)
    start_conversation(page, "hello there")
    live(page)
    expect(agent_bubble(page).locator(".meta")).to_contain_text("Completed")
    field = page.locator("#chat-form textarea[name=text]")
    field.fill("remember that I prefer morning meetings")
    field.press("Enter")
    expect(page.locator("#chat-log .bubble.agent")).to_have_count(2)
    reply = agent_bubble(page)
    expect(reply.locator(".meta")).to_have_text("Completed")
    expect(reply).to_contain_text("Remembered this for you.")
    text = reply.evaluate("node => node.firstChild.data")
    assert "memory_id" not in text and "user:" not in text and "{" not in text, text
    page.screenshot(path=str(SHOTS / "chat-tool-sentences.png"), full_page=True)
    page.reload()
    live(page)
    expect(agent_bubble(page)).to_contain_text("Remembered this for you.")
    expect(page.locator("#chat-log")).not_to_contain_text("memory_id")
