"""What a run may do: the agent's actor, a template version's grants and budget, a subagent's
narrowed grants, the memory scope keys they name and the memories a run may share."""

from __future__ import annotations

from cadre.agents.models import Agent
from cadre.memory import selectors as memory_selectors
from cadre.memory.models import Memory, Scope, Verification, scope_key
from cadre.tenancy.actors import Actor

DEFAULT_MAX_STEPS = 12
DEFAULT_MAX_TOKENS = 200_000
DEFAULT_CONTEXT_TOKENS = 8_000  # a model call's context budget unless the template sets one


def agent_actor(agent: Agent) -> Actor:
    """The actor an agent acts as: its own identity, serving its member."""
    return Actor(
        kind="agent",
        organization=agent.organization,
        permissions=frozenset({"chat.use"}),
        member=agent.member,
        agent=agent,
        label=f"agent {agent.name}",
    )


def grants_for_version(version) -> dict:
    """What a run of this template version may do (the template's allow-lists and budget)."""
    settings = version.model_settings or {}
    budget = {"max_steps": DEFAULT_MAX_STEPS, "max_tokens": DEFAULT_MAX_TOKENS}
    budget.update(settings.get("budget") or {})
    policy = version.memory_policy or {}
    grants = {
        "tools": dict(version.tool_permissions or {}),
        "read_scopes": list(policy.get("read_scopes", ["agent", "user"])),
        "write_scopes": list(policy.get("write_scopes", ["agent"])),
        "budget": budget,
    }
    if policy.get("retrieve_kinds"):
        grants["retrieve_kinds"] = list(policy["retrieve_kinds"])
    return grants


def retrieval_kinds(grants: dict) -> list[str] | None:
    """The memory kinds the run's retrieval (context, prefetch, the memory_search tool) asks
    for: the template's `memory_policy.retrieve_kinds`; None — what people stated, without
    the records derived from runs (memory.models.DERIVED_KINDS), as search does by default."""
    return list(grants.get("retrieve_kinds") or []) or None


_RANK = {"low": 0, "medium": 1, "high": 2}
_CONFIRM = {"never": 0, "high_risk": 1, "always": 2}


def narrow_grants(parent: dict, proposed: dict) -> dict:
    """`proposed` cut down to `parent`: a subagent can never get more than its parent has."""
    tools = {}
    for name, rule in (proposed.get("tools") or {}).items():
        if name not in parent.get("tools", {}):
            continue
        mine = parent["tools"][name]
        merged = {**mine, **rule}
        merged["risk"] = max(mine.get("risk", "low"), rule.get("risk", "low"), key=_RANK.get)
        merged["confirmation"] = max(
            mine.get("confirmation", "never"), rule.get("confirmation", "never"), key=_CONFIRM.get
        )
        if "allowed_hosts" in mine or "allowed_hosts" in rule:
            merged["allowed_hosts"] = [
                h for h in rule.get("allowed_hosts", []) if h in mine.get("allowed_hosts", [])
            ]
        tools[name] = merged
    budget = {}
    for key, value in (parent.get("budget") or {}).items():
        asked = (proposed.get("budget") or {}).get(key, value)
        budget[key] = min(value, asked)
    return {
        "tools": tools,
        "read_scopes": [
            s for s in proposed.get("read_scopes", []) if s in parent.get("read_scopes", [])
        ],
        "write_scopes": [
            s for s in proposed.get("write_scopes", []) if s in parent.get("write_scopes", [])
        ],
        "budget": budget,
        "shared_memories": list(proposed.get("shared_memories", [])),
        # What the child's retrieval looks for is its own template's choice (relevance, not
        # reach: its scopes bound what it reads).
        **(
            {"retrieve_kinds": list(proposed["retrieve_kinds"])}
            if proposed.get("retrieve_kinds")
            else {}
        ),
    }


def scope_keys_for(agent: Agent, scope_types: list[str]) -> list[str]:
    """Concrete memory scope keys of an agent for scope types ("agent", "user", …)."""
    member = agent.member
    keys: list[str] = []
    for kind in scope_types:
        if kind == Scope.AGENT:
            keys.append(scope_key(Scope.AGENT, agent.pk))
        elif kind == Scope.USER:
            keys.append(scope_key(Scope.USER, member.pk))
        elif kind == Scope.POSITION:
            keys += [
                scope_key(Scope.POSITION, pk)
                for pk in member.positions.values_list("id", flat=True)
            ]
        elif kind == Scope.DEPARTMENT:
            keys += [
                scope_key(Scope.DEPARTMENT, pk)
                for pk in memory_selectors.department_chain(
                    agent.organization_id, member.department_id
                )
            ]
        elif kind == Scope.ORGANIZATION:
            keys.append(scope_key(Scope.ORGANIZATION))
    return list(dict.fromkeys(keys))


def shared_memories(ctx, ids: list[int]) -> list[dict]:
    """The memories `ids` that the run of `ctx` may share (a delegation, a publication): read
    through the memory gate as the run's agent, narrowed to the scopes its grants read, active
    and verified; as {"id", "content", "scope"}."""
    if not ids:
        return []
    rows = (
        memory_selectors.memory_queryset(ctx.actor, scope_keys=ctx.read_scope_keys())
        .filter(
            pk__in=ids,
            status=Memory.Status.ACTIVE,
            # A shared memory waiting for review reaches no model, a subagent's included.
            verification=Verification.VERIFIED,
        )
        .values("id", "content", "scope_key")
    )
    return [{"id": row["id"], "content": row["content"], "scope": row["scope_key"]} for row in rows]
