# ruff: noqa: F811 - the fixtures imported from tests.console.agents_setup are parameters here
"""The web chat says which model answered each reply: the provider configuration's name and
the model the endpoint named, or "offline model" — on the page (a reload) and in the reply's
socket frame (live); a reply no model gave (a budget's refusal) names none."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from cadre.agents import selectors, services
from cadre.agents.live import event_frame
from cadre.agents.models import Run, RunEvent, Session
from cadre.agents.runtime.lifecycle import execution as engine
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.governance import budgets
from cadre.governance.models import Budget
from cadre.tenancy.actors import member_actor
from tests.agents.conftest import publish
from tests.agents.fake_models import FakeModelServer
from tests.console.agents_setup import (  # noqa: F401 - fixtures
    bob_agent,
    client,
    deployment,
    owner,
    published,
    sales,
    template,
)

pytestmark = pytest.mark.django_db


def _answered_by(page: str) -> list[str]:
    return re.findall(r"data-answered-by>Answered by: ([^<]*)<", page)


def _reply_frames(session) -> list[dict]:
    events = RunEvent.objects.filter(run__session=session).order_by("id")
    frames = selectors.chat_event_frames([event_frame(e) for e in events], None)
    return [frame for frame in frames if frame["kind"] == "reply"]


def test_an_offline_reply_says_the_offline_model_answered(bob, bob_agent):
    browser = client(bob)
    browser.post(reverse("console:chat_agent", args=[bob_agent.pk]), {"text": "the discount?"})
    session = Session.objects.get(agent=bob_agent)
    run = session.runs.get()
    url = reverse("console:chat_session", args=[session.pk])
    assert _answered_by(browser.get(url).content.decode()) == []  # no answer yet
    engine.run_execute(run.pk)
    assert _answered_by(browser.get(url).content.decode()) == ["offline model"]
    [reply] = _reply_frames(session)
    assert reply["answered_by"] == "offline model" and reply["run"] == run.pk
    # Only a reply's frame needs the lookup; the others are sent as the runtime pushed them.
    assert selectors.chat_frame_needs_lookup({"kind": "reply", "data": {}})
    assert not selectors.chat_frame_needs_lookup({"kind": "delta", "data": {"text": "x"}})


def test_a_model_reply_names_the_provider_and_model_and_a_refusal_names_none(owner, bob):
    with FakeModelServer([{"text": "Five percent."}] * 3) as server:
        config = services.provider_config_create(
            actor=owner,
            name="Loopback vLLM",
            kind="openai_compatible",
            base_url=server.base_url,
            default_model="fake-chat",
        )
        template = services.template_create(
            actor=owner,
            name="Ops",
            code="ops",
            model_settings={"provider_config": config.pk, "model": "fake-large"},
            hooks={"assemble_context": [{"name": "memory_retrieval", "enabled": False}]},
        )
        publish(owner, template.versions.get())
        agent = services.deployment_create(
            actor=owner, name="Ops", template=template, members=[bob]
        ).agents.get()
        first = runtime.run_start(actor=member_actor(bob), agent=agent, text="discount?")
        assert engine.run_execute(first.pk) == Run.Status.COMPLETED
        # A hard budget already spent: the next reply is a refusal, no model answered it.
        budgets.budget_create(
            actor=owner,
            scope=Budget.Scope.TEMPLATE,
            template_id=template.pk,
            period=Budget.Period.DAILY,
            metric=Budget.Metric.TOKENS,
            limit=1,
        )
        second = runtime.run_start(
            actor=member_actor(bob), agent=agent, text="again", session=first.session
        )
        assert engine.run_execute(second.pk) == Run.Status.COMPLETED
    assert len([r for r in server.requests if r["path"] == "/v1/chat/completions"]) == 1
    page = client(bob).get(reverse("console:chat_session", args=[first.session_id]))
    assert _answered_by(page.content.decode()) == ["Loopback vLLM · fake-large"]
    frames = _reply_frames(first.session)
    assert [frame.get("answered_by") for frame in frames] == ["Loopback vLLM · fake-large", None]
    assert selectors.runs_answered_by([first.pk, second.pk]) == {
        first.pk: "Loopback vLLM · fake-large"
    }
