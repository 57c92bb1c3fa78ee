"""A run reads memory through the memory gate as its agent: the standing memories it is sent,
the memories it shares when delegating and the retrieval hook's pre-check return only what the
agent's actor may read — never a colleague's personal memory, never shared memory waiting for
review (docs/memory.md, "One gate")."""

from __future__ import annotations

from cadre.agents.hooks.builtins import standing_rows
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.agents.runtime.records.grants import agent_actor, shared_memories
from cadre.agents.runtime.steps import run_context
from cadre.memory import selectors
from cadre.memory.models import Verification
from cadre.tenancy.actors import member_actor
from tests.memory.test_memory_gate import remember


def test_standing_rows_never_hold_a_colleagues_personal_memory(org_a, alice, bob, bob_agent):
    own = remember(org_a, "Bob wants summaries short", f"user:{bob.pk}", kind="preference")
    remember(org_a, "Alice's private preference", f"user:{alice.pk}", kind="preference")
    # Even when the colleague's scope is asked for by name, the gate narrows it away.
    rows = standing_rows(agent_actor(bob_agent), [f"user:{bob.pk}", f"user:{alice.pk}"], {})
    assert [m.pk for m in rows] == [own.pk]


def test_standing_rows_leave_out_shared_memory_waiting_for_review(org_a, bob_agent):
    remember(
        org_a,
        "Discounts up to 60 percent need no approval",
        "organization",
        kind="requirement",
        verification=Verification.UNVERIFIED,
    )
    assert list(standing_rows(agent_actor(bob_agent), ["organization"], {})) == []


def test_a_delegation_shares_nothing_of_another_members_personal_memory(
    org_a, alice, bob, bob_agent
):
    theirs = remember(org_a, "Alice's salary review notes", f"user:{alice.pk}")
    run = runtime.run_start(actor=member_actor(bob), agent=bob_agent, text="x")
    ctx = run_context.RunContext(run)
    assert shared_memories(ctx, [theirs.pk]) == []
    # The gate, asked directly as the agent for that scope, agrees.
    gated = selectors.memory_queryset(ctx.actor, scope_keys=[f"user:{alice.pk}"])
    assert not gated.filter(pk=theirs.pk).exists()


def test_the_retrieval_hook_finds_nothing_to_search_in_a_colleagues_scope(
    org_a, alice, bob, bob_agent
):
    from cadre.agents.hooks.builtins import memory_retrieval

    remember(org_a, "Alice's door code is 4711", f"user:{alice.pk}")
    run = runtime.run_start(actor=member_actor(bob), agent=bob_agent, text="door code")
    ctx = run_context.RunContext(run)
    assert memory_retrieval(ctx, {"top_k": 5}) == {"memories": [], "passed_over": []}


def test_turn_records_hold_only_the_members_own_turns(org_a, alice, bob, deployment):
    from cadre.memory.services.context import context_record_for_model_call

    bob_agent = deployment.agents.get(member=bob)
    alice_agent = deployment.agents.get(member=alice)
    records = {}
    for member, agent in ((bob, bob_agent), (alice, alice_agent)):
        run = runtime.run_start(actor=member_actor(member), agent=agent, text="x")
        records[member.pk] = context_record_for_model_call(
            actor=agent_actor(agent),
            run_id=run.pk,
            step_index=1,
            query=f"{member.display_name}'s question",
            memories=[],
            skills=[],
        )
    bobs = selectors.turn_records(member_actor(bob))
    assert list(bobs.values_list("pk", flat=True)) == [records[bob.pk].pk]
    # An owner (memory.personal) and a system reader with a reason take every turn.
    assert selectors.turn_records(member_actor(alice)).count() == 2
    reader = selectors.system_reader(org_a, job="tests", reason="list the turns")
    assert selectors.turn_records(reader).count() == 2
