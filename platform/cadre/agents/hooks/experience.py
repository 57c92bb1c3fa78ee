"""Recording what a run did as memory, after the run: each tool call as a `tool_trajectory`,
the finished task as an `experience` (steps and outcome), and the employee's next message as
that experience's feedback.

Everything is read from the run's persisted steps, never from the live loop, so the answer is
never slowed and a re-run of the after-run hooks finds what it already wrote (the memories'
provenance names the run) and writes nothing twice.

What is recorded is about the person whose words the run's input is (`speaker`): the memories
take them as their subject, so a colleague whose request reached someone else's agent (through
their own agent's delegation or publication) sees, corrects and deletes what was recorded from
it, and the agent's owner does not find it filed as their own.

Memory keeps what was actually said, never a session's placeholders: the steps hold the model's
side (`<MEMBER_1>`, `<PHONE_1>`, meaningful only in this session's vault), so their values are
put back from the session's vault before they are written, secrets are redacted (memory never
keeps them), and masking applies again whenever memory enters a model's context.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from django.db import transaction
from django.db.models import Q

from cadre.agents.models import Run, Step
from cadre.agents.runtime.records.grants import agent_actor
from cadre.agents.runtime.records.runs import model_side, speaker
from cadre.governance.masking.policy import PLACEHOLDER
from cadre.governance.masking.vault import reidentify
from cadre.memory import services as memory_services
from cadre.memory.models import Kind, Memory, scope_parts
from cadre.ports import Registry

# Classify a message as feedback on the previous answer: "correction", "affirmation" or None.
# The skills app registers its correction/affirmation detector; with none, no feedback.
FEEDBACK_CLASSIFIERS: Registry[Callable[[str], str | None]] = Registry("feedback classifiers")

ARGUMENT_CHARS = 80


def as_said(run: Run, value):
    """`value` (text or JSON) with the session's placeholders replaced by what they stand for."""
    if isinstance(value, dict):
        return {key: as_said(run, item) for key, item in value.items()}
    if isinstance(value, list):
        return [as_said(run, item) for item in value]
    if isinstance(value, str) and PLACEHOLDER.search(value):
        return reidentify(
            value, organization=run.organization, conversation_key=f"session:{run.session_id}"
        )
    return value


def _failed(output) -> str | None:
    if isinstance(output, dict) and output.get("error"):
        return str(output.get("error"))
    return None


def tool_calls(run: Run) -> list[dict]:
    """The run's tool calls in order: {"step", "tool", "arguments", "result", "error",
    "tool_call_id", "duration_ms"} — from its completed steps (one query), as said."""
    # A tool call whose effect failed finished too (`failed`, its refusal as its output).
    steps = run.steps.filter(
        Q(status=Step.Status.COMPLETED) | Q(kind=Step.Kind.TOOL_CALL, status=Step.Status.FAILED),
        kind__in=[Step.Kind.MODEL_CALL, Step.Kind.TOOL_CALL],
    ).order_by("index")
    pending_ids: list[tuple[str, str]] = []
    calls = []
    for step in steps:
        if step.kind == Step.Kind.MODEL_CALL:
            pending_ids = [
                (call.get("name", ""), call.get("id", ""))
                for call in (step.output or {}).get("tool_calls", [])
            ]
            continue
        call_id = ""
        for position, (name, candidate) in enumerate(pending_ids):
            if name == step.name:
                call_id = candidate
                del pending_ids[position]
                break
        calls.append(
            {
                "step": step.index,
                "tool": step.name,
                "arguments": as_said(run, (step.input or {}).get("arguments") or {}),
                "result": as_said(run, step.output),
                "error": _failed(step.output),
                "tool_call_id": call_id,
                "duration_ms": step.duration_ms,
            }
        )
    return calls


def step_text(call: dict) -> str:
    """One step as distillation compares them: the tool and its arguments, briefly."""
    parts = []
    for key, value in sorted(call["arguments"].items()):
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        parts.append(f"{key}={' '.join(str(shown).split())[:ARGUMENT_CHARS]}")
    text = f"Use {call['tool']}" + (f": {', '.join(parts)}" if parts else "")
    return text + (f" (failed: {call['error']})" if call["error"] else "")


def outcome_of(calls: list[dict]) -> str:
    """success when the last call of every tool the run used succeeded (a call retried after
    an error counts by its retry), else failure."""
    last: dict[str, dict] = {}
    for call in calls:
        last[call["tool"]] = call
    return "failure" if any(call["error"] for call in last.values()) else "success"


def record_run_experience(run: Run, config: dict) -> dict:
    """Write the run's tool trajectories and its experience (once), and attach this run's
    input as feedback to the previous task of the session."""
    actor = agent_actor(run.agent)
    scope, scope_id = scope_parts(config.get("scope_key") or run.agent.memory_scope_key)
    subject = speaker(run)
    calls = tool_calls(run)
    output = {"tool_calls": len(calls), "trajectories": [], "experience": None}
    with transaction.atomic():
        recorded = memory_services.recorded_from_run(
            run.organization, run_id=run.pk, kinds=(Kind.TOOL_TRAJECTORY, Kind.EXPERIENCE)
        )
        have_steps = {
            str(entry.get("source_ref", {}).get("step_id"))
            for memory in recorded
            if memory.kind == Kind.TOOL_TRAJECTORY
            for entry in memory.provenance
            if str(entry.get("source_ref", {}).get("run_id")) == str(run.pk)
        }
        for call in calls:
            if str(call["step"]) in have_steps:
                continue
            memory = memory_services.tool_trajectory_record(
                actor=actor,
                tool=call["tool"],
                parameters=memory_services.without_secrets(
                    call["arguments"], organization=run.organization
                ),
                result=memory_services.without_secrets(
                    call["result"], organization=run.organization
                ),
                run_id=str(run.pk),
                step_id=str(call["step"]),
                tool_call_id=call["tool_call_id"],
                ok=call["error"] is None,
                duration_ms=call["duration_ms"],
                scope=scope,
                scope_id=scope_id,
                conversation_id=str(run.session_id),
                subject=subject,
            )
            output["trajectories"].append(memory.pk)
        existing = [m for m in recorded if m.kind == Kind.EXPERIENCE]
        task = as_said(run, model_side(run.input)).strip()
        if existing:
            output["experience"] = existing[0].pk
        elif task and len(calls) >= int(config.get("min_tool_calls", 1)):
            memory = memory_services.experience_record(
                actor=actor,
                task=task.splitlines()[0],
                steps=[step_text(call) for call in calls],
                outcome=outcome_of(calls),
                run_id=run.pk,
                scope=scope,
                scope_id=scope_id,
                subject=subject,
                session_id=run.session_id,
                trace_id=run.trace_id,
                conversation_id=str(run.session_id),
                details={
                    "tools": [call["tool"] for call in calls],
                    "tool_steps": [call["step"] for call in calls],
                    "failed_steps": [call["step"] for call in calls if call["error"]],
                    "reply": as_said(run, model_side(run.output))[:500],
                },
            )
            output["experience"] = memory.pk
        feedback = _feedback_for_previous(run, actor, task)
        if feedback:
            output["feedback"] = feedback
    return output


def _verdict(text: str) -> str | None:
    for _name, classify in FEEDBACK_CLASSIFIERS.items():
        verdict = classify(text)
        if verdict:
            return verdict
    return None


def _feedback_for_previous(run: Run, actor, text: str) -> dict | None:
    if not text:
        return None
    verdict = _verdict(text)
    if verdict is None:
        return None
    previous = (
        Run.objects.filter(
            session_id=run.session_id, status=Run.Status.COMPLETED, created_at__lt=run.created_at
        )
        .exclude(pk=run.pk)
        .order_by("-created_at", "-pk")
        .values_list("pk", flat=True)
        .first()
    )
    if previous is None:
        return None
    experiences = [
        memory
        for memory in memory_services.recorded_from_run(
            run.organization, run_id=previous, kinds=(Kind.EXPERIENCE,)
        )
        if memory.status == Memory.Status.ACTIVE
    ]
    if not experiences:
        return None
    updated = memory_services.experience_feedback(
        actor=actor, memory=experiences[0], text=text, verdict=verdict, feedback_run_id=run.pk
    )
    return {
        "experience": experiences[0].pk,
        "run": previous,
        "verdict": verdict,
        "attached": updated is not None,
    }
