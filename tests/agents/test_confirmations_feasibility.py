"""Ask only what can succeed, and a failed effect is a failure: an `im_send` no channel can
deliver, or to a recipient who does not resolve, fails at once (no confirmation is stored,
nothing is sent, the tool step is `failed` with the reason); a message to a group is
confirmed with how many people it reaches, said as a sentence; a failed tool step is replayed,
never tried again."""

from __future__ import annotations

import pytest

from cadre.agents import tasks
from cadre.agents.call_chain import run_call_chain
from cadre.agents.models import AgentMessage, Run, RunEvent, Step, ToolEffect
from cadre.agents.runtime.lifecycle import execution as engine
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.agents.runtime.records import delivery
from cadre.governance.models import AuditEvent, Confirmation
from cadre.governance.risk import blast_radius_sentence
from cadre.tenancy.actors import member_actor, system_actor
from cadre.tenancy.models import Member
from tests.factories import DepartmentFactory, MemberFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_after_run(monkeypatch):
    # The after-run hooks (memory, compaction) are queued on commit too: not what is tested.
    monkeypatch.setattr(tasks.run_after, "apply_async", lambda *args, **kwargs: None)


def start(bob, agent, text):
    return runtime.run_start(actor=member_actor(bob), agent=agent, text=text)


def _tool_step(run) -> Step:
    return run.steps.get(kind=Step.Kind.TOOL_CALL, name="im_send")


def test_a_group_send_no_channel_can_deliver_is_never_asked(bob, bob_agent, im_channel):
    run = start(bob, bob_agent, "send hello to group:all-staff")
    with delivery.channels.overridden():  # no IM connector at all
        assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    assert not Confirmation.objects.exists()
    assert not AuditEvent.objects.filter(action="confirmation.request").exists()
    assert not AgentMessage.objects.exists() and not ToolEffect.objects.exists()
    assert im_channel.messages == []
    step = _tool_step(run)
    assert step.status == Step.Status.FAILED
    assert step.error == "no connector for channel 'console'"
    assert step.output == {"error": "undeliverable", "message": step.error}
    # The gate said so before any policy or risk was weighed; the run did not wait.
    gate = run.steps.get(kind=Step.Kind.HOOK, name="policy:im_send")
    assert gate.output["action"] == "fail"
    assert not run.steps.filter(kind=Step.Kind.WAIT).exists()
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED and " done" not in run.output["text"]
    event = RunEvent.objects.get(run=run, kind="effect")
    assert event.data == {
        "tool": "im_send",
        "step": step.index,
        "status": "failed",
        "reason": step.error,
    }
    assert RunEvent.objects.filter(run=run, kind="step", data__status="failed").count() == 1
    # Audited with the refusal's code, not its text.
    refused = AuditEvent.objects.get(action="tool.im_send.refused")
    assert refused.changes == {"tool": "im_send", "step": step.index, "error": "undeliverable"}
    assert refused.target_type == "run" and refused.target_id == str(run.pk)


def test_a_recipient_who_does_not_resolve_is_never_asked(bob, bob_agent, org_a, im_channel):
    for name in ("Ann", "Ben", "Cy", "Di", "Ed"):
        MemberFactory(organization=org_a, display_name=name)
    # Six recipients would be high risk (a confirmation), but one of them is nobody.
    run = start(bob, bob_agent, "send price list to Ann, Ben, Cy, Di, Ed, Zed")
    assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    assert not Confirmation.objects.exists() and not AgentMessage.objects.exists()
    assert im_channel.messages == []
    step = _tool_step(run)
    assert step.status == Step.Status.FAILED
    assert step.output["error"] == "unknown_recipient"
    assert step.error == "no active member matches 'Zed'"
    refused = AuditEvent.objects.get(action="tool.im_send.refused")
    assert "Zed" not in str(refused.changes)  # a recipient's name stays out of the audit log


def test_a_group_send_is_confirmed_with_the_people_it_reaches(bob, bob_agent, org_a):
    for index in range(10):
        MemberFactory(organization=org_a, display_name=f"Colleague {index}")
    MemberFactory(organization=org_a, display_name="Gone", status=Member.Status.DEACTIVATED)
    people = Member.objects.filter(organization=org_a, status=Member.Status.ACTIVE).count()
    run = start(bob, bob_agent, "send hello to group:all-staff")
    assert engine.run_execute(run.pk) == Run.Status.WAITING
    confirmation = Confirmation.objects.get(run_id=run.pk)
    assert confirmation.blast_radius == {
        "recipients": people,
        "groups": [{"group": "all-staff", "name": "All staff", "people": people}],
        "members": 0,
    }
    sentence = f"Sends to {people} people in All staff."
    assert confirmation.blast_radius_text == sentence
    assert f"Blast radius: {sentence}" in confirmation.summary
    assert "recipients: 1" not in confirmation.summary
    assert ("Blast radius", sentence) in confirmation.details_for_card  # the IM card too


def test_a_department_group_counts_its_members_and_sub_departments(bob, bob_agent, org_a):
    sales = DepartmentFactory(organization=org_a, name="Sales", code="sales")
    east = DepartmentFactory(organization=org_a, name="Sales East", parent=sales)
    for department in (sales, sales, east):
        MemberFactory(organization=org_a, department=department)
    MemberFactory(organization=org_a)  # not in Sales
    run = start(bob, bob_agent, "send hello to group:sales")
    assert engine.run_execute(run.pk) == Run.Status.WAITING
    confirmation = Confirmation.objects.get(run_id=run.pk)
    assert confirmation.blast_radius["recipients"] == 3
    assert confirmation.blast_radius_text == "Sends to 3 people in Sales."


def test_an_approved_group_send_says_whom_it_reached(bob, bob_agent, org_a, im_channel):
    run = start(bob, bob_agent, "send hello to group:all-staff")
    assert engine.run_execute(run.pk) == Run.Status.WAITING
    runtime.run_resume(actor=system_actor(org_a), run=run, payload={"approved": True})
    assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    step = _tool_step(run)
    assert step.status == Step.Status.COMPLETED and step.error == ""
    people = Member.objects.filter(organization=org_a, status=Member.Status.ACTIVE).count()
    assert step.output["recipients"] == [{"group": "all-staff", "people": people}]
    assert AgentMessage.objects.get().recipients == [{"group": "all-staff"}]  # for delivery


def test_a_send_that_failed_after_approval_is_failed_in_the_step_and_the_call_chain(
    alice, bob, bob_agent, org_a
):
    run = start(bob, bob_agent, "send hello to group:all-staff")
    assert engine.run_execute(run.pk) == Run.Status.WAITING  # feasible when asked
    runtime.run_resume(actor=system_actor(org_a), run=run, payload={"approved": True})
    with delivery.channels.overridden():  # the connector is gone by the time it is sent
        assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    message = AgentMessage.objects.get()
    assert message.status == AgentMessage.Status.FAILED
    step = _tool_step(run)
    assert step.status == Step.Status.FAILED and step.error == message.reason
    assert step.output["status"] == "failed"
    run.refresh_from_db()
    assert " done" not in run.output["text"]
    chain = run_call_chain(member_actor(alice), run)
    (tool_event,) = [e for e in chain["events"] if e["kind"] == "tool_call"]
    assert (tool_event["status"], tool_event["error"]) == ("failed", message.reason)
    # The message's own `effect` event told the chat; the step adds none.
    assert RunEvent.objects.filter(run=run, kind="effect").count() == 1


def test_a_failed_tool_step_is_replayed_not_tried_again(bob, bob_agent, im_channel):
    run = start(bob, bob_agent, "send hello to group:all-staff")
    with delivery.channels.overridden():
        assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    step = _tool_step(run)
    # As if the worker died after recording the failed call: the run is delivered again,
    # now that a channel could deliver. The model already read the failure: it stays.
    run.steps.filter(index__gt=step.index).delete()
    Run.objects.filter(pk=run.pk).update(status=Run.Status.QUEUED, output={}, finished_at=None)
    assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    replayed = _tool_step(run)
    assert (replayed.status, replayed.attempts, replayed.error) == (
        Step.Status.FAILED,
        step.attempts,
        step.error,
    )
    assert not Confirmation.objects.exists() and not AgentMessage.objects.exists()
    assert im_channel.messages == []


@pytest.mark.parametrize(
    ("radius", "sentence"),
    [
        ({"recipients": 1}, "Sends to 1 person."),
        (
            {
                "recipients": 14,
                "groups": [{"group": "all-staff", "name": "All staff", "people": 12}],
                "members": 2,
            },
            "Sends to 14 people: 12 people in All staff and 2 people by name.",
        ),
        (
            {"recipients": 1, "groups": [{"group": "oc_1", "name": "oc_1", "people": None}]},
            "Sends to the group chat oc_1 (its members are not known to Cadre).",
        ),
        ({"records": 60}, "Changes 60 records."),
        ({"external_domains": ["rival.test"]}, "Goes outside the organization, to rival.test."),
        ({}, ""),
    ],
)
def test_the_blast_radius_reads_as_a_sentence(radius, sentence):
    assert blast_radius_sentence(radius) == sentence
