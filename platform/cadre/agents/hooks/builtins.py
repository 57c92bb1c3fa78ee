"""Built-in hooks: the input policy (governance), memory retrieval into the context, memory and
experience writing after the run, compaction (dedup and the session summary), and the default
subagent inheritance."""

from __future__ import annotations

import logging

from cadre.agents.hooks.registry import hook
from cadre.agents.runtime.records import bookkeeping

logger = logging.getLogger(__name__)


@hook(
    "on_init",
    "input_policy",
    description="Apply the organization's policy chain to the input "
    "(masking first). A no-op when no plugin of the chain checks input.",
)
def input_policy(ctx, config: dict) -> dict:
    # The verdict ("result") is applied by the runtime: a denial ends the run with a visible
    # refusal, otherwise the masked text replaces the input for the model, retrieval, the
    # context record and memory (see engine._apply_input_verdict).
    verdict = ctx.policy_check("input", ctx.input_text)
    if verdict is None:
        return {"applied": False, "reason": "no plugin of the chain checks input"}
    return {"applied": True, "result": verdict}


@hook(
    "assemble_context",
    "memory_retrieval",
    description="Retrieve memories under the agent's "
    "scopes for the input and record the ContextRecord.",
)
def memory_retrieval(ctx, config: dict) -> dict:
    if not ctx.input_text.strip() or not ctx.read_scope_keys():
        return {"memories": []}
    try:
        from cadre.memory.models import Memory
        from cadre.memory.selectors import context_record_write, memory_search

        on_behalf_of = {
            "run_id": ctx.run.pk,
            "step_id": ctx.step_index,
            "trace_id": ctx.run.trace_id,
        }
        has_memories = Memory.objects.filter(
            organization_id=ctx.run.organization_id,
            scope_key__in=ctx.read_scope_keys(),
            status=Memory.Status.ACTIVE,
        ).exists()
        if not has_memories:  # nothing to find: skip embedding the query, still record it
            # (one insert, committed by itself)
            record = context_record_write(
                actor=ctx.actor, query=ctx.input_text, hits=[], on_behalf_of=on_behalf_of
            )
            return {"memories": [], "context_record": record.pk}
        with bookkeeping():  # the search and its ContextRecord: one non-durable commit
            result = memory_search(
                actor=ctx.actor,
                query=ctx.input_text,
                top_k=int(config.get("top_k", 5)),
                scope_keys=ctx.read_scope_keys(),
                on_behalf_of=on_behalf_of,
            )
    except Exception as error:  # retrieval failing must not stop the conversation
        logger.warning("memory retrieval failed for run %s: %s", ctx.run.pk, error)
        return {"memories": [], "error": str(error)[:500]}
    memories, withheld = [], []
    for hit in result.hits:
        # Retrieved content passes the chain's "retrieved" stage (injection heuristics,
        # masking) before it joins the context; a denied memory is left out.
        verdict = ctx.policy_check("retrieved", hit.memory.content)
        if verdict is not None and verdict["action"] in ("deny", "require_confirmation"):
            withheld.append({"id": hit.memory.pk, "reason": verdict["reason"]})
            continue
        memories.append(
            {
                "id": hit.memory.pk,
                "version": hit.memory.version,
                "content": verdict["text"] if verdict else hit.memory.content,
                "scope": hit.memory.scope_key,
                "score": round(float(hit.score), 4),
            }
        )
    output = {
        "memories": memories,
        "context_record": result.context_record.pk if result.context_record else None,
    }
    if withheld:
        output["withheld"] = withheld
    return output


@hook(
    "process_memory",
    "memory_write",
    description="Extract memories from the turn and write "
    "them with provenance under the agent's writable scopes.",
)
def memory_write(run, config: dict) -> dict:
    from cadre.agents.runtime.engine import model_side
    from cadre.agents.runtime.grants import agent_actor
    from cadre.memory import services as memory_services
    from cadre.memory.models import scope_parts

    scope, scope_id = scope_parts(config.get("scope_key") or run.agent.memory_scope_key)
    # Memory is written from the model's side of the turn: masked placeholders, never the
    # originals the employee typed or was shown.
    written = memory_services.memory_add_from_messages(
        actor=agent_actor(run.agent),
        messages=[
            {"role": "user", "content": model_side(run.input)},
            {"role": "assistant", "content": model_side(run.output)},
        ],
        scope=scope,
        scope_id=scope_id,
        conversation_id=str(run.session_id),
        source_ref={"run_id": run.pk, "session_id": run.session_id, "trace_id": run.trace_id},
    )
    return {"written": len(written), "extractor": getattr(written, "extractor", "")}


@hook(
    "process_memory",
    "experience_record",
    description="Record the run's tool calls (arguments, result, outcome) as tool "
    "trajectories and the finished task (steps, outcome) as an experience; the next "
    "message's correction or approval becomes that experience's feedback.",
)
def experience_record(run, config: dict) -> dict:
    from cadre.agents.runtime.experience import record_run_experience

    return record_run_experience(run, config)


@hook(
    "compact",
    "memory_dedup",
    description="Run memory's dedup funnel (near duplicates, judge, conflict rule) on the "
    "memories this run wrote, so the next turn reads the merged state.",
)
def session_memory_dedup(run, config: dict) -> dict:
    from cadre.memory import services as memory_services
    from cadre.memory.models import Kind, Memory

    fresh = (
        Memory.objects.filter(
            organization_id=run.organization_id,
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
    from cadre.agents.runtime.compaction import session_compact

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
