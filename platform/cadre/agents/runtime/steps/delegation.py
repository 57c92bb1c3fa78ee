"""Delegation: a run asks another agent (any position, any member) to do something.

What passes is a structured message plus the memories the sender explicitly shares (only ones
it can read), never its personal scope. The child run's grants come from its own template,
narrowed by the parent's `on_spawn` hooks and capped by the parent's grants. Every hop is
audited and all hops share the root run's trace id; depth, fan-out and the size of a
delegation tree are bounded, and an agent already in the chain cannot be asked again.
"""

from __future__ import annotations

from django.db import transaction

from cadre.agents.hooks.registry import hooks_for
from cadre.agents.models import Agent, Run, Session, Step, ToolEffect
from cadre.agents.runtime.records.grants import grants_for_version, narrow_grants, shared_memories
from cadre.agents.runtime.records.runs import execution_enqueue
from cadre.governance import audit
from cadre.llm import ToolCall

MAX_DEPTH = 3  # root run is depth 0
MAX_FANOUT = 5  # delegations per run
MAX_TREE = 20  # runs in one delegation tree
WAIT_SECONDS = 3600


def _chain_agent_ids(run: Run) -> set[int]:
    ids, current = set(), run
    while current is not None:
        ids.add(current.agent_id)
        current = current.parent
    return ids


def child_grants(parent: Run, target: Agent) -> dict:
    """The child run's grants: its own template's, as the parent's `on_spawn` hooks narrow
    them, within the parent's."""
    own = grants_for_version(target.version)
    proposed = dict(own)
    for hook, config in hooks_for(parent.version.hooks, "on_spawn"):
        proposed = hook.fn(parent, proposed, config) or proposed
    # Whatever the hooks said: within the parent's grants and within the child's template.
    return narrow_grants(own, narrow_grants(parent.grants, proposed))


def _refuse(code: str, message: str) -> dict:
    return {"error": code, "message": message}


def delegate(ctx, call: ToolCall, rule: dict) -> dict:
    """The `delegate` tool: start the target agent's run (a step with its effect recorded),
    then wait for it to finish; its reply, or why it was refused."""

    def spawn(step: Step) -> dict:
        recorded = (
            ToolEffect.objects.filter(key=step.idempotency_key)
            .values_list("result", flat=True)
            .first()
        )
        if recorded is not None:
            return recorded
        parent = ctx.run
        target = (
            Agent.objects.select_related("version", "member", "deployment")
            .filter(pk=call.arguments["agent"], organization_id=parent.organization_id)
            .first()
        )
        if target is None or target.status != Agent.Status.ACTIVE:
            return _refuse("unknown_agent", "there is no active agent with that id")
        if target.member.status != target.member.Status.ACTIVE:
            return _refuse("unknown_agent", "that agent's member is deactivated")
        if target.pk in _chain_agent_ids(parent):
            return _refuse("loop", "that agent is already in this delegation chain")
        if parent.depth + 1 > MAX_DEPTH:
            return _refuse("too_deep", f"delegation chains are limited to {MAX_DEPTH} hops")
        if parent.children.count() >= MAX_FANOUT:
            return _refuse("fan_out", f"a run may delegate at most {MAX_FANOUT} times")
        root_id = parent.root_id or parent.pk
        if Run.objects.filter(root_id=root_id).count() + 1 > MAX_TREE:
            return _refuse("too_many", f"a delegation tree is limited to {MAX_TREE} runs")
        shared = shared_memories(ctx, call.arguments.get("share_memories", []))
        with transaction.atomic():
            session, _ = Session.objects.get_or_create(
                organization_id=parent.organization_id,
                agent=target,
                member=target.member,
                channel="delegation",
                external_id=f"agent:{parent.agent_id}",
                defaults={"title": f"Requests from {parent.agent.name}"},
            )
            child = Run.objects.create(
                organization_id=parent.organization_id,
                session=session,
                agent=target,
                member=target.member,
                version=target.version,
                parent=parent,
                root_id=root_id,
                depth=parent.depth + 1,
                trace_id=parent.trace_id,
                trigger="delegation",
                input={
                    "text": call.arguments["message"],
                    "shared_memories": shared,
                    "from": {
                        "agent": parent.agent_id,
                        "run": parent.pk,
                        "member": parent.member.display_name,
                    },
                },
                grants=child_grants(parent, target),
            )
            result = {"agent": target.pk, "run": child.pk}
            ToolEffect.objects.create(
                organization_id=parent.organization_id,
                key=step.idempotency_key,
                tool="delegate",
                result=result,
            )
            audit.record(
                actor=ctx.actor,
                action="agent.delegate",
                target=child,
                organization=parent.organization,
                changes={
                    "from_agent": parent.agent_id,
                    "to_agent": target.pk,
                    "parent_run": parent.pk,
                    "root_run": root_id,
                    "depth": child.depth,
                    "shared_memories": [m["id"] for m in shared],
                },
            )
            execution_enqueue(child.pk)
        return result

    spawned = ctx.step(Step.Kind.TOOL_CALL, "delegate", {"arguments": call.arguments}, spawn)
    if spawned.get("error"):
        return spawned
    outcome = ctx.wait(
        "event",
        f"run:{spawned['run']}:finished",
        {"tool": "delegate", "run": spawned["run"]},
        timeout_seconds=WAIT_SECONDS,
        on_timeout="continue",
    )
    return {"agent": spawned["agent"], "run": spawned["run"], **outcome}
