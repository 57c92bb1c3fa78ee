# ruff: noqa: F811 - the fixtures imported from test_end_to_end are parameters here
"""A person always hears back, per platform: a run that fails, is cancelled or is refused by a
hard budget sends its IM conversation one short line saying what happened and what to do —
never the internal error — once, however often the hand-off is redelivered; the web chat
shows the same line."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse
from django.utils.html import escape

from cadre.agents import providers
from cadre.agents.models import Run
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.agents.runtime.records import delivery
from cadre.governance import budgets
from cadre.governance.models import Budget
from cadre.tenancy.actors import member_actor
from connectors import tasks
from connectors.models import Delivery
from connectors.tests.test_end_to_end import (  # noqa: F401 - fixtures
    bob_agent,
    connector,
    deliver,
    driver,
)
from tests.agents.fake_models import FakeModelServer

pytestmark = pytest.mark.django_db


def _run_of(event) -> Run:
    return Run.objects.select_related("session").get(pk=int(event.run_ref))


def _heard_once(driver, run, line, capture) -> None:
    """The conversation got `line` and nothing else; a redelivered hand-off sends no more."""
    assert driver.replies() == [line]
    with capture(execute=True):
        tasks.deliver_run_reply.delay(delivery.run_reply(run).to_dict())
    assert driver.replies() == [line]
    assert Delivery.objects.filter(idempotency_key=f"run:{run.pk}").count() == 1


def _web_chat_shows(member, run, line) -> str:
    """The member's web chat shows `line` as the run's answer; the page."""
    browser = Client()
    browser.force_login(member.user)
    response = browser.get(reverse("console:chat_session", args=[run.session_id]))
    assert response.status_code == 200
    page = response.content.decode()
    assert f'data-run="{run.pk}">{escape(line)}<span class="meta">' in page
    return page


def test_a_failed_run_tells_the_person_to_try_again_without_internal_details(
    driver, connector, alice, bob, bob_agent, celery_eager, django_capture_on_commit_callbacks
):
    with FakeModelServer(api_key="sk-right") as server:
        config = providers.provider_config_create(
            actor=member_actor(alice),
            name="Internal vLLM",
            kind="openai_compatible",
            base_url=server.base_url,
            default_model="secret-model-7b",
            api_key="sk-wrong",
        )
        version = bob_agent.version
        type(version).objects.filter(pk=version.pk).update(
            model_settings={**version.model_settings, "provider_config": config.pk}
        )
        event = deliver(
            driver, connector, "hello there", "evt-fail", django_capture_on_commit_callbacks
        )
    run = _run_of(event)
    assert run.status == Run.Status.FAILED and "401" in run.error  # kept for its managers
    line = delivery.NOTICES["failed"]
    _heard_once(driver, run, line, django_capture_on_commit_callbacks)
    for detail in ("401", "127.0.0.1", server.base_url, "secret-model-7b", "Error", "Traceback"):
        assert detail not in line
    assert "401 from provider" not in _web_chat_shows(bob, run, line)


def test_a_cancelled_run_tells_the_person_it_was_cancelled(
    driver, connector, alice, bob_agent, celery_eager, django_capture_on_commit_callbacks
):
    event = deliver(
        driver,
        connector,
        "send hello to group:all-staff",  # waits for a confirmation
        "evt-cancel",
        django_capture_on_commit_callbacks,
    )
    run = _run_of(event)
    assert run.status == Run.Status.WAITING and driver.replies() == []
    with django_capture_on_commit_callbacks(execute=True):
        runtime.run_cancel(actor=member_actor(alice), run=run, reason="wrong group")
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED
    line = delivery.NOTICES["cancelled"]
    _heard_once(driver, run, line, django_capture_on_commit_callbacks)
    assert "wrong group" not in line
    _web_chat_shows(bob_agent.member, run, line)


def test_a_budget_refused_run_tells_the_person_to_ask_an_administrator(
    driver, connector, alice, bob_agent, celery_eager, django_capture_on_commit_callbacks
):
    budgets.budget_create(
        actor=member_actor(alice),
        scope=Budget.Scope.TEMPLATE,
        template_id=bob_agent.version.template_id,
        period=Budget.Period.DAILY,
        metric=Budget.Metric.TOKENS,
        limit=1,
    )
    event = deliver(
        driver, connector, "hello there", "evt-budget", django_capture_on_commit_callbacks
    )
    run = _run_of(event)
    assert run.status == Run.Status.COMPLETED
    assert run.output["refused_code"] == "budget_exceeded"
    line = run.output["text"]
    assert line.startswith("I can't run this request: The daily tokens budget")
    assert line.endswith(delivery.BUDGET_ADVICE)
    _heard_once(driver, run, line, django_capture_on_commit_callbacks)
    _web_chat_shows(bob_agent.member, run, line)
