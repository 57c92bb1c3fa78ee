"""Task experience: one `experience` memory per finished task (its steps and outcome), the
feedback that arrives on it later, and the lookup that keeps recording them idempotent.

Experiences are what memory-to-skill distills (cadre/skills/distill.py reads `task`, `steps`
and `outcome` from their attributes). Each one is an observation of one run, not a claim about
the world: two runs that went the same way are two experiences, so the content names its run
and the dedup funnel leaves experiences alone (see funnel.memory_dedup).
"""

from __future__ import annotations

from django.db import transaction
from django.utils.translation import gettext as _

from cadre.errors import InvalidInput
from cadre.memory.models import Kind, Memory, Scope, SourceKind
from cadre.memory.sensitive import protect
from cadre.memory.services.common import MAX_CONTENT_CHARS
from cadre.memory.services.writes import memory_add, memory_update

OUTCOMES = ("success", "failure")
MAX_STEPS = 50
MAX_FEEDBACK_CHARS = 1000


def without_secrets(value, *, organization):
    """`value` (a string, or JSON of them) with secrets redacted, as memory stores text: the
    values memory never keeps (ALWAYS_REDACTED) do not reach a trajectory's attributes either."""
    if isinstance(value, dict):
        return {
            key: without_secrets(item, organization=organization) for key, item in value.items()
        }
    if isinstance(value, list):
        return [without_secrets(item, organization=organization) for item in value]
    if not isinstance(value, str) or not value:
        return value
    return protect(value, organization=organization)[0]


def recorded_from_run(organization, *, run_id, kinds: tuple[str, ...]) -> list[Memory]:
    """The memories of `kinds` whose provenance names the run (a merged duplicate carries the
    run in a later provenance entry, so this looks at every entry, not only `source_ref`)."""
    return list(
        Memory.objects.filter(
            organization=organization,
            kind__in=kinds,
            provenance__contains=[{"source_ref": {"run_id": str(run_id)}}],
        ).exclude(status=Memory.Status.DELETED)
    )


def experience_content(task: str, steps: list[str], outcome: str, run_id) -> str:
    lines = [f"Task: {task}", "Steps:"]
    lines += [f"{index}. {step}" for index, step in enumerate(steps, start=1)]
    lines.append(f"Outcome: {outcome}.")
    lines.append(f"Recorded from run {run_id}.")
    return "\n".join(lines)[:MAX_CONTENT_CHARS]


@transaction.atomic
def experience_record(
    *,
    actor,
    task: str,
    steps: list[str],
    outcome: str,
    run_id,
    scope: str | None = None,
    scope_id: int | None = None,
    session_id=None,
    trace_id: str = "",
    details: dict | None = None,
    conversation_id: str = "",
    subject=None,
) -> Memory:
    """Write one finished task as an `experience` memory with the run as its provenance.
    `subject`: the run's member (whose permissions decide whether a shared-scope experience
    waits for review, see writes.memory_add).

    `details` joins the attributes (the tool calls' ids, what failed); `task`, `steps` and
    `outcome` are the fields distillation reads."""
    task = " ".join(str(task or "").split())[:300]
    if not task:
        raise InvalidInput(_("An experience needs its task."), details={"task": ["Required."]})
    if outcome not in OUTCOMES:
        raise InvalidInput(
            _("outcome must be one of %(value)s.") % {"value": ", ".join(OUTCOMES)},
            details={"outcome": ["Choice."]},
        )
    steps = [" ".join(str(step).split())[:300] for step in steps if str(step).strip()][:MAX_STEPS]
    organization = actor.organization
    task = without_secrets(task, organization=organization)
    steps = without_secrets(steps, organization=organization)
    details = without_secrets(details or {}, organization=organization)
    if scope is None:
        scope = Scope.AGENT if getattr(actor, "agent", None) is not None else Scope.USER
    source_ref = {"run_id": str(run_id), "trace_id": trace_id}
    if session_id is not None:
        source_ref["session_id"] = str(session_id)
    return memory_add(
        actor=actor,
        scope=scope,
        scope_id=scope_id,
        kind=Kind.EXPERIENCE,
        content=experience_content(task, steps, outcome, run_id),
        attributes={
            **details,
            "task": task,
            "steps": steps,
            "outcome": outcome,
            "run_id": str(run_id),
        },
        source_kind=SourceKind.SYSTEM,
        source_ref=source_ref,
        tags=["experience"],
        conversation_id=conversation_id,
        subject=subject,
    )


def experience_feedback(
    *, actor, memory: Memory, text: str, verdict: str, feedback_run_id
) -> Memory | None:
    """Attach the employee's next message to the experience as its feedback; a correction
    turns the outcome into a failure, an affirmation into a success (the recorded outcome is
    kept as `outcome_recorded`). Returns None when this feedback is already attached."""
    attributes = dict(memory.attributes or {})
    if attributes.get("feedback", {}).get("run_id") == str(feedback_run_id):
        return None
    attributes.setdefault("outcome_recorded", attributes.get("outcome"))
    text = without_secrets(" ".join(str(text or "").split()), organization=memory.organization)
    attributes["feedback"] = {
        "text": text[:MAX_FEEDBACK_CHARS],
        "verdict": verdict,
        "run_id": str(feedback_run_id),
    }
    if verdict == "correction":
        attributes["outcome"] = "failure"
    elif verdict == "affirmation":
        attributes["outcome"] = "success"
    return memory_update(
        actor=actor,
        memory=memory,
        expected_version=memory.version,
        reason=f"feedback from run {feedback_run_id} ({verdict})",
        attributes=attributes,
    )
