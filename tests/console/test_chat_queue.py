# ruff: noqa: F811 - the fixtures imported from tests.console.agents_setup are parameters here
"""The web chat never leaves a person guessing (without a browser): a queued message says how
long it has waited and whether any worker is taking runs, and offers Retry and Cancel (both
audited); a decided confirmation keeps its card and decision after a reload; a failed effect
reads as a sentence. Runs are never executed here (no worker, no eager Celery): they stay
queued, as with no worker running."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from cadre.agents import selectors
from cadre.agents.models import AgentMessage, Run, RunEvent
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.agents.runtime.records.runs import RUN_EXECUTE_TASK
from cadre.governance.models import AuditEvent, Confirmation
from cadre.tenancy.actors import member_actor
from tests.console.agents_setup import (  # noqa: F401 - fixtures
    alice_agent,
    bob_agent,
    client,
    deployment,
    owner,
    published,
    sales,
    template,
)

pytestmark = pytest.mark.django_db


def queued_run(member, agent, text="hello there", *, minutes_ago: float = 0, session=None) -> Run:
    run = runtime.run_start(actor=member_actor(member), agent=agent, text=text, session=session)
    if minutes_ago:
        then = timezone.now() - timedelta(minutes=minutes_ago)
        Run.objects.filter(pk=run.pk).update(created_at=then)
        RunEvent.objects.filter(run=run).update(created_at=then)
        run.refresh_from_db()
    return run


def page_of(member, run) -> str:
    response = client(member).get(reverse("console:chat_session", args=[run.session_id]))
    assert response.status_code == 200
    return response.content.decode()


def test_a_message_queued_for_minutes_with_no_worker_says_so(bob, bob_agent):
    run = queued_run(bob, bob_agent, minutes_ago=3)
    page = page_of(bob, run)
    assert f'data-queue-run="{run.pk}"' in page and 'data-workers="none"' in page
    assert "Waiting for 3\xa0minutes." in page
    assert "No worker is taking runs right now" in page
    cancel = reverse("console:chat_cancel", args=[run.session_id, run.pk])
    retry = reverse("console:chat_retry", args=[run.session_id, run.pk])
    assert f'action="{cancel}"' in page and f'action="{retry}"' in page


def test_a_fresh_message_is_too_early_to_judge(bob, bob_agent):
    run = queued_run(bob, bob_agent)
    state = selectors.chat_queue_state(run)
    assert state["workers"] == "" and state["waited"] < 10
    page = page_of(bob, run)
    assert 'data-workers=""' in page and "No worker is taking runs" not in page


def test_workers_busy_with_other_runs_are_not_missing(bob, alice, bob_agent, alice_agent):
    run = queued_run(bob, bob_agent, minutes_ago=2)
    # A colleague's run a worker executes now (its heartbeat is fresh).
    other = queued_run(alice, alice_agent, "another question")
    Run.objects.filter(pk=other.pk).update(status=Run.Status.RUNNING, heartbeat_at=timezone.now())
    assert selectors.chat_queue_state(run)["workers"] == "busy"
    page = page_of(bob, run)
    assert 'data-workers="busy"' in page and "yours waits its turn" in page
    assert "No worker is taking runs" not in page
    # A worker that died long ago (stale heartbeat) does not count.
    Run.objects.filter(pk=other.pk).update(heartbeat_at=timezone.now() - timedelta(hours=1))
    assert selectors.chat_queue_state(run)["workers"] == "none"


def test_a_run_a_worker_started_after_ours_was_queued_counts_as_busy(
    bob, alice, bob_agent, alice_agent
):
    run = queued_run(bob, bob_agent, minutes_ago=2)
    other = queued_run(alice, alice_agent, "another question")
    RunEvent.objects.create(run=other, kind="status", data={"status": "running", "attempt": 1})
    assert selectors.chat_queue_state(run)["workers"] == "busy"


def test_cancel_cancels_the_queued_run_and_is_audited(bob, bob_agent):
    run = queued_run(bob, bob_agent, minutes_ago=3)
    response = client(bob).post(reverse("console:chat_cancel", args=[run.session_id, run.pk]))
    assert response.status_code == 302
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED
    event = AuditEvent.objects.get(action="run.cancel")
    assert event.target_id == str(run.pk) and event.actor_id == str(bob.pk)
    page = page_of(bob, run)
    assert "data-queue-run" not in page and "Cancelled" in page


def test_retry_queues_the_run_again_and_is_audited(
    bob, bob_agent, django_capture_on_commit_callbacks
):
    run = queued_run(bob, bob_agent, minutes_ago=3)
    url = reverse("console:chat_retry", args=[run.session_id, run.pk])
    with django_capture_on_commit_callbacks() as callbacks:
        assert client(bob).post(url).status_code == 302
    enqueued = [cb for cb in callbacks if getattr(cb, "args", None) == (RUN_EXECUTE_TASK, run.pk)]
    assert len(enqueued) == 1
    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED
    assert AuditEvent.objects.filter(action="run.requeue", target_id=str(run.pk)).count() == 1
    last = RunEvent.objects.filter(run=run).order_by("-id").first()
    assert last.kind == "status" and last.data == {"status": "queued", "requeued": True}
    # Queued again just now: the page waits its grace period before judging the workers.
    assert selectors.chat_queue_state(run)["workers"] == ""


def test_retry_of_a_finished_run_is_refused_and_nothing_is_queued(
    bob, bob_agent, django_capture_on_commit_callbacks
):
    run = queued_run(bob, bob_agent)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.COMPLETED)
    events = RunEvent.objects.filter(run=run).count()
    url = reverse("console:chat_retry", args=[run.session_id, run.pk])
    with django_capture_on_commit_callbacks() as callbacks:
        response = client(bob).post(url, follow=True)
    assert "not queued" in response.content.decode()
    assert not [cb for cb in callbacks if getattr(cb, "args", None) == (RUN_EXECUTE_TASK, run.pk)]
    assert not AuditEvent.objects.filter(action="run.requeue").exists()
    assert RunEvent.objects.filter(run=run).count() == events


def test_a_colleague_cannot_cancel_or_retry_through_someone_elses_chat(
    alice, bob, bob_agent, alice_agent
):
    run = queued_run(bob, bob_agent, minutes_ago=3)
    mine = queued_run(alice, alice_agent)
    for name in ("console:chat_cancel", "console:chat_retry"):
        assert client(alice).post(reverse(name, args=[run.session_id, run.pk])).status_code == 404
        # Her own session does not reach his run either.
        assert client(alice).post(reverse(name, args=[mine.session_id, run.pk])).status_code == 404
    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED
    assert not AuditEvent.objects.filter(action__in=["run.cancel", "run.requeue"]).exists()


def _confirmation(run, member, status=Confirmation.Status.PENDING, decided_by=None):
    return Confirmation.objects.create(
        organization_id=run.organization_id,
        idempotency_key=f"test:{run.pk}:{status}",
        requester=member,
        tool="im_send",
        arguments={"to": ["group:all-staff"], "text": "hello"},
        summary="Bob's agent wants to run im_send (high risk).\n"
        'Arguments: {"text": "hello", "to": ["group:all-staff"]}',
        risk_level="high",
        decider_ids=[member.pk],
        expires_at=timezone.now() + timedelta(hours=1),
        run_id=run.pk,
        status=status,
        decided_by=decided_by,
        decided_via="console" if decided_by else "",
    )


def test_after_a_reload_the_confirmation_card_keeps_its_decision(bob, bob_agent):
    approved_run = queued_run(bob, bob_agent, "send hello to group:all-staff")
    Run.objects.filter(pk=approved_run.pk).update(status=Run.Status.COMPLETED)
    approved = _confirmation(approved_run, bob, Confirmation.Status.APPROVED, decided_by=bob)
    session = approved_run.session
    expired_run = queued_run(bob, bob_agent, "send bye to group:all-staff", session=session)
    Run.objects.filter(pk=expired_run.pk).update(status=Run.Status.COMPLETED)
    expired = _confirmation(expired_run, bob, Confirmation.Status.EXPIRED)
    pending_run = queued_run(bob, bob_agent, "send hi to group:all-staff", session=session)
    Run.objects.filter(pk=pending_run.pk).update(status=Run.Status.WAITING)
    pending = _confirmation(pending_run, bob)
    page = page_of(bob, pending_run)
    for confirmation in (approved, expired, pending):
        assert f'data-confirmation="{confirmation.pk}"' in page
    assert f"Decision: approved by {bob.display_name}." in page
    assert "Decision: expired (nobody decided in time)." in page
    # The person reads what they are asked to allow, not the arguments' JSON.
    assert page.count("Send “hello” to All staff.") == 3 and "Arguments:" not in page
    # Only the pending one still asks, with its buttons.
    decide = reverse("console:chat_decide", args=[pending_run.session_id, pending.pk])
    assert page.count('name="decision" value="approve"') == 1 and decide in page
    assert reverse("console:chat_decide", args=[pending_run.session_id, approved.pk]) not in page


def test_a_pending_confirmation_someone_else_decides_shows_no_buttons(alice, bob, bob_agent):
    run = queued_run(bob, bob_agent, "send hi to group:all-staff")
    Run.objects.filter(pk=run.pk).update(status=Run.Status.WAITING)
    confirmation = _confirmation(run, bob)
    Confirmation.objects.filter(pk=confirmation.pk).update(decider_ids=[alice.pk])
    page = page_of(bob, run)
    assert f'data-confirmation="{confirmation.pk}"' in page
    assert 'value="approve"' not in page and "Waiting for someone allowed to decide." in page


def test_a_failed_send_reads_as_a_sentence_not_a_reason_code(bob, bob_agent):
    run = queued_run(bob, bob_agent, "send hello to Alice")
    Run.objects.filter(pk=run.pk).update(status=Run.Status.COMPLETED)
    AgentMessage.objects.create(
        organization_id=run.organization_id,
        run=run,
        agent=bob_agent,
        recipients=[{"member": bob.pk, "name": bob.display_name}],
        text="hello",
        channel="console",
        idempotency_key=f"test:{run.pk}",
        status=AgentMessage.Status.FAILED,
        reason="no connector for channel 'console': the organization has no active IM connector",
    )
    page = page_of(bob, run)
    assert "Could not send: no IM connector is set up." in page
    assert "no connector for channel" not in page and "im_send failed" not in page
