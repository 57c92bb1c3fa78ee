# ruff: noqa: F811 - the fixtures imported from tests.console.agents_setup are parameters here
"""The console's web chat in a real browser: headless Chromium (Playwright, Debian's
/usr/bin/chromium) talks to bob's agent on pages served by a real ASGI server (uvicorn running
`cadre.asgi:application` in a thread of this process, static files through ServeStatic as in
production), while a real Celery worker executes the runs with the offline provider.
chat.js must send over the `ws/chat/<session>/` websocket without reloading the page, stream
the reply into the agent's bubble, and decide a confirmation inline."""

from __future__ import annotations

import contextlib
import json
import os
import re
import time

import pytest

playwright_sync = pytest.importorskip("playwright.sync_api")
uvicorn = pytest.importorskip("uvicorn")


from cadre.agents.models import Run  # noqa: E402
from cadre.governance.models import Confirmation  # noqa: E402
from tests.agents.test_worker_e2e import worker  # noqa: E402, F401 - fixture: a Celery worker
from tests.conftest import PASSWORD  # noqa: E402
from tests.console.agents_setup import (  # noqa: E402, F401 - fixtures (offline, no embedding hooks)
    bob_agent,
    deployment,
    owner,
    published,
    sales,
    template,
)
from tests.live_server import live_server_url  # noqa: E402, F401 - fixture: uvicorn on loopback

CHROMIUM = "/usr/bin/chromium"
if not os.access(CHROMIUM, os.X_OK):
    pytest.skip(
        f"{CHROMIUM} is missing (apt-get install chromium); Playwright never downloads browsers",
        allow_module_level=True,
    )

expect = playwright_sync.expect
pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
TIMEOUT_MS = 15_000
expect.set_options(timeout=TIMEOUT_MS)


@contextlib.contextmanager
def launched_chromium(*args: str):
    """Debian's Chromium, with command-line `args` (e.g. "--lang=zh-CN")."""
    # Playwright's sync API drives its event loop from the main thread's greenlets: while it
    # is alive, Django sees a running loop there and refuses the ORM (SynchronousOnlyOperation)
    # to the tests, the fixtures and the worker's start. Nothing here is a coroutine.
    unsafe = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with playwright_sync.sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=CHROMIUM, headless=True, args=list(args)
            )
            yield browser
            browser.close()
    finally:
        if unsafe is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = unsafe


@pytest.fixture(scope="module")
def chromium():
    with launched_chromium() as browser:
        yield browser


@contextlib.contextmanager
def browser_page(chromium, base_url: str):
    context = chromium.new_context(base_url=base_url)
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    yield page
    context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


@pytest.fixture
def page(chromium, live_server_url, worker, bob_agent):
    with browser_page(chromium, live_server_url) as page:
        yield page


def sign_in_through_the_form(page, email: str) -> None:
    page.goto("/login/?next=/chat/")
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(PASSWORD)
    with page.expect_navigation() as navigation:
        page.get_by_role("button", name="Sign in").click()
    assert navigation.value.status == 200, f"{navigation.value.status} on {page.url}"
    expect(page.locator("#chat")).to_be_visible()


def sign_in(page, member) -> None:
    """Through the login form, to the chat."""
    sign_in_through_the_form(page, member.user.email)


def start_conversation(page, text: str) -> int:
    """The first message of a conversation posts (there is no session, hence no socket yet)
    and lands on the session's page; returns the session id."""
    expect(page.locator("#chat-status")).to_have_text("New conversation")
    page.locator("#chat-form textarea[name=text]").fill(text)
    page.get_by_role("button", name="Send").click()
    page.wait_for_url(re.compile(r"/chat/sessions/\d+/$"))
    return int(re.search(r"/chat/sessions/(\d+)/$", page.url).group(1))


def live(page) -> None:
    """chat.js falls back to posting the form while its socket is not open: wait for it."""
    expect(page.locator("#chat-status")).to_have_text("Live")


def agent_bubble(page, index: int = -1):
    bubbles = page.locator("#chat-log .bubble.agent")
    return bubbles.last if index == -1 else bubbles.nth(index)


def test_signing_in_through_the_login_form(page, bob, bob_agent):
    sign_in_through_the_form(page, bob.user.email)
    assert page.url.endswith(f"/chat/agents/{bob_agent.pk}/")


def test_a_message_streams_its_reply_without_reloading_and_persists(page, bob, bob_agent):
    sign_in(page, bob)
    assert page.url.endswith(f"/chat/agents/{bob_agent.pk}/")
    session_id = start_conversation(page, "hello there")
    live(page)
    first = agent_bubble(page, 0)
    expect(first.locator(".meta")).to_contain_text("Completed")
    expect(first).to_contain_text("Offline model: no language model is configured.")

    page.evaluate("window.__cadreMarker = 1")
    field = page.locator("#chat-form textarea[name=text]")
    field.fill("What is the standard discount?")
    field.press("Enter")  # Enter sends (chat.js), as the Send button does

    users = page.locator("#chat-log .bubble.user")
    expect(users).to_have_count(2)
    expect(users.last).to_have_text("What is the standard discount?")
    expect(field).to_have_value("")
    expect(page.locator("#chat-log .bubble.agent")).to_have_count(2)
    reply = agent_bubble(page)
    expect(reply.locator(".meta")).to_have_text("Completed")
    expect(reply).to_contain_text("Offline model: no language model is configured.")
    expect(reply).to_contain_text("5 percent")
    assert page.evaluate("window.__cadreMarker") == 1, "the page reloaded"
    assert page.url.endswith(f"/chat/sessions/{session_id}/")

    run = Run.objects.get(pk=reply.get_attribute("data-run"))
    assert run.session_id == session_id and run.status == Run.Status.COMPLETED
    assert run.input["text"] == "What is the standard discount?"
    streamed = reply.evaluate("node => node.firstChild.data")
    assert streamed == run.output["text"]

    page.reload()
    assert page.evaluate("window.__cadreMarker") is None
    expect(page.locator("#chat-log .bubble.user")).to_have_text(
        ["hello there", "What is the standard discount?"]
    )
    expect(page.locator("#chat-log .bubble.agent")).to_have_count(2)
    persisted = agent_bubble(page)
    expect(persisted).to_have_attribute("data-run", str(run.pk))
    expect(persisted).to_contain_text(run.output["text"])
    expect(persisted.locator(".meta")).to_contain_text("Completed")
    live(page)


def test_the_message_goes_over_the_websocket_not_a_post(page, bob):
    sockets: list = []
    received: list[str] = []
    sent: list[str] = []
    posts: list[str] = []

    def on_socket(ws) -> None:
        sockets.append(ws)
        ws.on("framereceived", lambda payload: received.append(payload))
        ws.on("framesent", lambda payload: sent.append(payload))

    page.on("websocket", on_socket)
    sign_in(page, bob)
    session_id = start_conversation(page, "hello there")
    live(page)
    expect(agent_bubble(page).locator(".meta")).to_contain_text("Completed")
    page.on(
        "request", lambda request: posts.append(request.url) if request.method == "POST" else None
    )

    page.locator("#chat-form textarea[name=text]").fill("What is the standard discount?")
    page.get_by_role("button", name="Send").click()
    reply = agent_bubble(page)
    expect(page.locator("#chat-log .bubble.agent")).to_have_count(2)
    expect(reply.locator(".meta")).to_have_text("Completed")
    expect(reply).to_contain_text("Offline model: no language model is configured.")

    assert posts == [], f"the message was posted, not sent over the socket: {posts}"
    assert len(sockets) == 1, [ws.url for ws in sockets]
    assert re.search(rf"^ws://127\.0\.0\.1:\d+/ws/chat/{session_id}/\?after=\d+$", sockets[0].url)
    assert not sockets[0].is_closed()
    assert [json.loads(frame) for frame in sent] == [
        {"type": "message", "text": "What is the standard discount?"}
    ]
    frames = [json.loads(frame) for frame in received]
    assert frames[0]["type"] == "ready" and frames[0]["session"] == session_id
    run_id = int(reply.get_attribute("data-run"))
    assert {"type": "accepted", "run": run_id, "text": "What is the standard discount?"} in frames
    events = [f for f in frames if f["type"] == "event" and f["run"] == run_id]
    assert [f["id"] for f in events] == sorted(f["id"] for f in events)
    kinds = [f["kind"] for f in events]
    assert "reply" in kinds, kinds
    reply_text = next(f["data"]["text"] for f in events if f["kind"] == "reply")
    assert reply_text.startswith("Offline model: ")
    statuses = [f["data"]["status"] for f in events if f["kind"] == "status"]
    assert statuses[-1] == "completed", statuses


def test_a_confirmation_is_approved_inline_and_the_run_completes(page, bob):
    sign_in(page, bob)
    start_conversation(page, "hello there")
    live(page)
    expect(agent_bubble(page).locator(".meta")).to_contain_text("Completed")
    page.evaluate("window.__cadreMarker = 1")

    page.locator("#chat-form textarea[name=text]").fill("send hello to group:all-staff")
    page.get_by_role("button", name="Send").click()
    box = page.locator("#chat-log .confirm-box")
    expect(box).to_contain_text("Confirmation needed")
    expect(agent_bubble(page).locator(".meta")).to_have_text("Waiting")
    run_id = int(agent_bubble(page).get_attribute("data-run"))
    confirmation = Confirmation.objects.get(run_id=run_id)
    expect(box).to_have_attribute("data-confirmation", str(confirmation.pk))
    assert confirmation.status == Confirmation.Status.PENDING

    box.get_by_role("button", name="Approve").click()
    expect(box).to_contain_text("Decision: approved")
    expect(box.get_by_role("button")).to_have_count(0)
    reply = agent_bubble(page)
    expect(reply.locator(".meta")).to_have_text("Completed")
    expect(reply).to_contain_text("All staff")  # what was sent, as a sentence
    assert page.evaluate("window.__cadreMarker") == 1, "the page reloaded"

    confirmation.refresh_from_db()
    assert confirmation.status == Confirmation.Status.APPROVED
    assert confirmation.decided_via == "console" and confirmation.decided_by_id == bob.pk
    run = Run.objects.get(pk=run_id)
    assert run.status == Run.Status.COMPLETED
    assert run.steps.filter(kind="tool_call", name="im_send", status="completed").exists()


def test_an_idle_chat_socket_stays_open(page, bob):
    sign_in(page, bob)
    with page.expect_websocket() as opened:
        start_conversation(page, "hello there")
    chat_socket = opened.value
    since = time.monotonic()
    live(page)
    expect(agent_bubble(page).locator(".meta")).to_contain_text("Completed")
    # The consumer waits on its channel in rounds of 5 s: 7 s after it opened, the socket
    # has lived through the end of the first round.
    remaining_ms = max(1_000, 7_000 - (time.monotonic() - since) * 1000)
    with pytest.raises(playwright_sync.TimeoutError):
        chat_socket.wait_for_event("close", timeout=remaining_ms)
    expect(page.locator("#chat-status")).to_have_text("Live")


def test_a_refused_message_is_marked_and_its_text_returned(page, bob, bob_agent):
    sign_in(page, bob)
    start_conversation(page, "hello there")
    live(page)
    expect(agent_bubble(page).locator(".meta")).to_contain_text("Completed")
    runs = Run.objects.count()
    # The agent is stopped while its chat is open: the next message is refused.
    type(bob_agent).objects.filter(pk=bob_agent.pk).update(status="stopped")
    field = page.locator("#chat-form textarea[name=text]")
    field.fill("are you still there?")
    field.press("Enter")
    sent = page.locator("#chat-log .bubble.user").last
    expect(sent).to_have_class(re.compile(r"\bfailed\b"))
    expect(sent.locator(".meta")).to_contain_text("Not sent: This agent is stopped.")
    expect(field).to_have_value("are you still there?")
    expect(page.locator("#chat-status")).to_have_text("Live")
    assert Run.objects.count() == runs
