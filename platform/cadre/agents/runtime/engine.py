"""The run loop: every model call, tool call, hook and wait is a persisted step.

A step is written `started` before its work and `completed` with its output after it. The
loop is deterministic given the outputs of completed steps, so executing a run again — a
Celery task redelivered after its worker died (acks_late + reject_on_worker_lost), or a run
resumed after a wait — replays completed steps from their stored outputs and carries on from
the first step that did not complete. Tool calls carry the idempotency key
`run:<id>:step:<n>`; the executor records it with the side effect (see tools/executor.py), so
a call that completed its effect but not its step returns the recorded result on retry.

One worker executes a run at a time: a PostgreSQL session advisory lock on the run is held
while executing; a killed worker's connection closes and releases it.
"""

from __future__ import annotations

import json
import logging
import time
from contextlib import contextmanager
from decimal import Decimal

from django.db import OperationalError, connection
from django.utils import timezone

from cadre.agents import providers
from cadre.agents.hooks.builtins import shared_memories_for_context
from cadre.agents.hooks.registry import hooks_for
from cadre.agents.models import (
    MODEL_FAILURE,
    Agent,
    Deployment,
    Run,
    RunEvent,
    SessionSummary,
    Step,
)
from cadre.agents.runtime import context as context_assembly
from cadre.agents.runtime.finish import finish_run
from cadre.agents.runtime.grants import DEFAULT_MAX_STEPS, DEFAULT_MAX_TOKENS
from cadre.agents.runtime.records import bookkeeping, emit
from cadre.agents.runtime.run_context import (
    NonDeterministicReplay,
    RunContext,
    RunPaused,
    RunRefused,
    RunStopped,
)
from cadre.agents.tools import registry as tool_registry
from cadre.governance.budgets import account_for_member
from cadre.llm import BudgetExceeded, ChatResult, ProviderError, provider_for
from cadre.llm.metering import charged_to
from cadre.memory.services import context_record_for_model_call
from cadre.observability import tracer
from cadre.tenancy.models import Member

logger = logging.getLogger(__name__)

LOCK_NAMESPACE = 71001  # pg advisory lock class for runs
DEFAULT_CONTEXT_TOKENS = 8_000
RECENT_TURNS = 12
DELTA_FLUSH_SECONDS = 0.1


# --- the loop -----------------------------------------------------------------------------


def _provider(ctx: RunContext):
    try:
        config, settings = providers.resolve(ctx.version.model_settings, ctx.run.organization_id)
    except providers.ProviderUnavailable:
        raise RunStopped(
            Run.Status.FAILED, f"{MODEL_FAILURE}the template's model provider is not available"
        ) from None
    return provider_for(settings, config), (config.prices if config else {})


def _recent_turns(run: Run) -> list[dict]:
    previous = Run.objects.filter(
        session_id=run.session_id, status=Run.Status.COMPLETED, created_at__lt=run.created_at
    )
    # Turns the `compact` hook summarised are sent as its summary, not as they were.
    summary = (
        SessionSummary.objects.filter(session_id=run.session_id, run__created_at__lt=run.created_at)
        .select_related("through_run")
        .order_by("-created_at", "-pk")
        .first()
    )
    turns: list[dict] = []
    if summary is not None:
        previous = previous.filter(created_at__gt=summary.through_run.created_at)
        turns.append({"role": "system", "content": summary.text})
    previous = previous.order_by("-created_at").values_list("input", "output")[:RECENT_TURNS]
    for run_input, run_output in reversed(list(previous)):
        # What the model saw and said (placeholders), never the re-identified transcript.
        turns.append({"role": "user", "content": model_side(run_input)})
        turns.append({"role": "assistant", "content": model_side(run_output)})
    return turns


def model_side(record: dict) -> str:
    """A run's input or output as the model sees it: masked text when masking changed it."""
    return record.get("model_text", record.get("text", ""))


def _skill_descriptions(version) -> list[dict]:
    # The template's skill references; the Hub's assemble_context hook supplies installed ones.
    return [
        {
            "name": skill["package"],
            "description": f"version {skill.get('range') or skill.get('tag')}",
        }
        for skill in version.skills or []
    ]


def _apply_input_verdict(ctx: RunContext, output: dict) -> None:
    """An input verdict ({"result": {"action", "reason", "text"}}) — the input gate's, or an
    on_init hook's that checks the input further: a refusal ends the run before anything
    reaches the model; otherwise the (masked) text is what the model, retrieval and memory see
    from now on."""
    verdict = output.get("result") if isinstance(output, dict) else None
    if not isinstance(verdict, dict) or "action" not in verdict:
        return
    if verdict["action"] in ("deny", "require_confirmation"):
        raise RunRefused(verdict.get("reason") or "refused by policy", verdict.get("retry_after"))
    if isinstance(verdict.get("text"), str):
        ctx.model_text = verdict["text"]


def _base(ctx: RunContext) -> dict:
    # Shared memories are stored as said: checked and masked for this session like retrieved
    # ones.
    shared, shared_withheld = shared_memories_for_context(
        ctx, ctx.run.input.get("shared_memories", [])
    )
    return {
        "agent_md": ctx.version.agent_md,
        "sop": ctx.version.sop,
        "user_md": ctx.agent.user_md,
        "skills": _skill_descriptions(ctx.version),
        "turns": _recent_turns(ctx.run),
        "shared": shared,
        "shared_withheld": shared_withheld,
    }


def _input_gate(ctx: RunContext) -> None:
    """The policy chain's input stage, run by the runtime for every run before any hook: the
    organization's chain always (a template's hooks cannot switch it off), then the template's
    additions. A refusal ends the run; otherwise the masked text is what everything after sees.
    Always a step of its own (first), so a replay reuses the verdict and the step list does not
    depend on the chain."""
    verdict = ctx.step(
        Step.Kind.HOOK,
        "input_policy",
        {},
        lambda step: (
            ctx.policy_check("input", ctx.input_text)
            or {"applied": False, "reason": "no plugin of the chain checks input"}
        ),
    )
    _apply_input_verdict(ctx, {"result": verdict})


def _assemble(ctx: RunContext) -> tuple[list[dict], dict]:
    _input_gate(ctx)
    for hook, config in hooks_for(ctx.version.hooks, "on_init"):
        output = ctx.step(
            Step.Kind.HOOK,
            f"on_init:{hook.name}",
            {},
            lambda step, hook=hook, config=config: hook.fn(ctx, config) or {},
        )
        _apply_input_verdict(ctx, output)
    base = ctx.step(Step.Kind.HOOK, "assemble_context:base", {}, lambda step: _base(ctx))
    pieces = context_assembly.ContextPieces(
        agent_md=base["agent_md"],
        sop=base["sop"],
        user_md=base["user_md"],
        skills=base["skills"],
        turns=base["turns"],
        shared=base["shared"],
        withheld=list(base.get("shared_withheld", [])),
        input_text=ctx.input_text,
    )
    for hook, config in hooks_for(ctx.version.hooks, "assemble_context"):
        added = ctx.step(
            Step.Kind.HOOK,
            f"assemble_context:{hook.name}",
            {},
            lambda step, hook=hook, config=config: hook.fn(ctx, config) or {},
        )
        pieces.memories += added.get("memories", [])
        pieces.standing += added.get("standing", [])
        pieces.withheld += added.get("withheld", [])
        if "passed_over" in added:
            pieces.passed_over = (pieces.passed_over or []) + added["passed_over"]
        pieces.sections += added.get("sections", [])
    settings = ctx.version.model_settings or {}
    budget = int(settings.get("context_tokens", DEFAULT_CONTEXT_TOKENS))
    order = settings.get("context_order", "stable")
    messages, report = context_assembly.fit(pieces, budget, order=order)
    return messages, context_assembly.context_manifest(pieces, report)


def _record_context(ctx: RunContext, step: Step, manifest: dict, messages: list[dict]) -> None:
    """The model call's ContextRecord: exactly the memories and skill versions in `messages`,
    and those withheld or dropped. Written once per model call (a retried call after a crash
    finds its record)."""
    with bookkeeping():
        context_record_for_model_call(
            actor=ctx.actor,
            run_id=ctx.run.pk,
            step_index=step.index,
            trace_id=ctx.run.trace_id,
            query=ctx.input_text,
            memories=[*manifest["memories"], *context_assembly.tool_found_memories(messages)],
            skills=manifest["skills"],
            passed_over=manifest.get("passed_over"),
            retried=step.attempts > 0,
        )


def prompt_cache_key(run: Run) -> str:
    """Calls of one template and session share their prefix: one cache route for them."""
    return f"cadre-t{run.version.template_id}-s{run.session_id}"


def _model_step(
    ctx: RunContext,
    provider,
    prices: dict,
    messages: list[dict],
    tools: list[dict],
    manifest: dict | None = None,
) -> ChatResult:
    budget = ctx.grants.get("budget", {})
    if ctx.model_calls >= int(budget.get("max_steps", DEFAULT_MAX_STEPS)):
        raise RunStopped(Run.Status.FAILED, "budget exceeded: too many model calls")
    if ctx.tokens_in + ctx.tokens_out >= int(budget.get("max_tokens", DEFAULT_MAX_TOKENS)):
        raise RunStopped(Run.Status.FAILED, "budget exceeded: token limit reached")
    if budget.get("max_cost") is not None and ctx.cost >= Decimal(str(budget["max_cost"])):
        raise RunStopped(Run.Status.FAILED, "budget exceeded: cost limit reached")

    def call(step: Step) -> dict:
        if manifest is not None:
            _record_context(ctx, step, manifest, messages)
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


def _tool_specs(ctx: RunContext) -> list[dict]:
    from cadre.agents import mcp_tools

    specs = []
    granted = ctx.grants.get("tools", {})
    for name in sorted(granted):
        tool = tool_registry.get(name)
        if tool is not None:
            specs.append(tool.spec())
    # External MCP servers' tools the template attaches, with the schemas the servers declared.
    return specs + mcp_tools.specs_for(ctx.run.organization_id, granted, ctx.mcp_servers)


def _checked_reply(ctx: RunContext, text: str) -> str:
    """The model's reply through the chain's output stage (content rules): a denial replaces
    it with a visible refusal. A step of its own, so a replay reuses the verdict."""
    from cadre.governance.policy import stage_handled

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


def _execute(ctx: RunContext) -> str:
    from cadre.agents.tools.executor import handle_tool_call

    messages, manifest = _assemble(ctx)
    provider, prices = _provider(ctx)
    tools = _tool_specs(ctx)
    while True:
        result = _model_step(ctx, provider, prices, messages, tools, manifest)
        if not result.tool_calls:
            return _checked_reply(ctx, result.text)
        messages.append(
            {
                "role": "assistant",
                "content": result.text,
                "tool_calls": [call.as_dict() for call in result.tool_calls],
            }
        )
        for call in result.tool_calls:
            output = handle_tool_call(ctx, call)
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call.id,
                    "name": call.name,
                    "content": json.dumps(output, ensure_ascii=False, default=str),
                }
            )


@contextmanager
def _run_lock(run_id: int):
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [LOCK_NAMESPACE, run_id])
        locked = cursor.fetchone()[0]
    try:
        yield locked
    finally:
        if locked:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [LOCK_NAMESPACE, run_id])


class RunBusy(Exception):
    """Another worker is executing this run right now."""


def _refusal(run: Run) -> str | None:
    if run.member.status != Member.Status.ACTIVE:
        return "the member is deactivated"
    if run.agent.status != Agent.Status.ACTIVE:
        return "the agent is stopped"
    if run.agent.deployment.status == Deployment.Status.STOPPED:
        return "the deployment is stopped"
    return None


def load_run(run_id: int, *related: str) -> Run | None:
    """The run with what executing it reads: its organization, agent, member and version
    (and `related`). The agent's organization and member are the run's own rows, shared
    rather than joined again — every join more costs PostgreSQL more planning than the
    lookup itself."""
    found = list(
        Run.objects.select_related("organization", "agent", "member", "version", *related)
        .filter(pk=run_id)
        .order_by()[:1]
    )
    if not found:
        return None
    run = found[0]
    agent = run.agent
    if agent.organization_id == run.organization_id:
        agent.organization = run.organization
    if agent.member_id == run.member_id:
        agent.member = run.member
    return run


def run_execute(run_id: int) -> str:
    """Execute (or resume) a run; returns its status afterwards. Safe to call again."""
    with _run_lock(run_id) as locked:
        if not locked:
            raise RunBusy(run_id)
        run = load_run(run_id, "agent__deployment")
        if run is None or run.is_terminal:
            return run.status if run else "missing"
        refusal = _refusal(run)
        if refusal:
            finish_run(run, None, Run.Status.CANCELLED, error=refusal)
            return run.status
        now = timezone.now()
        # One statement, committed at once (the attempt counts even if this worker dies); its
        # event goes with the run's next write.
        Run.objects.filter(pk=run.pk).update(
            status=Run.Status.RUNNING,
            attempts=run.attempts + 1,
            heartbeat_at=now,
            started_at=run.started_at or now,
        )
        ctx = RunContext(run, first_attempt=run.attempts == 0)
        ctx._pending_events.append(
            RunEvent(
                run_id=run.pk,
                kind="status",
                data={"status": Run.Status.RUNNING, "attempt": run.attempts + 1},
            )
        )
        with (
            _trace(run),
            tracer().start_as_current_span(
                "agent.run", attributes={"cadre.run_id": run.pk, "cadre.agent_id": run.agent_id}
            ),
        ):
            try:
                with charged_to(_account(run)):
                    text = _execute(ctx)
            except RunPaused as paused:
                emit(run.pk, "status", {"status": Run.Status.WAITING, "key": str(paused)})
                return Run.Status.WAITING
            except RunRefused as refused:
                finish_run(
                    run, ctx, Run.Status.COMPLETED, text=refused.reply, refused=refused.reason
                )
                return Run.Status.COMPLETED
            except RunStopped as stopped:
                finish_run(run, ctx, stopped.status, error=stopped.message)
                return stopped.status
            except NonDeterministicReplay as error:
                finish_run(run, ctx, Run.Status.FAILED, error=f"cannot resume: {error}")
                return Run.Status.FAILED
            except BudgetExceeded as exceeded:
                # Refused before the model call: a visible reply, no retry.
                _budget_refused(run, ctx, exceeded)
                return Run.Status.COMPLETED
            except ProviderError as error:
                # The client already retried within the call's time budget: the run fails
                # now, with the endpoint's own words, rather than after minutes of retries.
                finish_run(run, ctx, Run.Status.FAILED, error=f"{MODEL_FAILURE}{error}")
                return Run.Status.FAILED
            except OperationalError:
                raise  # transient: the task retries and the run resumes where it stopped
            except Exception as error:  # a bug or bad data: fail visibly, do not retry forever
                logger.exception("run %s failed", run.pk)
                finish_run(run, ctx, Run.Status.FAILED, error=f"{type(error).__name__}: {error}")
                return Run.Status.FAILED
            finish_run(run, ctx, Run.Status.COMPLETED, text=text)
            return Run.Status.COMPLETED


def _account(run: Run):
    """What the run's model calls are charged to: its member (and department), its template."""
    return account_for_member(run.member, template_id=run.version.template_id, run_id=run.pk)


def _budget_refused(run: Run, ctx: RunContext, exceeded: BudgetExceeded) -> None:
    with bookkeeping():
        Step.objects.filter(
            run_id=run.pk, kind=Step.Kind.MODEL_CALL, status=Step.Status.STARTED
        ).update(status=Step.Status.FAILED, error=exceeded.message[:4000])
    finish_run(
        run,
        ctx,
        Run.Status.COMPLETED,
        text=f"I can't run this request: {exceeded.message}",
        refused=exceeded.message,
        refused_code=exceeded.code,
    )


@contextmanager
def _trace(run: Run):
    """Make the run's stored trace id the current one, so every hop shares it."""
    from opentelemetry import trace
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

    if not run.trace_id:
        yield
        return
    span_context = SpanContext(
        trace_id=int(run.trace_id, 16),
        span_id=(run.pk % (2**63 - 1)) + 1,
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )
    with trace.use_span(NonRecordingSpan(span_context), end_on_exit=False):
        yield
