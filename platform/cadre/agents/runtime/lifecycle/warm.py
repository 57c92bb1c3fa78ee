"""After a topic-shift prefetch (lifecycle/prefetch.py): the next turn's other context decided
ahead, and — when a template opts in — the provider's prompt cache warmed with the next turn's
stable prefix, so that turn reads it from the cache instead of writing it.

- `NEXT_TURN` is a port: a higher app registers, under the name of its `assemble_context`
  hook, a function `(run, hook config) -> the hook's output for the next turn or None`,
  predicted from this turn's input (the Hub's `skills` hook registers `skills_predict`, which
  also keeps its skills' description vectors for the next turn). It records nothing.
- `model_settings.warm_prompt_cache: true` (off by default: a warm-up is a model request,
  charged like any other). The next turn's stable prefix is assembled as that turn will
  assemble it (context.fit, order `stable`): the version's AGENT.md, SOP, the agent's USER.md,
  the predicted skills, this turn's standing memories (only when the memories the hook would
  choose now are the same ids and versions: the masked text is then what the next turn sends),
  and the session's turns including this one — as the model saw them (placeholders, never the
  originals). The prefix is everything up to the last cache break (the last turn). When its
  system part is the one this turn sent, the provider already holds it (this turn's request
  wrote it) and nothing is sent. Otherwise the prefix is sent with the run's tools,
  `prompt_cache_key` and `max_tokens` 1 (the Anthropic adapter puts its `cache_control`
  breakpoints where the real turn will), and the answer is discarded.
- Nothing is sent for a provider that does not cache prompts (`ModelProvider.caches_prompts`:
  the offline provider), for the `legacy` order, when the budget would drop part of the
  prefix (the next turn's prefix would then depend on its own input), when the agent, its
  member or its deployment is no longer active, or when the agent has moved to another version.
- The request is charged to the run's member, department and template under the purpose
  `prompt_cache.warm` (a UsageRecord with the run's id, in the usage dashboard and API like
  every model call), and audited as `run.prompt_cache_warm` on the run. It is no step of the
  run and never a reply.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from types import SimpleNamespace

from django.db import transaction
from django.utils import timezone

from cadre.agents import providers
from cadre.agents.hooks.builtins import standing_rows
from cadre.agents.hooks.registry import hooks_for
from cadre.agents.models import Step
from cadre.agents.placeholders import render_placeholders
from cadre.agents.runtime.records.grants import (
    DEFAULT_CONTEXT_TOKENS,
    agent_actor,
    scope_keys_for,
)
from cadre.agents.runtime.records.runs import run_refusal
from cadre.agents.runtime.steps import context as context_assembly
from cadre.agents.runtime.steps.assembly import language_line, recent_turns, skill_descriptions
from cadre.agents.runtime.steps.model import prompt_cache_key, tool_specs
from cadre.agents.runtime.steps.run_context import RunContext
from cadre.governance import audit
from cadre.governance.budgets import account_for_member
from cadre.llm import ProviderError, provider_for
from cadre.llm.metering import charged_to
from cadre.ports import Registry

logger = logging.getLogger(__name__)

WARM_PURPOSE = "prompt_cache.warm"
SETTING = "warm_prompt_cache"

NEXT_TURN: Registry[Callable[..., dict | None]] = Registry("next-turn context predictions")


def predict_next_turn(run) -> dict[str, dict]:
    """{hook name: its predicted output} for the template's hooks that have a prediction."""
    predicted: dict[str, dict] = {}
    for hook, config in hooks_for(run.version.hooks, "assemble_context"):
        predict = NEXT_TURN.get(hook.name)
        if predict is None:
            continue
        try:
            output = predict(run, config)
        except Exception:  # a prediction failing costs the next turn its head start only
            logger.exception("next-turn prediction %s failed for run %s", hook.name, run.pk)
            continue
        if output is not None:
            predicted[hook.name] = output
    return predicted


def after_prefetch(run) -> dict:
    """On a topic-shift prefetch of `run` (the prefetch task): the predictions, then the warm-up
    if the template asks for one. What was done, by name."""
    predicted = predict_next_turn(run)
    done = {"predicted": sorted(predicted)}
    try:
        done["warm"] = prompt_cache_warm(run, predicted)
    except Exception as error:  # the next turn simply writes the cache itself
        logger.warning("prompt cache warm-up for run %s failed: %s", run.pk, error)
        done["warm"] = "failed"
    return done


def warming(version) -> bool:
    return bool((version.model_settings or {}).get(SETTING))


# --- the next turn's prefix ------------------------------------------------------------


def _hook_outputs(run) -> dict[str, dict]:
    prefix = "assemble_context:"
    return {
        name.removeprefix(prefix): output
        for name, output in run.steps.filter(
            kind=Step.Kind.HOOK, name__startswith=prefix, status=Step.Status.COMPLETED
        ).values_list("name", "output")
    }


def _standing_unchanged(run, config: dict, sent: dict) -> bool:
    """Whether the standing_memories hook would choose now the memories (ids and versions)
    it chose for `run`."""
    keys = scope_keys_for(run.agent, run.grants.get("read_scopes", []))
    now = [(m.pk, m.version) for m in standing_rows(agent_actor(run.agent), keys, config)]
    chosen = [*sent.get("standing", []), *sent.get("withheld", [])]
    return sorted(now) == sorted((item["id"], item["version"]) for item in chosen)


def next_turn_prefix(run, predicted: dict[str, dict]) -> list[dict] | None:
    """The messages the next turn of `run`'s session will begin with (up to its last cache
    break), or None when they cannot be known before its input."""
    settings = run.version.model_settings or {}
    if settings.get("context_order", "stable") != "stable":
        return None
    outputs = _hook_outputs(run)
    pieces = context_assembly.ContextPieces(
        # filled as the next turn's assembly fills them (steps/assembly.py)
        agent_md=render_placeholders(run.version.agent_md, run.agent.member),
        sop=render_placeholders(run.version.sop, run.agent.member),
        user_md=render_placeholders(run.agent.user_md, run.agent.member),
        skills=skill_descriptions(run.version),
        # as the next turn reads them: every completed turn of the session so far
        turns=recent_turns(SimpleNamespace(session_id=run.session_id, created_at=timezone.now())),
        input_text=run.input.get("model_text") or run.input.get("text", ""),
        language=language_line(run.member or run.agent.member),
    )
    for hook, config in hooks_for(run.version.hooks, "assemble_context"):
        if hook.name in NEXT_TURN and hook.name not in predicted:
            return None  # a hook whose next output could not be predicted
        output = predicted.get(hook.name) or outputs.get(hook.name) or {}
        if hook.name == "standing_memories":
            if not _standing_unchanged(run, config, output):
                return None
            pieces.standing += output.get("standing", [])
        elif hook.name in predicted:
            pieces.sections += output.get("sections", [])
        else:  # per-request context: after the prefix, but it takes its share of the budget
            pieces.memories += output.get("memories", [])
            pieces.sections += output.get("sections", [])
    budget = int(settings.get("context_tokens", DEFAULT_CONTEXT_TOKENS))
    messages, report = context_assembly.fit(pieces, budget)
    stable = {"user_md", "sop", "skills", "skill_bodies", "standing", "turns"}
    if stable & set(report["dropped"]):
        return None
    breaks = [index for index, message in enumerate(messages) if message.get("cache_break")]
    return messages[: breaks[-1] + 1] if breaks else None


def _system_part(messages: list[dict]) -> list[dict]:
    leading = []
    for message in messages:
        if message["role"] != "system" or not message.get("cache_break"):
            break
        leading.append(message)
    return leading


def _sent_messages(run) -> list[dict]:
    first = (
        run.steps.filter(kind=Step.Kind.MODEL_CALL, status=Step.Status.COMPLETED)
        .order_by("index")
        .values_list("input", flat=True)
        .first()
    )
    return (first or {}).get("messages", [])


# --- the warm-up -------------------------------------------------------------------------


def prompt_cache_warm(run, predicted: dict[str, dict]) -> str:
    """Send the next turn's stable prefix to the template's provider when it differs from this
    turn's; what happened ("sent", or why not)."""
    if not warming(run.version):
        return "off"
    if run_refusal(run) is not None:
        return "inactive"
    if run.agent.version_id != run.version_id:
        return "new_version"
    try:
        config, model_settings = providers.resolve(run.version.model_settings, run.organization_id)
    except providers.ProviderUnavailable:
        return "no_provider"
    provider = provider_for(model_settings, config)
    if not provider.caches_prompts:
        return "no_cache"
    prefix = next_turn_prefix(run, predicted)
    if prefix is None:
        return "unpredictable"
    if _system_part(prefix) == _system_part(_sent_messages(run)):
        return "unchanged"
    tools = tool_specs(RunContext(run, first_attempt=True))
    # One output token is all a warm-up asks for; an endpoint configured for
    # max_completion_tokens (OpenAI's reasoning models) is asked for it under that name.
    limit = "max_tokens"
    if "max_completion_tokens" in provider.parameters:
        limit = "max_completion_tokens"
    account = account_for_member(
        run.member, template_id=run.version.template_id, run_id=run.pk, purpose=WARM_PURPOSE
    )
    try:
        with charged_to(account):
            result = provider.chat(
                prefix, tools, prompt_cache_key=prompt_cache_key(run), **{limit: 1}
            )
    except ProviderError as error:  # a budget refusal among them: the next turn writes it
        logger.info("prompt cache warm-up for run %s not sent: %s", run.pk, error)
        return "refused" if getattr(error, "code", "") == "budget_exceeded" else "failed"
    with transaction.atomic():
        audit.record(
            actor=agent_actor(run.agent),
            action="run.prompt_cache_warm",
            target=run,
            after={
                "model": result.model or provider.model,
                "messages": len(prefix),
                "input_tokens": result.usage.input_tokens,
                "cached_input_tokens": result.usage.cached_input_tokens,
                "cache_write_tokens": result.usage.cache_write_tokens,
                "output_tokens": result.usage.output_tokens,
                "cost": str(result.usage.cost(provider.prices, provider.model)),
            },
        )
    return "sent"
