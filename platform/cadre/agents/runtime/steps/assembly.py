"""Context assembly, as steps: the input gate, the `on_init` and `assemble_context` hooks, the
base context (template, USER.md, the session's recent turns, shared memories), fitted into the
budget; and the ContextRecord of each model call."""

from __future__ import annotations

from cadre.agents.hooks.builtins import shared_memories_for_context
from cadre.agents.hooks.registry import hooks_for
from cadre.agents.models import Run, SessionSummary, Step
from cadre.agents.placeholders import render_placeholders
from cadre.agents.runtime.records.bookkeeping import bookkeeping
from cadre.agents.runtime.records.grants import DEFAULT_CONTEXT_TOKENS
from cadre.agents.runtime.records.runs import model_side
from cadre.agents.runtime.steps import context as context_assembly
from cadre.agents.runtime.steps.run_context import RunContext, RunRefused
from cadre.memory.services import context_record_for_model_call
from cadre.tenancy.languages import member_language, organization_language

RECENT_TURNS = 12
# How the context names a language to the model (in English: every model reads it).
LANGUAGE_NAMES = {"en": "English (en)", "zh-hans": "Simplified Chinese (zh-Hans)"}


def language_line(member) -> str:
    """The line telling the model which language the person reads (their preference, else
    their organization's default: `member_language`); empty in an English organization for an
    English reader, where there is nothing to tell."""
    if member is None:
        return ""
    language = member_language(member)
    if language == "en" and organization_language(member.organization) == "en":
        return ""
    name = LANGUAGE_NAMES.get(language, language)
    return (
        f"The person's preferred language: {name}. "
        "Answer in it unless they write in another language."
    )


def recent_turns(run: Run) -> list[dict]:
    """The session's completed turns before `run` as the model saw them (the `compact` hook's
    summary in place of the turns it covers), oldest first."""
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


def skill_descriptions(version) -> list[dict]:
    """The template's skill references; the Hub's assemble_context hook supplies installed ones."""
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
    # The template's placeholders filled for the member the agent serves (USER.md was filled
    # when the agent was created): the model and whoever reads its context never see braces.
    member = ctx.agent.member
    return {
        "agent_md": render_placeholders(ctx.version.agent_md, member),
        "sop": render_placeholders(ctx.version.sop, member),
        "user_md": render_placeholders(ctx.agent.user_md, member),
        "skills": skill_descriptions(ctx.version),
        "turns": recent_turns(ctx.run),
        "shared": shared,
        "shared_withheld": shared_withheld,
        # the person who asked (a run without one: the member the agent serves)
        "language": language_line(ctx.member or member),
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


def assemble(ctx: RunContext) -> tuple[list[dict], dict]:
    """The first model call's messages and the context's manifest (what was sent, withheld,
    dropped), each hook a step."""
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
        language=base.get("language", ""),  # absent from a base recorded before it existed
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


def record_context(ctx: RunContext, step: Step, manifest: dict, messages: list[dict]) -> None:
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
