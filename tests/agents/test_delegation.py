"""Delegation between agents: structured message and shared memories only, one trace id,
every hop audited, loops / depth / fan-out bounded, and a child finishing first."""

from __future__ import annotations

import pytest

from cadre.agents import services
from cadre.agents.models import Run, Wait
from cadre.agents.runtime.lifecycle import execution as engine
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.agents.runtime.records import crashpoints
from cadre.agents.runtime.records.grants import shared_memories
from cadre.agents.runtime.steps import delegation, run_context
from cadre.governance.models import AuditEvent
from cadre.tenancy.actors import member_actor
from tests.factories import MemberFactory

pytestmark = pytest.mark.django_db


def drain(limit: int = 50) -> list[int]:
    """Execute queued runs until none is left (what the workers do)."""
    done = []
    for _ in range(limit):
        run = Run.objects.filter(status=Run.Status.QUEUED).order_by("id").first()
        if run is None:
            return done
        engine.run_execute(run.pk)
        done.append(run.pk)
    raise AssertionError("runs keep coming")


def test_delegation_round_trip_shares_one_trace_and_is_audited(bob, alice, deployment):
    bob_agent = deployment.agents.get(member=bob)
    alice_agent = deployment.agents.get(member=alice)
    run = runtime.run_start(
        actor=member_actor(bob),
        agent=bob_agent,
        text=f"ask agent {alice_agent.pk}: what is the standard discount?",
    )
    assert engine.run_execute(run.pk) == Run.Status.WAITING
    child = Run.objects.get(parent=run)
    assert child.agent_id == alice_agent.pk and child.depth == 1 and child.root_id == run.pk
    assert child.trace_id == run.trace_id
    assert child.input["text"] == "what is the standard discount?"
    assert child.input["from"]["agent"] == bob_agent.pk
    assert child.session.channel == "delegation"
    drain()
    run.refresh_from_db()
    child.refresh_from_db()
    assert child.status == run.status == Run.Status.COMPLETED
    assert "Standard discount is 5 percent" in child.output["text"]
    assert "The other agent answered" in run.output["text"]
    hop = AuditEvent.objects.get(action="agent.delegate")
    assert hop.trace_id == run.trace_id and hop.actor_type == "agent"
    assert hop.changes["from_agent"] == bob_agent.pk and hop.changes["to_agent"] == alice_agent.pk


def test_delegating_back_into_the_chain_is_refused(bob, alice, deployment):
    bob_agent = deployment.agents.get(member=bob)
    alice_agent = deployment.agents.get(member=alice)
    run = runtime.run_start(
        actor=member_actor(bob),
        agent=bob_agent,
        text=f"ask agent {alice_agent.pk}: ask agent {bob_agent.pk}: hello",
    )
    engine.run_execute(run.pk)
    drain()
    child = Run.objects.get(parent=run)
    assert "already in this delegation chain" in child.output["text"]
    assert Run.objects.count() == 2
    assert AuditEvent.objects.filter(action="agent.delegate").count() == 1
    assert len({r.trace_id for r in Run.objects.all()}) == 1


def test_delegation_depth_is_bounded(owner, bob, alice, deployment, sales, org_a):
    extra = [MemberFactory(organization=org_a, display_name=f"Rep {i}") for i in range(3)]
    for member in extra:
        member.positions.add(sales)
    services.deployment_sync(actor=owner, deployment=deployment)
    agents = [deployment.agents.get(member=m) for m in (bob, alice, *extra)]
    text = "hello"
    for agent in reversed(agents[1:]):
        text = f"ask agent {agent.pk}: {text}"
    run = runtime.run_start(actor=member_actor(bob), agent=agents[0], text=text)
    engine.run_execute(run.pk)
    drain()
    depths = sorted(Run.objects.values_list("depth", flat=True))
    assert depths == [0, 1, 2, 3]  # the 4th hop was refused
    deepest = Run.objects.get(depth=3)
    refused = deepest.steps.get(kind="tool_call", name="delegate").output
    assert refused == {
        "error": "too_deep",
        "message": f"delegation chains are limited to {delegation.MAX_DEPTH} hops",
    }
    # Each hop also gets at most half its parent's budget (on_spawn default): 6, 3, 1, 1
    # model calls, so the deepest run stops on its budget after the refusal.
    budgets = dict(Run.objects.values_list("depth", "grants__budget__max_steps"))
    assert budgets == {0: 6, 1: 3, 2: 1, 3: 1}
    assert not Run.objects.exclude(status__in=Run.TERMINAL).exists()


def test_fan_out_is_bounded(bob, alice, deployment):
    bob_agent = deployment.agents.get(member=bob)
    alice_agent = deployment.agents.get(member=alice)
    run = runtime.run_start(
        actor=member_actor(bob), agent=bob_agent, text=f"ask agent {alice_agent.pk}: hi"
    )
    for _ in range(delegation.MAX_FANOUT):  # earlier delegations of this run
        Run.objects.create(
            organization=run.organization,
            session=run.session,
            agent=bob_agent,
            member=bob,
            version=run.version,
            parent=run,
            root=run,
            status=Run.Status.COMPLETED,
        )
    engine.run_execute(run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED
    assert f"at most {delegation.MAX_FANOUT} times" in run.output["text"]


def test_a_child_finishing_before_the_parent_waits_still_wakes_it(bob, alice, deployment):
    bob_agent = deployment.agents.get(member=bob)
    alice_agent = deployment.agents.get(member=alice)
    run = runtime.run_start(
        actor=member_actor(bob),
        agent=bob_agent,
        text=f"ask agent {alice_agent.pk}: standard discount?",
    )
    with (
        crashpoints.crash_after("tool_call", "delegate"),
        pytest.raises(crashpoints.SimulatedCrash),
    ):
        engine.run_execute(run.pk)
    child = Run.objects.get(parent=run)
    assert engine.run_execute(child.pk) == Run.Status.COMPLETED  # before the parent's wait
    assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    assert Run.objects.filter(parent=run).count() == 1  # the delegation was not repeated
    assert Wait.objects.get().status == Wait.Status.RESOLVED


def test_only_memories_the_sender_can_read_are_shared(bob, alice, deployment, org_a):
    from cadre.memory.dedup import content_hash
    from cadre.memory.models import Memory

    def memory(scope_key, content):
        scope, _, scope_id = scope_key.partition(":")
        return Memory.objects.create(
            organization=org_a,
            scope=scope,
            scope_id=int(scope_id),
            scope_key=scope_key,
            content=content,
            search_text=content,
            content_hash=content_hash(content),
        )

    bob_agent = deployment.agents.get(member=bob)
    alice_agent = deployment.agents.get(member=alice)
    mine = memory(f"user:{bob.pk}", "ACME wants delivery by Friday")
    theirs = memory(f"user:{alice.pk}", "Alice's private note")
    run = runtime.run_start(actor=member_actor(bob), agent=bob_agent, text="x")
    ctx = run_context.RunContext(run)
    shared = shared_memories(ctx, [mine.pk, theirs.pk])
    assert [m["id"] for m in shared] == [mine.pk]
    assert alice_agent.pk != bob_agent.pk
