"""The runtime under governance: every tool call passes the organization's policy chain and
risk rules (as a step of its own); a high-risk call pauses on a governance Confirmation whose
approval resumes the run so the tool acts exactly once; a policy deny reaches the model."""

from __future__ import annotations

import pytest

from cadre.agents.models import AgentMessage, Run, Step, Wait
from cadre.agents.runtime.lifecycle import execution as engine
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.governance import confirmations
from cadre.governance.models import Confirmation
from cadre.governance.policy.services import policy_chain_set
from cadre.tenancy.actors import member_actor
from tests.factories import MemberFactory

pytestmark = pytest.mark.django_db


def _many_recipients(org, count: int = 6) -> str:
    names = [
        MemberFactory(organization=org, display_name=f"Rep {i}").display_name for i in range(count)
    ]
    return ", ".join(names)


def test_high_risk_send_waits_for_a_governance_confirmation_then_sends_once(bob, bob_agent, org_a):
    run = runtime.run_start(
        actor=member_actor(bob),
        agent=bob_agent,
        text=f"send price list to {_many_recipients(org_a)}",
    )
    assert engine.run_execute(run.pk) == Run.Status.WAITING
    confirmation = Confirmation.objects.get(run_id=run.pk)
    assert confirmation.tool == "im_send" and confirmation.status == "pending"
    wait = Wait.objects.get(run=run)
    assert wait.key == confirmation.wait_key
    assert wait.details["confirmation"] == confirmation.pk
    assert not AgentMessage.objects.exists()

    confirmations.confirmation_decide(
        confirmation=confirmation, actor=member_actor(bob), decision="approve", via="console"
    )
    assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    assert engine.run_execute(run.pk) == Run.Status.COMPLETED  # a redelivery changes nothing
    assert AgentMessage.objects.count() == 1
    # Replaying never re-created the confirmation: the gate's verdict is a stored step.
    assert Confirmation.objects.filter(run_id=run.pk).count() == 1
    assert run.steps.filter(kind=Step.Kind.HOOK, name="policy:im_send").count() == 1


def test_a_policy_deny_refuses_the_tool_and_the_model_is_told(alice, bob, bob_agent):
    policy_chain_set(
        actor=member_actor(alice),
        plugins=[{"plugin": "tool_access", "config": {"deny": ["im_*"]}}],
    )
    run = runtime.run_start(actor=member_actor(bob), agent=bob_agent, text="send hello to Alice")
    assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    assert not AgentMessage.objects.exists()
    assert not Confirmation.objects.exists()
    refused = run.steps.get(kind=Step.Kind.TOOL_CALL)
    assert "denied by policy" in str(refused.output)
