"""The model step: the template's provider, the tools it is offered, one model call as a
persisted step (within the run's budget, its deltas streamed as events, its ContextRecord
written), and the reply through the chain's output stage."""

from __future__ import annotations

import time
from decimal import Decimal

from cadre.agents import mcp_tools, providers
from cadre.agents.models import MODEL_FAILURE, Run, Step
from cadre.agents.runtime.records.bookkeeping import bookkeeping, emit
from cadre.agents.runtime.records.grants import DEFAULT_MAX_STEPS, DEFAULT_MAX_TOKENS
from cadre.agents.runtime.steps.assembly import record_context
from cadre.agents.runtime.steps.run_context import RunContext, RunStopped
from cadre.agents.tools import registry as tool_registry
from cadre.governance.policy import stage_handled
from cadre.llm import ChatResult, provider_for

DELTA_FLUSH_SECONDS = 0.1


def run_provider(ctx: RunContext):
    """(the template's model provider for this run, its prices); a provider that is not
    available stops the run."""
    try:
        config, settings = providers.resolve(ctx.version.model_settings, ctx.run.organization_id)
    except providers.ProviderUnavailable:
        raise RunStopped(
            Run.Status.FAILED, f"{MODEL_FAILURE}the template's model provider is not available"
        ) from None
    return provider_for(settings, config), (config.prices if config else {})


def prompt_cache_key(run: Run) -> str:
    """Calls of one template and session share their prefix: one cache route for them."""
    return f"cadre-t{run.version.template_id}-s{run.session_id}"


def tool_specs(ctx: RunContext) -> list[dict]:
    """The specs of the tools the run's grants allow: built-in ones, then external MCP servers'
    tools the template attaches, with the schemas the servers declared."""
    specs = []
    granted = ctx.grants.get("tools", {})
    for name in sorted(granted):
        tool = tool_registry.get(name)
        if tool is not None:
            specs.append(tool.spec())
    return specs + mcp_tools.specs_for(ctx.run.organization_id, granted, ctx.mcp_servers)


def model_step(
    ctx: RunContext,
    provider,
    prices: dict,
    messages: list[dict],
    tools: list[dict],
    manifest: dict | None = None,
) -> ChatResult:
    """One model call as a step, refused (the run stopped) when the run's budget is spent."""
    budget = ctx.grants.get("budget", {})
    if ctx.model_calls >= int(budget.get("max_steps", DEFAULT_MAX_STEPS)):
        raise RunStopped(Run.Status.FAILED, "budget exceeded: too many model calls", notice="limit")
    if ctx.tokens_in + ctx.tokens_out >= int(budget.get("max_tokens", DEFAULT_MAX_TOKENS)):
        raise RunStopped(Run.Status.FAILED, "budget exceeded: token limit reached", notice="limit")
    if budget.get("max_cost") is not None and ctx.cost >= Decimal(str(budget["max_cost"])):
        raise RunStopped(Run.Status.FAILED, "budget exceeded: cost limit reached", notice="limit")

    def call(step: Step) -> dict:
        if manifest is not None:
            record_context(ctx, step, manifest, messages)
        # Deltas are written at most every DELTA_FLUSH_SECONDS; an answer that arrives faster
        # (the offline provider, short replies) needs none: the reply event carries it.
        pending: list[str] = []
        state = {"last": time.monotonic(), "flushed": False}

        def flush() -> None:
            with bookkeeping():
                emit(ctx.run.pk, "delta", {"index": step.index, "text": "".join(pending)})
            pending.clear()
            state.update(last=time.monotonic(), flushed=True)

        def on_delta(text: str) -> None:
            pending.append(text)
            if time.monotonic() - state["last"] >= DELTA_FLUSH_SECONDS:
                flush()

        result = provider.chat(
            messages,
            tools,
            stream=True,
            on_delta=on_delta,
            prompt_cache_key=prompt_cache_key(ctx.run),
        )
        if pending and state["flushed"]:
            flush()
        data = result.as_dict()
        # Which endpoint answered (its configuration's name), next to the model it named: the
        # chat says it under the reply.
        data["provider"] = provider.label
        # Priced as the meter prices it (the configured model's prices), so the step and the
        # call's UsageRecord agree.
        data["_usage"] = {
            **data["usage"],
            "cost": str(result.usage.cost(prices, getattr(provider, "model", ""))),
        }
        return data

    output = ctx.step(
        Step.Kind.MODEL_CALL,
        "model",
        {"messages": messages, "tools": [t["name"] for t in tools]},
        call,
    )
    return ChatResult.from_dict(output)


def checked_reply(ctx: RunContext, text: str) -> str:
    """The model's reply through the chain's output stage (content rules): a denial replaces
    it with a visible refusal. A step of its own, so a replay reuses the verdict."""
    if not text or not stage_handled(ctx.policy_chain(), "output"):
        return text
    verdict = ctx.step(
        Step.Kind.HOOK,
        "output_policy",
        {},
        lambda step: ctx.policy_check("output", text) or {"action": "allow", "text": text},
    )
    if verdict["action"] in ("deny", "require_confirmation"):
        return f"[The reply was withheld by policy: {verdict.get('reason') or 'denied'}.]"
    return verdict.get("text", text)
