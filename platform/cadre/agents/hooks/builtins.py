"""Built-in hooks: memory retrieval into the context (each memory through the policy chain's
"retrieved" stage), memory and experience writing after the run, compaction (dedup and the
session summary), and the default subagent inheritance.

The chain's input stage is not a hook: the runtime runs it for every run (its input gate, in
runtime/steps/assembly.py), so no template can switch it off."""

from __future__ import annotations

import json
import logging

from django.db.models import Q
from django.utils import timezone

from cadre.agents.hooks import prefetched
from cadre.agents.hooks.compaction import session_compact
from cadre.agents.hooks.corrections import acknowledge, chat_correction
from cadre.agents.hooks.experience import record_run_experience, tool_calls
from cadre.agents.hooks.registry import hook
from cadre.agents.runtime.records.grants import agent_actor, retrieval_kinds
from cadre.agents.runtime.records.runs import speaker
from cadre.governance.masking.policy import PLACEHOLDER
from cadre.governance.masking.vault import reidentify
from cadre.memory import selectors as memory_selectors
from cadre.memory import services as memory_services
from cadre.memory.models import Kind, Memory, Scope, Verification, scope_parts
from cadre.memory.selectors import memory_queryset, scope_keys_memo

logger = logging.getLogger(__name__)


def memory_for_context(ctx, content: str) -> tuple[str | None, str]:
    """Memory text as it may enter this run's model context, through the chain's "retrieved"
    stage: injection heuristics, and masking with this session's vault (the value gets the
    placeholder the session already uses). (text, "") — (masked text, "masked: <why>") when
    the chain changed it — or (None, reason) when withheld."""
    verdict = ctx.policy_check("retrieved", content)
    if verdict is None:
        return content, ""
    if verdict["action"] in ("deny", "require_confirmation"):
        return None, verdict["reason"] or "withheld by policy"
    if verdict["text"] != content:
        return verdict["text"], f"masked: {verdict['reason'] or 'by policy'}"[:500]
    return content, ""


def _sent(entry: dict, text: str, masked: str) -> dict:
    """A memory entry as it joins the context: its text, and why policy masked it if it did
    (recorded with the model call: the memory's trail shows it)."""
    return {**entry, "content": text, **({"masked": masked} if masked else {})}


def shared_memories_for_context(ctx, shared: list[dict]) -> tuple[list[dict], list[dict]]:
    """The memories a delegating run shared (stored as said), checked like retrieved ones:
    (those that may enter the context, those withheld)."""
    kept, withheld = [], []
    for rank, item in enumerate(shared, start=1):
        text, reason = memory_for_context(ctx, item.get("content", ""))
        entry = {"id": item.get("id"), "scope": item.get("scope", ""), "rank": rank}
        if text is None:
            withheld.append({**entry, "source": "shared", "reason": reason})
        else:
            kept.append(_sent(entry, text, reason))
    return kept, withheld


@hook(
    "assemble_context",
    "memory_retrieval",
    description="Retrieve memories under the agent's scopes for the input; "
    "each passes the policy chain (masking) before it joins the context.",
)
def memory_retrieval(ctx, config: dict) -> dict:
    # Which of these the model call is actually given (and which the budget drops) is
    # recorded per model call, in its ContextRecord (see steps/model.model_step).
    if not ctx.input_text.strip() or not ctx.read_scope_keys():
        return {"memories": [], "passed_over": []}
    try:
        with scope_keys_memo():  # the agent's reach, computed once for both reads
            has_memories = (
                memory_queryset(ctx.actor, scope_keys=ctx.read_scope_keys())
                .filter(status=Memory.Status.ACTIVE, verification=Verification.VERIFIED)
                .exists()
            )
            if not has_memories:  # nothing to find: skip embedding the query
                return {"memories": [], "passed_over": []}
            # A pool prefetched after the previous turn, when this input is on its topic (read
            # again and ranked now as the full search ranks, see runtime/lifecycle/prefetch.py);
            # otherwise the full search.
            result, query_vector = prefetched.take(ctx, int(config.get("top_k", 5)))
            if result is None:
                result = memory_selectors.memory_search(
                    actor=ctx.actor,
                    query=ctx.input_text,
                    top_k=int(config.get("top_k", 5)),
                    scope_keys=ctx.read_scope_keys(),
                    # What people stated; the template's memory_policy.retrieve_kinds may add
                    # what runs recorded (experience, tool trajectories).
                    kinds=retrieval_kinds(ctx.run.grants),
                    passed_over=True,
                    query_vector=query_vector,
                )
    except Exception as error:  # retrieval failing must not stop the conversation
        logger.warning("memory retrieval failed for run %s: %s", ctx.run.pk, error)
        return {"memories": [], "error": str(error)[:500]}
    memories, withheld = [], []
    for rank, hit in enumerate(result.hits, start=1):
        entry = {
            "id": hit.memory.pk,
            "version": hit.memory.version,
            "scope": hit.memory.scope_key,
            "rank": rank,
            "score": round(float(hit.score), 4),
            "components": json.loads(json.dumps(hit.components, default=float)),
        }
        # Memory holds what was said; the model gets it masked (or not at all when denied).
        text, reason = memory_for_context(ctx, hit.memory.content)
        if text is None:
            withheld.append({**entry, "source": "retrieval", "reason": reason})
        else:
            memories.append(_sent(entry, text, reason))
    output: dict = {"memories": memories}
    if withheld:
        output["withheld"] = withheld
    # Candidates diversity passed over: recorded with the model call, never sent.
    output["passed_over"] = [
        {
            "id": hit.memory.pk,
            "version": hit.memory.version,
            "score": round(float(hit.score), 4),
            "components": json.loads(json.dumps(hit.components, default=float)),
            "reason": "diversity (MMR): too alike a memory already chosen",
        }
        for hit in result.passed_over
    ]
    return output


@hook(
    "assemble_context",
    "standing_memories",
    default=False,  # a template opts in: it sends these tokens on every turn
    description="Send the user's long-lived memories (preferences and requirements by default) "
    "on every turn, oldest first, each through the policy chain; they change only when the "
    "memories do, so the prompt prefix stays cacheable.",
)
def standing_memories(ctx, config: dict) -> dict:
    if not ctx.read_scope_keys():
        return {"standing": []}
    standing, withheld = [], []
    for memory in standing_rows(ctx.actor, ctx.read_scope_keys(), config):
        entry = {"id": memory.pk, "version": memory.version, "scope": memory.scope_key}
        text, reason = memory_for_context(ctx, memory.content)
        if text is None:
            withheld.append({**entry, "source": "standing", "reason": reason})
        else:
            standing.append(_sent(entry, text, reason))
    output: dict = {"standing": standing}
    if withheld:
        output["withheld"] = withheld
    return output


def standing_rows(actor, scope_keys: list[str], config: dict):
    """The memories the standing_memories hook sends to `actor` (the run's agent) under
    `scope_keys` (before the policy chain), oldest first; read through the memory gate."""
    if not scope_keys:
        return []
    kinds = config.get("kinds") or [Kind.PREFERENCE, Kind.REQUIREMENT]
    return (
        memory_queryset(actor, scope_keys=scope_keys)
        .filter(
            status=Memory.Status.ACTIVE,
            # A shared memory waiting for review is sent to no model (as search never finds it).
            verification=Verification.VERIFIED,
            kind__in=kinds,
        )
        .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now()))
        .order_by("pk")
        .only("pk", "version", "scope_key", "content")[: int(config.get("limit", 20))]
    )


def turn_as_said(run) -> tuple[str, str]:
    """A finished run's input and reply as the people involved wrote and read them.

    A person's run keeps the originals (`text`; the model's masked side is `model_text`).
    A delegated run was written by its parent's model and answers it, so both carry
    placeholders: the input's from the parent's session, the reply's from its own."""
    said, answered = run.input.get("text", ""), run.output.get("text", "")
    if run.parent_id and PLACEHOLDER.search(said):
        parent_session = (
            type(run).objects.values_list("session_id", flat=True).get(pk=run.parent_id)
        )
        said = reidentify(
            said, organization=run.organization, conversation_key=f"session:{parent_session}"
        )
    if PLACEHOLDER.search(answered):
        answered = reidentify(
            answered, organization=run.organization, conversation_key=f"session:{run.session_id}"
        )
    return said, answered


@hook(
    "process_memory",
    "memory_write",
    description="Extract memories from the turn and write "
    "them with provenance under the agent's writable scopes.",
)
def memory_write(run, config: dict) -> dict:
    scope, scope_id = scope_parts(config.get("scope_key") or run.agent.memory_scope_key)
    # What the employee states about themselves (preferences, requirements, facts) is theirs:
    # it goes to their personal scope and follows them to their other agents (those whose
    # template reads the "user" scope). When someone else speaks to this agent, or the
    # template keeps it here (`personal_scope: "agent"`), it stays in the agent's scope —
    # with the speaker as its subject, who sees and can correct it either way (a delegated
    # or published request speaks for the person at its origin, see records.runs.speaker).
    subject = speaker(run)
    personal = None
    if config.get("personal_scope", Scope.USER) == Scope.USER and (
        subject.pk == run.agent.member_id
    ):
        personal = (Scope.USER, subject.pk)
    # Memory is written from the user's side of the turn — what was actually said — never
    # from the model's placeholders, which mean something only in this session's vault.
    said, answered = turn_as_said(run)
    # A correction ("No, that's wrong: our discount limit is 12%, not 10%") supersedes the
    # statements it contradicts, and the person is told (hooks/corrections.py); a turn that
    # corrected memory is not extracted a second time.
    corrected = chat_correction(run, said)
    if corrected is not None and corrected["superseded"]:
        return {"written": 0, "extractor": "", "written_memories": [], "feedback": corrected}
    written = memory_services.memory_add_from_messages(
        actor=agent_actor(run.agent),
        messages=[
            {"role": "user", "content": said},
            {"role": "assistant", "content": answered},
        ],
        scope=scope,
        scope_id=scope_id,
        personal_scope=personal,
        subject=subject,
        conversation_id=str(run.session_id),
        source_ref={"run_id": run.pk, "session_id": run.session_id, "trace_id": run.trace_id},
        # What the model stored through the memory tool this turn is not stored a second time.
        already_written=remembered_by_tool(run),
    )
    if corrected is not None and not written:
        acknowledge(run, corrected)  # nothing stored said otherwise, and nothing else was kept
    return {
        **({"feedback": corrected} if corrected is not None else {}),
        "written": len(written),
        "extractor": getattr(written, "extractor", ""),
        # Ids only (the transcript links them); the text stays in memory, where it can be
        # corrected and deleted.
        "written_memories": [
            {"id": memory.pk, "scope": memory.scope_key, "kind": memory.kind} for memory in written
        ],
    }


def remembered_by_tool(run) -> list[str]:
    """What the run's memory_write calls stored (their content as said), successful ones."""
    return [
        str(call["arguments"].get("content", ""))
        for call in tool_calls(run)
        if call["tool"] == "memory_write" and not call["error"]
    ]


@hook(
    "process_memory",
    "experience_record",
    description="Record the run's tool calls (arguments, result, outcome) as tool "
    "trajectories and the finished task (steps, outcome) as an experience; the next "
    "message's correction or approval becomes that experience's feedback.",
)
def experience_record(run, config: dict) -> dict:
    return record_run_experience(run, config)


@hook(
    "compact",
    "memory_dedup",
    description="Run memory's dedup funnel (near duplicates, judge, conflict rule) on the "
    "memories this run wrote, so the next turn reads the merged state.",
)
def session_memory_dedup(run, config: dict) -> dict:
    reader = memory_selectors.system_reader(
        run.organization,
        job="memory dedup",
        reason="dedup the memories a run wrote (read by the funnel, shown to no one)",
    )
    fresh = (
        memory_selectors.memory_queryset(reader)
        .filter(
            conversation_id=str(run.session_id),
            status=Memory.Status.ACTIVE,
            created_at__gte=run.created_at,
        )
        .exclude(kind__in=[Kind.EXPERIENCE, Kind.TOOL_TRAJECTORY])  # one record per run
        .order_by("pk")
    )
    decisions = {}
    for memory in fresh:
        outcome = memory_services.memory_dedup(memory=memory)
        decisions[str(memory.pk)] = {
            key: outcome[key] for key in ("decision", "kept", "judge") if key in outcome
        }
    return {"checked": len(decisions), "decisions": decisions}


@hook(
    "compact",
    "session_summary",
    description="When the session's history passes its share of the context budget, "
    "summarise the older turns with provenance labels (user requirement, model assumption, "
    "tool fact, superseded plan) and the turns each covers; the next call reads the summary.",
)
def session_summary(run, config: dict) -> dict:
    return session_compact(run, config)


@hook(
    "on_spawn",
    "inherit_narrowed",
    description="A subagent gets the tools, memory scopes and "
    "budget the parent asked for, within the parent's own.",
)
def inherit_narrowed(parent_run, requested: dict, config: dict) -> dict:
    budget = dict(parent_run.grants.get("budget", {}))
    share = float(config.get("budget_share", 0.5))
    for key in ("max_tokens", "max_steps"):
        if key in budget:
            budget[key] = max(1, int(budget[key] * share))
    return {
        "tools": requested.get("tools", parent_run.grants.get("tools", {})),
        "read_scopes": requested.get("read_scopes", []),
        "write_scopes": requested.get("write_scopes", []),
        "budget": budget,
    }
