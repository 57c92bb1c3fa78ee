"""The port through which memory learns about agent scopes: whose agent `agent:<id>` is and
what it is called. Agents are a higher layer, so the agents app registers the lookup in its
`AppConfig.ready()`; with nothing registered, agent scopes have no owner and no name."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from cadre.ports import Registry


@dataclass(frozen=True)
class AgentScope:
    agent_id: int
    name: str
    member_id: int
    member_name: str

    @property
    def key(self) -> str:
        return f"agent:{self.agent_id}"

    @property
    def label(self) -> str:
        """ "Agent: Sales assistant (Alice)" — without the owner when the name has it."""
        if not self.member_name or self.member_name in self.name:
            return f"Agent: {self.name}"
        return f"Agent: {self.name} ({self.member_name})"


# (organization_id, *, member_id: int | None, agent_ids: list[int] | None) -> [AgentScope]
AgentLookup = Callable[..., list[AgentScope]]

lookups: Registry[AgentLookup] = Registry("memory agent scopes")


def agent_scopes(
    organization_id: int, *, member_id: int | None = None, agent_ids: Iterable[int] | None = None
) -> list[AgentScope]:
    """The agents of one member (`member_id`) or the agents with these ids, in an organization."""
    lookup = lookups.get("agents")
    if lookup is None:
        return []
    return lookup(
        organization_id,
        member_id=member_id,
        agent_ids=None if agent_ids is None else sorted(set(agent_ids)),
    )
