"""Evaluating the policy chain: organization plugins first, then a template chain's, in order.

Each enabled plugin that handles the stage sees the payload as modified by the ones before
it. Strictest decision wins (deny > require_confirmation > modify > allow); a deny stops the
chain. A plugin that raises is a deny ("fails closed"). Every non-allow decision (and every
flag) is stored as a PolicyDecision and audited as `policy.<action>`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.db.models import Q

from cadre.errors import CadreError, NotPermitted
from cadre.governance import audit
from cadre.governance.models import PolicyChain, PolicyDecision
from cadre.governance.policy.base import (
    ALLOW,
    DENY,
    MODIFY,
    REQUIRE_CONFIRMATION,
    STAGES,
    STRICTNESS,
    Decision,
    PolicyContext,
    get,
)
from cadre.observability import current_trace_id
from cadre.tenancy.actors import system_actor

logger = logging.getLogger(__name__)

# With no chain configured, what every organization runs.
DEFAULT_PLUGINS: list[dict] = [
    {"plugin": "masking", "enabled": True, "config": {}},
    {"plugin": "prompt_injection", "enabled": True, "config": {}},
    {"plugin": "recipient_limit", "enabled": True, "config": {"max_recipients": 20}},
]


class RateLimited(CadreError):
    """A policy rate limit refused the request: HTTP 429, `retry_after` in the details."""

    code = "rate_limited"
    status = 429

    def __init__(self, message: str, *, retry_after: int):
        super().__init__(message, details={"retry_after": retry_after})
        self.retry_after = retry_after


@dataclass
class ChainResult:
    action: str
    reason: str
    payload: Any
    decisions: list[Decision] = field(default_factory=list)
    retry_after: int | None = None
    chain_version: int = 0

    @property
    def allowed(self) -> bool:
        return self.action in (ALLOW, MODIFY)

    def raise_for_denial(self) -> None:
        """For API paths: a rate limit becomes a 429, any other denial a 403."""
        if self.action != DENY:
            return
        if self.retry_after is not None:
            raise RateLimited(self.reason, retry_after=self.retry_after)

        raise NotPermitted(self.reason, code="policy_denied")


@dataclass
class ResolvedChain:
    plugins: list[dict]
    version: int  # organization version * 10,000 + template chain version (display only)
    chain_ids: list[int]


def resolve_chain(organization, chain_id: int | None = None) -> ResolvedChain:
    """The organization's chain (or the default) followed by template chain `chain_id` (the
    one a role template version links to)."""
    scope = Q(scope=PolicyChain.Scope.ORGANIZATION)
    if chain_id:
        scope |= Q(scope=PolicyChain.Scope.TEMPLATE, pk=chain_id)
    chains = {
        chain.scope: chain
        for chain in PolicyChain.objects.filter(organization=organization).filter(scope)
    }
    organization_chain = chains.get(PolicyChain.Scope.ORGANIZATION)
    plugins = list(organization_chain.plugins) if organization_chain else list(DEFAULT_PLUGINS)
    version = (organization_chain.version if organization_chain else 0) * 10_000
    template_chain = chains.get(PolicyChain.Scope.TEMPLATE)
    if template_chain is not None:
        plugins += list(template_chain.plugins)
        version += template_chain.version
    ids = [chain.pk for chain in (organization_chain, template_chain) if chain is not None]
    return ResolvedChain(plugins=plugins, version=version, chain_ids=ids)


def evaluate(
    *,
    organization,
    stage: str,
    payload: Any,
    chain_id: int | None = None,
    member_id: int | None = None,
    agent_id: int | None = None,
    run_id: int | None = None,
    step_index: int | None = None,
    conversation_key: str = "",
    trace_id: str = "",
    actor=None,
    chain: ResolvedChain | None = None,
    record: bool = True,
) -> ChainResult:
    """Run the chain for one stage and return the combined decision (recorded and audited;
    `record=False` for a replay, which decides nothing: evaluation suites)."""
    if stage not in STAGES:
        raise ValueError(f"unknown policy stage {stage!r}")
    if not trace_id:
        trace_id = current_trace_id()
    chain = chain or resolve_chain(organization, chain_id)
    current = payload
    decisions: list[Decision] = []
    final_action, final_reason, retry_after = ALLOW, "", None
    for entry in chain.plugins:
        if not entry.get("enabled", True):
            continue
        name = entry.get("plugin", "")
        plugin = get(name)
        if plugin is None:
            decision = Decision.deny(f"policy plugin {name!r} is not installed (fail closed)")
        elif stage not in plugin.stages:
            continue
        else:
            context = PolicyContext(
                organization=organization,
                stage=stage,
                payload=current,
                config=dict(entry.get("config") or {}),
                member_id=member_id,
                agent_id=agent_id,
                run_id=run_id,
                step_index=step_index,
                conversation_key=conversation_key,
                trace_id=trace_id,
            )
            try:
                decision = plugin.evaluate(context)
                if not isinstance(decision, Decision):
                    raise TypeError(f"returned {type(decision).__name__}, not a Decision")
            except Exception as error:  # fail closed: an erroring plugin denies
                logger.exception("policy plugin %s failed", name)
                decision = Decision.deny(
                    f"policy plugin {name!r} failed ({type(error).__name__}); denied (fail closed)",
                    details={"error": type(error).__name__},
                )
        decision.plugin = name
        decisions.append(decision)
        if decision.action == MODIFY and decision.payload is not None:
            current = decision.payload
        if STRICTNESS[decision.action] > STRICTNESS[final_action]:
            final_action, final_reason = decision.action, decision.reason
            retry_after = decision.retry_after
        if decision.action == DENY:
            break
    result = ChainResult(
        action=final_action,
        reason=final_reason,
        payload=current,
        decisions=decisions,
        retry_after=retry_after,
        chain_version=chain.version,
    )
    if not record:
        return result
    _record(
        result,
        organization=organization,
        stage=stage,
        actor=actor,
        run_id=run_id,
        step_index=step_index,
        member_id=member_id,
        agent_id=agent_id,
        trace_id=trace_id,
    )
    return result


def _record(
    result: ChainResult,
    *,
    organization,
    stage,
    actor,
    run_id,
    step_index,
    member_id,
    agent_id,
    trace_id,
) -> None:
    audited = [decision for decision in result.decisions if decision.audited]
    if not audited:
        return

    actor = actor or system_actor(organization, label="policy chain")
    target = ("run", run_id) if run_id else ("organization", organization.pk)
    with transaction.atomic():
        PolicyDecision.objects.bulk_create(
            [
                PolicyDecision(
                    organization=organization,
                    stage=stage,
                    plugin=decision.plugin,
                    action=decision.action if decision.action != ALLOW else "flag",
                    reason=(decision.reason or "; ".join(decision.flags))[:2000],
                    details=decision.details,
                    chain_version=result.chain_version,
                    run_id=run_id,
                    step_index=step_index,
                    member_id=member_id,
                    agent_id=agent_id,
                    trace_id=trace_id,
                )
                for decision in audited
            ]
        )
        for decision in audited:
            action = decision.action if decision.action != ALLOW else "flag"
            audit.record(
                actor=actor,
                action=f"policy.{action}",
                target=target,
                organization=organization,
                reason=(decision.reason or "; ".join(decision.flags))[:2000],
                changes={
                    "stage": stage,
                    "plugin": decision.plugin,
                    "step": step_index,
                    "details": decision.details,
                },
            )


__all__ = [
    "DEFAULT_PLUGINS",
    "REQUIRE_CONFIRMATION",
    "ChainResult",
    "RateLimited",
    "evaluate",
    "policy_check_input",
    "policy_check_run",
    "resolve_chain",
    "stage_handled",
]


def policy_check_run(*, run, stage: str, text: str, step_index: int = 0, chain=None) -> dict:
    """The chain at one stage for text inside a run, as a JSON-safe dict a runtime step can
    store (so a replayed run reuses the verdict): the (masked) text and the decision."""
    result = evaluate(
        organization=run.organization,
        stage=stage,
        payload=text,
        chain_id=getattr(run.version, "policy_chain_id", None),
        member_id=run.member_id,
        agent_id=run.agent_id,
        run_id=run.pk,
        step_index=step_index,
        conversation_key=f"session:{run.session_id}",
        trace_id=run.trace_id,
        chain=chain,
    )
    return {
        "action": result.action,
        "reason": result.reason,
        "text": result.payload if isinstance(result.payload, str) else text,
        "retry_after": result.retry_after,
        "plugins": [d.plugin for d in result.decisions if d.audited],
    }


def policy_check_input(*, run, text: str) -> dict:
    """The chain at the input stage for a run's input (masked text, decision)."""
    return policy_check_run(run=run, stage="input", text=text)


def stage_handled(chain: ResolvedChain, stage: str) -> bool:
    """Whether any enabled plugin of the chain looks at `stage` (else evaluating is a no-op)."""
    for entry in chain.plugins:
        if not entry.get("enabled", True):
            continue
        plugin = get(entry.get("plugin", ""))
        if plugin is None or stage in plugin.stages:  # a missing plugin fails closed
            return True
    return False
