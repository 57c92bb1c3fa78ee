"""Built-in hooks: the input policy (governance), memory retrieval into the context, memory
writing after the run, and the default subagent inheritance."""

from __future__ import annotations

import logging

from cadre.agents.hooks.registry import hook

logger = logging.getLogger(__name__)


@hook(
    "on_init",
    "input_policy",
    description="Apply the organization's policy chain to the input "
    "(masking first). A no-op until the governance policy chain is installed.",
)
def input_policy(ctx, config: dict) -> dict:
    try:
        from cadre.governance import policy  # the policy chain lands in its own issue
    except ImportError:
        return {"applied": False, "reason": "policy chain not installed"}
    check = getattr(policy, "policy_check_input", None)
    if check is None:
        return {"applied": False, "reason": "policy chain has no input check"}
    return {"applied": True, "result": check(run=ctx.run, text=ctx.input_text)}


@hook(
    "assemble_context",
    "memory_retrieval",
    description="Retrieve memories under the agent's "
    "scopes for the input and record the ContextRecord.",
)
def memory_retrieval(ctx, config: dict) -> dict:
    if not ctx.input_text.strip() or not ctx.read_scope_keys():
        return {"memories": []}
    from cadre.agents.runtime.engine import bookkeeping

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
            with bookkeeping():
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
    return {
        "memories": [
            {
                "id": hit.memory.pk,
                "version": hit.memory.version,
                "content": hit.memory.content,
                "scope": hit.memory.scope_key,
                "score": round(float(hit.score), 4),
            }
            for hit in result.hits
        ],
        "context_record": result.context_record.pk if result.context_record else None,
    }


@hook(
    "process_memory",
    "memory_write",
    description="Extract memories from the turn and write "
    "them with provenance under the agent's writable scopes.",
)
def memory_write(run, config: dict) -> dict:
    from cadre.agents.runtime.engine import agent_actor
    from cadre.memory import services as memory_services
    from cadre.memory.models import scope_parts

    scope, scope_id = scope_parts(config.get("scope_key") or run.agent.memory_scope_key)
    written = memory_services.memory_add_from_messages(
        actor=agent_actor(run.agent),
        messages=[
            {"role": "user", "content": run.input.get("text", "")},
            {"role": "assistant", "content": run.output.get("text", "")},
        ],
        scope=scope,
        scope_id=scope_id,
        conversation_id=str(run.session_id),
        source_ref={"run_id": run.pk, "session_id": run.session_id, "trace_id": run.trace_id},
    )
    return {"written": len(written), "extractor": getattr(written, "extractor", "")}


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
