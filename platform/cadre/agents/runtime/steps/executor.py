"""Executing a model's tool call inside a run: permission, arguments, confirmation, effect.

Every call is checked against the run's grants (the template's allow-list, narrowed for
subagents) — a denied call is audited and the model is told it was refused. Side effects are
keyed by the step's idempotency key in ToolEffect: an internal effect and its record commit
together (exactly once); a retried call returns the recorded result. A tool that names its
effect's target (`Tool.audit_target`) is audited here: `tool.<name>` (or its `audit_action`) in
the effect's own transaction, or `tool.<name>.failed` when the effect failed (its rows rolled
back), with the failure's code and details.

A failed effect is a failure: a call whose handler raised ToolFailed, or whose result says
`"status": "failed"` (an IM message no channel could deliver), is recorded as a `failed` step
with the reason as its error. A tool with a `preflight` is checked before it is gated: a call
that cannot succeed (no channel for its recipients, a recipient that does not resolve) fails
at once, so nobody is asked to confirm it and nothing is done; the preflight's reach (how many
people a message goes to) is what its confirmation shows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import jsonschema
from django.db import IntegrityError, transaction

from cadre.agents import mcp_tools
from cadre.agents.models import Step, ToolEffect
from cadre.agents.runtime.steps import delegation
from cadre.agents.runtime.steps.run_context import FAILED_KEY
from cadre.agents.tools import registry
from cadre.agents.tools.registry import ToolFailed
from cadre.governance import audit
from cadre.governance.confirmations import Decision, tool_call_gate
from cadre.llm import ToolCall


@dataclass
class ToolContext:
    """What a tool handler sees: the run, its agent and actor, the key and the template rule."""

    runtime: object  # the RunContext
    key: str
    rule: dict
    step_index: int

    @property
    def run(self):
        return self.runtime.run

    @property
    def agent(self):
        return self.runtime.agent

    @property
    def actor(self):
        return self.runtime.actor

    def read_scope_keys(self) -> list[str]:
        return self.runtime.read_scope_keys()

    def write_scope_key(self, scope: str) -> str | None:
        return self.runtime.write_scope_key(scope)


def refusal(code: str, message: str) -> dict:
    return {"error": code, "message": message}


def _failed(output: dict) -> dict:
    """The output of a tool call that failed (as the model reads it, after the "retrieved"
    stage): its step is recorded `failed`, with the reason the output gives."""
    return {**output, FAILED_KEY: effect_failure(output) or "the call failed"}


def effect_failure(result: dict) -> str:
    """Why a performed tool call failed ("" when it did not): its handler refused
    (ToolFailed), or its effect says it failed (an undeliverable message)."""
    if not isinstance(result, dict):
        return ""
    if result.get("error") and result.get("message"):
        return str(result["message"])
    if result.get("status") == "failed":
        return str(result.get("reason") or "the effect failed")
    return ""


def _denied(ctx, call: ToolCall, reason: str) -> dict:
    def perform(step: Step) -> dict:
        audit.record(
            actor=ctx.actor,
            action="tool.denied",
            target=("run", ctx.run.pk),
            organization=ctx.run.organization,
            changes={"tool": call.name, "step": step.index, "reason": reason},
        )
        return refusal("denied", reason)

    return ctx.step(Step.Kind.TOOL_CALL, call.name, {"arguments": call.arguments}, perform)


def _cannot_succeed(ctx, call: ToolCall, risk: str, code: str, reason: str) -> dict:
    """A call its tool's preflight refused (nobody was asked, nothing done): a failed step, and
    an audit event with the refusal's code (not its text, which may name recipients)."""

    def perform(step: Step) -> dict:
        audit.record(
            actor=ctx.actor,
            action=f"tool.{call.name}.refused",
            target=("run", ctx.run.pk),
            organization=ctx.run.organization,
            changes={"tool": call.name, "step": step.index, "error": code},
        )
        return _failed(_checked_result(ctx, refusal(code, reason)))

    return ctx.step(
        Step.Kind.TOOL_CALL, call.name, {"arguments": call.arguments, "risk": risk}, perform
    )


def _invalid(ctx, call: ToolCall, message: str) -> dict:
    return ctx.step(
        Step.Kind.TOOL_CALL,
        call.name,
        {"arguments": call.arguments},
        lambda step: refusal("invalid_arguments", message),
    )


def _audit_effect(tool, tool_ctx: ToolContext, arguments: dict, result, failed=None) -> None:
    if tool.audit_target is None:
        return
    changes = {
        "tool": tool.name,
        "step": tool_ctx.step_index,
        "idempotency_key": tool_ctx.key,
        "target": tool.audit_target(tool_ctx, arguments, result),
        "outcome": "failed" if failed is not None else "done",
    }
    if failed is not None:
        changes["error"] = failed.code
        if failed.details:
            changes["failure"] = failed.details
    action = tool.audit_action or f"tool.{tool.name}"
    audit.record(
        actor=tool_ctx.actor,
        action=f"{action}.failed" if failed is not None else action,
        target=("run", tool_ctx.run.pk),
        organization=tool_ctx.run.organization,
        changes=changes,
    )


def perform_effect(tool, tool_ctx: ToolContext, arguments: dict) -> dict:
    """Run a tool handler once per idempotency key; audit its effect (`Tool.audit_target`)."""
    organization_id = tool_ctx.run.organization_id
    recorded = ToolEffect.objects.filter(key=tool_ctx.key).values_list("result", flat=True).first()
    if recorded is not None:
        return {**recorded, "replayed": True}
    if tool.side_effect == "none":
        try:
            return tool.handler(tool_ctx, arguments)
        except ToolFailed as failed:
            return refusal(failed.code, failed.message)
    try:
        with transaction.atomic():
            result = tool.handler(tool_ctx, arguments)
            ToolEffect.objects.create(
                organization_id=organization_id, key=tool_ctx.key, tool=tool.name, result=result
            )
            _audit_effect(tool, tool_ctx, arguments, result)
    except ToolFailed as failed:
        # The effect's rows rolled back; the attempt is still on record.
        _audit_effect(tool, tool_ctx, arguments, None, failed)
        return refusal(failed.code, failed.message)
    except IntegrityError:
        # Another attempt recorded the effect first (its own rows rolled back with ours).
        recorded = (
            ToolEffect.objects.filter(key=tool_ctx.key).values_list("result", flat=True).first()
        )
        if recorded is None:
            raise
        return {**recorded, "replayed": True}
    return result


def _gate(
    ctx, call: ToolCall, tool, rule: dict, risk: str, step: Step, always: bool = False
) -> dict:
    """Governance's verdict on one tool call: allow, deny, or confirm (with its Confirmation)
    — or "fail" when the tool's preflight says the call cannot succeed (nothing is asked).

    The template's rule adds to it: `always` asks every time, `high_risk` asks when the tool
    itself declares the call high-risk; the organization's risk rules can ask on their own
    (many recipients, deletions, exports, payments) whatever the template says. A high-risk
    MCP tool (`always`) asks whatever the template's rule says."""
    reach = {}
    if tool.preflight is not None:
        try:
            reach = tool.preflight(ctx, ctx.reidentify(call.arguments)) or {}
        except ToolFailed as failed:
            return {"action": "fail", "error": failed.code, "reason": failed.message}
    policy = rule.get("confirmation", "never")
    return tool_call_gate(
        organization=ctx.run.organization,
        tool=call.name,
        arguments=call.arguments,
        declared_risk=risk,
        idempotency_key=f"{step.idempotency_key}:confirmation",
        requester=ctx.run.member,
        agent_id=ctx.agent.pk,
        run_id=ctx.run.pk,
        step_index=step.index,
        policy_chain_id=ctx.version.policy_chain_id,
        conversation_key=f"session:{ctx.run.session_id}",
        trace_id=ctx.run.trace_id,
        always_confirm=always or policy == "always" or (policy == "high_risk" and risk == "high"),
        reach=reach,
    ).as_dict()


def _checked_result(ctx, result: dict) -> dict:
    """A tool's result passes the chain's "retrieved" stage before the model reads it:
    masked, or withheld when the chain denies it (e.g. injected instructions in a web page)."""
    text = json.dumps(result, ensure_ascii=False, default=str)
    verdict = ctx.policy_check("retrieved", text)
    if verdict is None or verdict["action"] == "allow":
        return result
    if verdict["action"] in ("deny", "require_confirmation"):
        return refusal("withheld", f"the tool's result was withheld: {verdict['reason']}")
    try:
        return json.loads(verdict["text"])
    except ValueError:  # masking kept the JSON intact in practice; never hand back broken JSON
        return {"result": verdict["text"]}


def handle_tool_call(ctx, call: ToolCall) -> dict:
    """Check, confirm if needed, and perform one tool call as persisted step(s)."""
    tool = registry.get(call.name)
    granted = ctx.grants.get("tools", {})
    rule = granted.get(call.name)
    mcp = tool is None and mcp_tools.split_name(call.name) is not None
    if mcp:
        # An external MCP server's tool: allowed by name or by its server's wildcard, checked
        # before the server is looked up (a refused call sends nothing anywhere).
        rule = mcp_tools.rule_for(granted, call.name)
        if rule is None:
            return _denied(ctx, call, f"this agent is not allowed to use {call.name!r}")
        try:
            tool = mcp_tools.resolve(ctx.run.organization_id, call.name, ctx.mcp_servers)
        except mcp_tools.McpToolUnavailable as unavailable:
            return _denied(ctx, call, str(unavailable))
    if tool is None:
        return _denied(ctx, call, f"there is no tool named {call.name!r}")
    if rule is None:
        return _denied(ctx, call, f"this agent is not allowed to use {call.name!r}")
    try:
        jsonschema.validate(call.arguments, tool.parameters)
    except jsonschema.ValidationError as error:
        return _invalid(ctx, call, error.message)

    risk = tool.risk_of(call.arguments, rule.get("risk"))
    # The organization's policy chain and risk rules decide, as a step of its own: a replayed
    # run reuses the stored verdict and never re-evaluates (or re-creates a confirmation).
    gate = ctx.step(
        Step.Kind.HOOK,
        f"policy:{call.name}",
        {"arguments": call.arguments, "risk": risk},
        lambda step: _gate(ctx, call, tool, rule, risk, step, always=mcp and risk == "high"),
    )
    if gate["action"] == "fail":
        return _cannot_succeed(ctx, call, risk, gate["error"], gate["reason"])
    if gate["action"] == "deny":
        return _denied(ctx, call, gate["reason"] or "the policy chain denied this call")
    if gate["action"] == "confirm":
        resolution = ctx.wait(
            "confirmation",
            gate["wait_key"],
            {
                "tool": call.name,
                "arguments": call.arguments,
                "risk": gate["level"] or risk,
                "confirmation": gate["confirmation"],
                "reason": gate["reason"],
            },
            timeout_seconds=int(rule.get("confirmation_timeout_seconds", 24 * 3600)),
            on_timeout=rule.get("on_timeout", "continue"),
        )
        decision = Decision.from_dict(resolution)
        if decision.timeout:
            return ctx.step(
                Step.Kind.TOOL_CALL,
                call.name,
                {"arguments": call.arguments},
                lambda step: refusal("not_confirmed", "the confirmation timed out"),
            )
        if not decision.approved:
            return ctx.step(
                Step.Kind.TOOL_CALL,
                call.name,
                {"arguments": call.arguments},
                lambda step: refusal("rejected", decision.reason or "the action was rejected"),
            )

    if call.name == "await_event":
        payload = ctx.wait(
            "event",
            call.arguments["key"],
            {"tool": "await_event", "key": call.arguments["key"]},
            timeout_seconds=int(call.arguments.get("timeout_seconds", 24 * 3600)),
            on_timeout=call.arguments.get("on_timeout", "continue"),
        )
        return {"event": payload}
    if call.name == "delegate":
        return delegation.delegate(ctx, call, rule)

    def perform(step: Step) -> dict:
        tool_ctx = ToolContext(
            runtime=ctx, key=step.idempotency_key, rule=rule, step_index=step.index
        )
        # The model wrote placeholders; the effect needs the real values (re-identified from
        # this conversation's vault). The step keeps the model's arguments.
        result = perform_effect(tool, tool_ctx, ctx.reidentify(call.arguments))
        checked = _checked_result(ctx, result)
        return _failed(checked) if effect_failure(result) else checked

    return ctx.step(
        Step.Kind.TOOL_CALL, call.name, {"arguments": call.arguments, "risk": risk}, perform
    )
