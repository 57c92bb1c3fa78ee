"""The run loop: persisted steps, replay after a crash at every step type without repeated
side effects, waits on events and confirmations, cancellation, usage."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from cadre.agents import services
from cadre.agents.models import AgentMessage, AgentTask, Run, RunEvent, Step, ToolEffect, Wait
from cadre.agents.runtime.lifecycle import execution as engine
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.agents.runtime.records import crashpoints
from cadre.tenancy.actors import member_actor, system_actor
from tests.factories import MemberFactory

pytestmark = pytest.mark.django_db


def start(bob, agent, text):
    return runtime.run_start(actor=member_actor(bob), agent=agent, text=text)


def steps_of(run):
    return list(run.steps.order_by("index").values_list("kind", "name", "status", "attempts"))


def test_offline_reply_answers_from_the_context(bob, bob_agent):
    run = start(bob, bob_agent, "What is the standard discount?")
    assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    run.refresh_from_db()
    assert run.output["text"].startswith("Offline model: ")
    assert "Standard discount is 5 percent" in run.output["text"]
    assert [(kind, name) for kind, name, *_ in steps_of(run)] == [
        ("hook", "input_policy"),
        ("hook", "assemble_context:base"),
        ("model_call", "model"),
    ]
    model_step = run.steps.get(kind="model_call")
    assert model_step.idempotency_key == f"run:{run.pk}:step:2"
    assert model_step.tokens_in > 0 and model_step.tokens_out > 0
    assert run.tokens_in == model_step.tokens_in and run.step_count == 3
    bob_agent.refresh_from_db()
    assert bob_agent.tokens_in == run.tokens_in
    kinds = list(RunEvent.objects.filter(run=run).values_list("kind", flat=True))
    assert kinds[0] == "status" and "reply" in kinds and kinds[-1] == "status"


def test_context_includes_user_md_and_recent_turns(bob, bob_agent):
    first = start(bob, bob_agent, "hello there")
    engine.run_execute(first.pk)
    second = runtime.run_start(
        actor=member_actor(bob), agent=bob_agent, text="who am I?", session=first.session
    )
    engine.run_execute(second.pk)
    messages = second.steps.get(kind="model_call").input["messages"]
    assert "# About Bob" in messages[0]["content"]
    assert [m["role"] for m in messages[1:]] == ["user", "assistant", "user"]
    assert messages[1]["content"] == "hello there"


def test_tool_call_creates_a_task_once(bob, bob_agent):
    run = start(bob, bob_agent, "remind me to call ACME on 2030-01-02")
    assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    task = AgentTask.objects.get()
    assert task.title == "call ACME" and task.member_id == bob.pk
    tool_step = run.steps.get(kind="tool_call")
    assert task.idempotency_key == tool_step.idempotency_key
    run.refresh_from_db()
    # The person reads a sentence, not the tool's JSON (the task's id stays in the transcript).
    assert "Added a task: call ACME, due 2030-01-02 00:00." in run.output["text"]
    assert "task_id" not in run.output["text"]


@pytest.mark.parametrize(
    "kind, text",
    [
        ("hook", "What is the standard discount?"),
        ("model_call", "What is the standard discount?"),
        ("tool_call", "remind me to call ACME"),
    ],
)
def test_crash_after_each_step_type_resumes_without_repeating(bob, bob_agent, kind, text):
    run = start(bob, bob_agent, text)
    with crashpoints.crash_after(kind), pytest.raises(crashpoints.SimulatedCrash):
        engine.run_execute(run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING  # as a killed worker leaves it
    before = {s.index: s.attempts for s in run.steps.filter(status=Step.Status.COMPLETED)}
    if kind == "hook":
        # A hook is written once, when it completed: the crashed one left no record.
        assert not run.steps.filter(status=Step.Status.STARTED).exists()
        crashed_index = max(before, default=-1) + 1
    else:
        crashed = run.steps.get(status=Step.Status.STARTED)
        assert crashed.kind == kind
        crashed_index = crashed.index

    assert engine.run_execute(run.pk) == Run.Status.COMPLETED  # the redelivered task
    run.refresh_from_db()
    for step in run.steps.all():
        if step.index in before:
            assert step.attempts == 1  # completed steps are never executed again
    crashed = run.steps.get(index=crashed_index)
    assert crashed.kind == kind and crashed.status == Step.Status.COMPLETED
    assert crashed.attempts == (1 if kind == "hook" else 2)
    assert run.attempts == 2
    if kind == "tool_call":
        assert AgentTask.objects.count() == 1  # the side effect happened once
        assert crashed.output["replayed"] is True
        assert ToolEffect.objects.count() == 1


def test_crash_after_sending_a_message_sends_it_once(bob, bob_agent, alice):
    run = start(bob, bob_agent, "send the quote is ready to Alice")
    with crashpoints.crash_after("tool_call"), pytest.raises(crashpoints.SimulatedCrash):
        engine.run_execute(run.pk)
    assert AgentMessage.objects.count() == 1
    assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    message = AgentMessage.objects.get()
    assert message.recipients == [{"member": alice.pk, "name": "Alice"}]
    assert message.text == "the quote is ready"


def test_crash_after_a_wait_step_keeps_one_wait_and_resumes_on_the_event(bob, bob_agent, owner):
    run = start(bob, bob_agent, "wait for invoice.paid:INV-7")
    with crashpoints.crash_after("wait"), pytest.raises(crashpoints.SimulatedCrash):
        engine.run_execute(run.pk)
    assert engine.run_execute(run.pk) == Run.Status.WAITING
    assert Wait.objects.count() == 1
    run.refresh_from_db()
    assert run.status == Run.Status.WAITING
    resumed = runtime.event_deliver(
        actor=system_actor(bob.organization), key="invoice.paid:INV-7", payload={"amount": 120}
    )
    assert resumed == 1
    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED
    assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    run.refresh_from_db()
    assert "The event arrived (amount: 120)." in run.output["text"]
    assert run.steps.get(kind="wait").output == {"amount": 120}


def test_a_run_waits_for_days_and_resumes_with_state_intact(bob, bob_agent):
    run = start(bob, bob_agent, "wait for shipment:42")
    assert engine.run_execute(run.pk) == Run.Status.WAITING
    wait = Wait.objects.get()
    assert wait.deadline > timezone.now() + timedelta(hours=23)
    Step.objects.filter(run=run).update(started_at=timezone.now() - timedelta(days=3))
    runtime.run_resume(actor=system_actor(bob.organization), run=run, payload={"ok": True})
    assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    # The steps before the wait were not run again.
    assert run.steps.filter(attempts__gt=1).count() == 0


def test_expired_wait_follows_its_timeout_policy(bob, bob_agent):
    run = start(bob, bob_agent, "wait for approval:9 for 60 seconds")
    engine.run_execute(run.pk)
    Wait.objects.update(deadline=timezone.now() - timedelta(seconds=1))
    assert runtime.waits_expire() == 1
    assert Wait.objects.get().status == Wait.Status.EXPIRED
    assert engine.run_execute(run.pk) == Run.Status.COMPLETED  # on_timeout="continue"
    run.refresh_from_db()
    assert "the event did not come in time" in run.output["text"]


def test_expired_wait_with_fail_policy_fails_the_run(bob, bob_agent, owner, template, published):
    run = start(bob, bob_agent, "wait for approval:10")
    engine.run_execute(run.pk)
    Wait.objects.update(deadline=timezone.now() - timedelta(seconds=1), on_timeout="fail")
    runtime.waits_expire()
    assert engine.run_execute(run.pk) == Run.Status.FAILED
    run.refresh_from_db()
    assert "timed out" in run.error


def test_high_risk_message_pauses_for_confirmation_then_sends(bob, bob_agent, org_a):
    names = [
        MemberFactory(organization=org_a, display_name=f"Rep {i}").display_name for i in range(6)
    ]
    run = start(bob, bob_agent, f"send price list to {', '.join(names)}")
    assert engine.run_execute(run.pk) == Run.Status.WAITING
    wait = Wait.objects.get()
    assert wait.kind == "confirmation" and wait.details["risk"] == "high"
    # The wait is keyed by the governance gate step before it (its Confirmation too).
    assert wait.key == f"run:{run.pk}:step:3:confirmation"
    assert not AgentMessage.objects.exists()
    runtime.run_resume(actor=system_actor(org_a), run=run, payload={"approved": True})
    assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    assert len(AgentMessage.objects.get().recipients) == 6


def test_rejected_confirmation_does_nothing_and_tells_the_model(bob, bob_agent, org_a):
    run = start(bob, bob_agent, "send hello to group:all-staff")
    assert engine.run_execute(run.pk) == Run.Status.WAITING
    runtime.run_resume(
        actor=system_actor(org_a), run=run, payload={"approved": False, "reason": "too broad"}
    )
    assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    assert not AgentMessage.objects.exists()
    run.refresh_from_db()
    assert "too broad" in run.output["text"]


def test_cancelling_a_waiting_run(bob, bob_agent):
    run = start(bob, bob_agent, "wait for never")
    engine.run_execute(run.pk)
    runtime.run_cancel(actor=member_actor(bob), run=run, reason="changed my mind")
    assert engine.run_execute(run.pk) == Run.Status.CANCELLED
    assert Wait.objects.get().status == Wait.Status.CANCELLED


def test_budget_limits_model_calls(bob, bob_agent, owner, template):
    run = start(bob, bob_agent, "hello")
    run.grants["budget"]["max_steps"] = 0
    Run.objects.filter(pk=run.pk).update(grants=run.grants)
    assert engine.run_execute(run.pk) == Run.Status.FAILED
    run.refresh_from_db()
    assert "budget exceeded" in run.error


def test_a_second_worker_cannot_execute_a_running_run(bob, bob_agent):
    from django.db import connections

    run = start(bob, bob_agent, "hello")
    other = connections.create_connection("default")  # another worker's session
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_lock(%s, %s)", [engine.LOCK_NAMESPACE, run.pk])
        with pytest.raises(engine.RunBusy):
            engine.run_execute(run.pk)
        assert not run.steps.exists()
    finally:
        other.close()  # a dead worker's connection releases its lock
    _wait_for_advisory_lock_release(run.pk)
    assert engine.run_execute(run.pk) == Run.Status.COMPLETED


def _wait_for_advisory_lock_release(run_id: int) -> None:
    """The server ends a closed session's backend asynchronously; on a busy machine its lock
    can outlive close() by a moment."""
    import time

    from django.db import connection

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                "AND classid = %s AND objid = %s",
                [engine.LOCK_NAMESPACE, run_id],
            )
            if cursor.fetchone()[0] == 0:
                return
        time.sleep(0.05)


def test_version_pinned_at_start_even_if_rolled_out_meanwhile(
    bob, bob_agent, owner, template, deployment
):
    run = start(bob, bob_agent, "What is the standard discount?")
    draft = services.version_draft(actor=owner, template=template)
    services.version_update(actor=owner, version=draft, sop="Standard discount is 9 percent.")
    services.version_submit(actor=owner, version=draft)
    v2 = services.version_publish(actor=owner, version=draft)
    services.rollout_start(actor=owner, deployment=deployment, version=v2)
    engine.run_execute(run.pk)
    run.refresh_from_db()
    assert "5 percent" in run.output["text"]
    later = start(bob, bob_agent.__class__.objects.get(pk=bob_agent.pk), "standard discount?")
    engine.run_execute(later.pk)
    later.refresh_from_db()
    assert "9 percent" in later.output["text"]
