# ruff: noqa: F811 - the fixtures imported from other test modules are parameters here
"""A preference stated in web chat belongs to the employee who stated it, end to end: a real
Celery worker runs the turn and its after-run memory hook (offline provider), and the employee
finds the memory in `GET /api/v1/memories/`, on the Memory page with a readable scope, and
through the transcript's link; in a real browser they correct it and delete it. Screenshots of
each step are written to var/screenshots/ (git-ignored)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from cadre.agents import services as agent_services
from cadre.agents.models import Run, Session, Step
from cadre.memory import services as memory_services
from cadre.memory.models import Memory
from cadre.tenancy.actors import member_actor
from tests.agents.test_worker_e2e import wait_for, worker  # noqa: F401 - fixture
from tests.console.agents_setup import (  # noqa: F401 - fixtures
    TOOLS,
    bob_agent,
    deployment,
    owner,
    published,
    sales,
)
from tests.console.test_browser_chat import (  # noqa: F401 - fixtures and helpers
    agent_bubble,
    browser_page,
    chromium,
    expect,
    live,
    live_server_url,
    sign_in,
    start_conversation,
)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"
PREFERENCE = "From now on, always write reports in bullet points, and my manager is Li Wei."


@pytest.fixture
def template(owner):
    """The sales template with memory writing on (retrieval off: it loads the embedding
    model, which this journey does not need)."""
    return agent_services.template_create(
        actor=owner,
        name="Sales assistant",
        code="sales-assistant",
        agent_md="# Persona\nYou help {{member.display_name}} sell.",
        tool_permissions=TOOLS,
        model_settings={"provider": "offline", "model": "offline-1", "budget": {"max_steps": 6}},
        memory_policy={"read_scopes": ["agent", "user"], "write_scopes": ["agent"]},
        hooks={"assemble_context": [{"name": "memory_retrieval", "enabled": False}]},
    )


def remembered(member, text: str, seconds: float = 30) -> Memory:
    """The memory the worker's after-run hook writes (it runs after the reply)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        memory = Memory.objects.filter(
            content__icontains=text, status=Memory.Status.ACTIVE, subject=member
        ).first()
        if memory is not None:
            return memory
        time.sleep(0.1)
    raise AssertionError(f"no memory containing {text!r}: {list(Memory.objects.values())}")


def written_step_recorded(run, seconds: float = 30) -> None:
    """Wait until the after-run hook step that lists the memories the turn wrote is recorded."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if Step.objects.filter(
            run=run, kind=Step.Kind.HOOK, output__has_key="written_memories"
        ).exists():
            return
        time.sleep(0.1)
    raise AssertionError(f"no memory_write step for run {run.pk}")


def test_a_preference_stated_in_web_chat_is_the_employees_in_the_api_and_console(
    worker, alice, bob, bob_agent
):
    browser = Client()
    browser.force_login(bob.user)
    sent = browser.post(reverse("console:chat_agent", args=[bob_agent.pk]), {"text": PREFERENCE})
    assert sent.status_code == 302
    run = Session.objects.get(agent=bob_agent).runs.get()
    assert wait_for(run.pk).status == Run.Status.COMPLETED
    memory = remembered(bob, "bullet points")
    assert memory.scope_key == f"user:{bob.pk}" and memory.source_kind == "user_statement"

    api = APIClient()
    api.force_login(bob.user)
    rows = api.get("/api/v1/memories/").json()["results"]
    assert [(row["id"], row["scope_label"], row["kind"]) for row in rows] == [
        (memory.pk, "You", "requirement")
    ]
    assert "Li Wei" in rows[0]["content"]
    assert rows[0]["source_ref"]["run_id"] == run.pk

    page = browser.get(reverse("console:memory")).content.decode()
    assert "bullet points" in page and f'href="/memory/{memory.pk}/"' in page
    assert browser.get(f"/memory/{memory.pk}/").status_code == 200

    # The transcript (for those who read transcripts: here the organization's owner) links the
    # memory the turn wrote, and the link opens (memory.personal reaches personal memory).
    # The memory is stored inside the hook; its step (which the transcript shows) is recorded
    # once the hook returns, a moment later.
    written_step_recorded(run)
    admin = Client()
    admin.force_login(alice.user)
    transcript = admin.get(f"/sessions/{run.session_id}/").content.decode()
    assert f'href="/memory/{memory.pk}/"' in transcript
    assert admin.get(f"/memory/{memory.pk}/").status_code == 200


def test_the_employee_finds_corrects_and_deletes_the_memory_in_the_browser(
    chromium, live_server_url, worker, bob, bob_agent
):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with browser_page(chromium, live_server_url) as page:
        sign_in(page, bob)
        start_conversation(page, PREFERENCE)
        live(page)
        expect(agent_bubble(page).locator(".meta")).to_contain_text("Completed")
        memory = remembered(bob, "bullet points")
        page.screenshot(path=str(SCREENSHOTS / "memory_1_chat.png"), full_page=True)

        page.goto("/memory/")
        row = page.locator("tr", has_text="bullet points")
        expect(row).to_have_count(1)
        expect(row.get_by_test_id("scope")).to_contain_text("You")
        options = page.locator("#id_scope option").all_inner_texts()
        assert "You" in options, options
        assert "Your agent Sales assistant" in options, options  # named for bob (#32)
        page.screenshot(path=str(SCREENSHOTS / "memory_2_list.png"), full_page=True)

        row.get_by_role("link", name="Details").click()
        page.wait_for_url(re.compile(rf"/memory/{memory.pk}/$"))
        expect(page.get_by_test_id("scope")).to_have_text("You")
        page.screenshot(path=str(SCREENSHOTS / "memory_3_detail.png"), full_page=True)

        page.get_by_role("link", name="Correct").click()
        page.get_by_label("Content").fill(
            "Always write reports in bullet points; my manager is Zhang Min."
        )
        page.get_by_label("Reason").fill("My manager changed")
        page.get_by_role("button", name="Save correction").click()
        page.wait_for_url(re.compile(rf"/memory/{memory.pk}/$"))
        expect(page.locator("body")).to_contain_text("Zhang Min")
        page.screenshot(path=str(SCREENSHOTS / "memory_4_corrected.png"), full_page=True)
        memory.refresh_from_db()
        assert "Zhang Min" in memory.content and memory.version == 2

        page.get_by_role("link", name="Delete").click()
        page.get_by_role("button", name="Delete memory").click()
        page.wait_for_url(re.compile(r"/memory/$"))
        expect(page.locator("tr", has_text="bullet points")).to_have_count(0)
        page.screenshot(path=str(SCREENSHOTS / "memory_5_deleted.png"), full_page=True)
        memory.refresh_from_db()
        assert memory.status == Memory.Status.DELETED
        assert page.goto(f"/memory/{memory.pk}/").status == 404


def test_the_employee_sees_on_their_memory_page_who_read_their_memories(
    chromium, live_server_url, alice, bob, bob_agent
):
    """The owner reads Bob's personal memory on the console; Bob's Memory page says so."""
    memory = memory_services.memory_add(
        actor=member_actor(bob),
        content="My bonus target is 1.2 million yuan",
        scope="user",
        kind="fact",
        source_kind="user_statement",
    )
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with browser_page(chromium, live_server_url) as page:
        sign_in(page, alice)
        page.goto(f"/memory/{memory.pk}/")
        expect(page.locator("body")).to_contain_text("bonus target")
    with browser_page(chromium, live_server_url) as page:
        sign_in(page, bob)
        page.goto("/memory/")
        row = page.get_by_test_id("access-log-row")
        expect(row).to_have_count(1)
        expect(row).to_contain_text(alice.display_name)
        expect(row).to_contain_text("console:memory_detail")
        page.screenshot(path=str(SCREENSHOTS / "memory_6_access_log.png"), full_page=True)
