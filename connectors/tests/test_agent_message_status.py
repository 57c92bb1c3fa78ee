# ruff: noqa: F811 - the console's `browser` fixture, imported, is a parameter here
"""Honest tool status: an `im_send` whose message cannot be or was not delivered shows as failed,
with the reason, in the tool's result (what the model and the chat see), the recorded tool
effect (transcript and call-chain API), the chat's live events and the audit log — never
`queued` while the delivery failed."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from cadre.agents import services as agent_services
from cadre.agents import tasks
from cadre.agents.models import AgentMessage, Run, RunEvent, Step, ToolEffect
from cadre.agents.runtime.lifecycle import execution as engine
from cadre.agents.runtime.lifecycle.services import run_start
from cadre.governance import confirmations
from cadre.governance.models import AuditEvent, Confirmation
from cadre.tenancy.actors import member_actor
from connectors.feishu.tests.fake_api import APP_ID, APP_SECRET, FakeFeishu
from connectors.models import Delivery
from connectors.tasks import agent_message_deliver
from connectors.tests.helpers import make_connector
from tests.console.conftest import browser  # noqa: F401
from tests.factories import IMIdentityFactory, PositionFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_after_run(monkeypatch):
    monkeypatch.setattr(tasks.run_after, "apply_async", lambda *args, **kwargs: None)


def _agent(alice, *, confirmation: str):
    owner = member_actor(alice)
    position = PositionFactory(organization=alice.organization, name="Ops", code="ops")
    alice.positions.add(position)
    template = agent_services.template_create(
        actor=owner,
        name="Ops assistant",
        code="ops-assistant",
        agent_md="# Persona",
        tool_permissions={"im_send": {"risk": "low", "confirmation": confirmation}},
        model_settings={"provider": "offline", "model": "offline-1"},
        hooks={"assemble_context": [{"name": "memory_retrieval", "enabled": False}]},
    )
    version = template.versions.get()
    agent_services.version_submit(actor=owner, version=version)
    agent_services.version_publish(actor=owner, version=version, reason="ready")
    deployment = agent_services.deployment_create(
        actor=owner, name="Ops agents", template=template, positions=[position]
    )
    return deployment.agents.get(member=alice)


def _tool_step(run) -> Step:
    return run.steps.get(kind=Step.Kind.TOOL_CALL, name="im_send")


def test_an_im_send_with_no_connector_is_never_asked_and_fails_at_once(
    alice, bob, client_for, browser, django_capture_on_commit_callbacks
):
    agent = _agent(alice, confirmation="always")
    run = run_start(actor=member_actor(alice), agent=agent, text="send hello to Bob")
    with django_capture_on_commit_callbacks(execute=True):
        # No confirmation to wait for: the send cannot succeed, so nobody is asked.
        assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    run.refresh_from_db()
    assert not Confirmation.objects.exists()
    assert not AgentMessage.objects.exists() and not Delivery.objects.exists()

    # The tool call failed, with the reason (what the model read, and the chat's reply).
    step = _tool_step(run)
    assert step.status == Step.Status.FAILED
    assert step.error.startswith("no connector for channel 'console'")
    assert step.output["error"] == "undeliverable"
    assert "done" not in run.output["text"] and "queued" not in run.output["text"]
    event = RunEvent.objects.get(run=run, kind="effect")
    assert event.data["status"] == "failed" and event.data["reason"] == step.error

    # The API (call chain) and the transcript say so.
    chain = client_for(alice).get(f"/api/v1/runs/{run.pk}/call-chain/").json()
    tool_event = next(e for e in chain["events"] if e["kind"] == "tool_call")
    assert tool_event["status"] == "failed" and "no connector" in tool_event["error"]
    page = browser(alice).get(reverse("console:session", args=[run.session_id])).content.decode()
    assert "Not done: no connector for channel" in page
    chain_page = browser(alice).get(reverse("console:run_call_chain", args=[run.pk]))
    assert re.search(r'badge-failed">failed<', chain_page.content.decode(), re.I)


def test_an_approved_im_send_whose_connector_went_away_is_failed_everywhere(
    alice, bob, fake_api, client_for, browser, django_capture_on_commit_callbacks
):
    FakeFeishu(fake_api)
    connector = make_connector(
        alice,
        "feishu",
        {"app_id": APP_ID, "app_secret": APP_SECRET},
        {"api_base_url": fake_api.url, "max_attempts": 1},
        name="Feishu",
    )
    IMIdentityFactory(member=bob, platform="feishu", platform_user_id="ou_bob")
    agent = _agent(alice, confirmation="always")
    run = run_start(actor=member_actor(alice), agent=agent, text="send hello to Bob")
    with django_capture_on_commit_callbacks(execute=True):
        assert engine.run_execute(run.pk) == Run.Status.WAITING  # it could be sent: asked
    confirmation = Confirmation.objects.get(run_id=run.pk)
    connector.status = connector.Status.DISABLED  # before the decision, the connector goes
    connector.save(update_fields=["status"])
    with django_capture_on_commit_callbacks(execute=True):
        confirmations.confirmation_decide(
            confirmation=confirmation, decider=alice, decision="approve", via="console"
        )
    with django_capture_on_commit_callbacks(execute=True):
        engine.run_execute(run.pk)  # the resume the decision queued (a Celery task)
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED  # the run completed; the send did not

    message = AgentMessage.objects.get(run=run)
    assert message.status == AgentMessage.Status.FAILED
    assert "no active IM connector" in message.reason
    assert not Delivery.objects.exists()  # nothing was handed to a platform
    step = _tool_step(run)
    assert step.status == Step.Status.FAILED and step.error == message.reason
    assert step.output["status"] == "failed"
    assert "done" not in run.output["text"] and "queued" not in run.output["text"]
    effect = ToolEffect.objects.get(key=message.idempotency_key)
    assert effect.result["status"] == "failed"
    # One `effect` event for the chat (the message's own), not a second for its step.
    assert RunEvent.objects.filter(run=run, kind="effect").count() == 1

    chain = client_for(alice).get(f"/api/v1/runs/{run.pk}/call-chain/").json()
    tool_event = next(e for e in chain["events"] if e["kind"] == "tool_call")
    assert tool_event["status"] == "failed" and tool_event["effect"]["status"] == "failed"
    page = browser(alice).get(reverse("console:session", args=[run.session_id])).content.decode()
    assert "Failed: no connector for channel" in page
    assert AuditEvent.objects.filter(action="agents.message.failed").count() == 1


def test_a_delivery_that_fails_later_corrects_the_tool_status(
    alice, bob, fake_api, client_for, browser, django_capture_on_commit_callbacks
):
    FakeFeishu(fake_api)
    make_connector(
        alice,
        "feishu",
        {"app_id": APP_ID, "app_secret": APP_SECRET},
        {"api_base_url": fake_api.url, "max_attempts": 1},
        name="Feishu",
    )
    IMIdentityFactory(member=bob, platform="feishu", platform_user_id="ou_bob")
    agent = _agent(alice, confirmation="never")
    run = run_start(actor=member_actor(alice), agent=agent, text="send hello to Bob")
    with django_capture_on_commit_callbacks(execute=False):  # the delivery task is not run
        assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    message = AgentMessage.objects.get(run=run)
    assert message.status == AgentMessage.Status.QUEUED
    assert _tool_step(run).output["status"] == "queued"  # it could be delivered: it was tried

    fake_api.fail_next("/open-apis/im/v1/messages", 503, times=5)
    result = agent_message_deliver.apply(args=[message.pk], retries=8).get()
    assert result == AgentMessage.Status.FAILED

    message.refresh_from_db()
    assert message.status == AgentMessage.Status.FAILED and "gave up" in message.reason
    effect = ToolEffect.objects.get(key=message.idempotency_key)
    assert effect.result["status"] == "failed" and "gave up" in effect.result["reason"]
    event = RunEvent.objects.get(run=run, kind="effect")
    assert event.data["status"] == "failed" and event.data["message_id"] == message.pk
    chain = client_for(alice).get(f"/api/v1/runs/{run.pk}/call-chain/").json()
    effects = [e["effect"] for e in chain["events"] if e["kind"] == "tool_call" and e.get("effect")]
    assert effects[0]["status"] == "failed"
    page = browser(alice).get(reverse("console:session", args=[run.session_id]))
    assert "Failed: gave up after retries" in page.content.decode()
    # A later sweep does not resend or flip it back.
    assert agent_message_deliver.apply(args=[message.pk]).get() == AgentMessage.Status.FAILED


def test_a_delivered_message_is_marked_sent_on_its_effect(
    alice, bob, fake_api, django_capture_on_commit_callbacks
):
    feishu = FakeFeishu(fake_api)
    make_connector(
        alice,
        "feishu",
        {"app_id": APP_ID, "app_secret": APP_SECRET},
        {"api_base_url": fake_api.url, "max_attempts": 1},
        name="Feishu",
    )
    IMIdentityFactory(member=bob, platform="feishu", platform_user_id="ou_bob")
    agent = _agent(alice, confirmation="never")
    run = run_start(actor=member_actor(alice), agent=agent, text="send hello to Bob")
    with django_capture_on_commit_callbacks(execute=False):
        engine.run_execute(run.pk)
    message = AgentMessage.objects.get(run=run)
    assert agent_message_deliver.apply(args=[message.pk]).get() == AgentMessage.Status.SENT
    assert len(feishu.sent()) == 1
    effect = ToolEffect.objects.get(key=message.idempotency_key)
    assert effect.result["status"] == "sent" and "reason" not in effect.result
