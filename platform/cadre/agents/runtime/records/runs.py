"""A run as the runtime reads it: loading it, its trace, what its model calls are charged to,
why it may not run, its input and output as the model saw them, and what a wait for its end is
resolved with."""

from __future__ import annotations

import re
from contextlib import contextmanager
from functools import partial

from django.db import transaction
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from cadre import queues
from cadre.agents.models import Agent, Deployment, Run, Wait
from cadre.governance.budgets import account_for_member
from cadre.tenancy.models import Member

FINISHED_KEY = re.compile(r"^run:(\d+):finished$")

# The Celery tasks of cadre.agents.tasks the runtime queues, by name (the task module imports
# the runtime, never the reverse); settings.CADRE_TASK_QUEUES routes them.
RUN_EXECUTE_TASK = "cadre.agents.tasks.run_execute"
RUN_AFTER_TASK = "cadre.agents.tasks.run_after"
PREFETCH_TASK = "cadre.agents.tasks.prefetch_next_turn"
# Redis broker priorities run 0 (first) to 9 (last); tasks without one count as 0. The after-run
# hooks have a queue of their own; where one queue serves both (CADRE_AFTER_RUN_QUEUE set to the
# runs queue) the priority still puts answering first.
AFTER_RUN_PRIORITY = 9


def execution_enqueue(run_id: int) -> None:
    """Execute the run in a worker once the current transaction commits (the `runs` queue)."""
    # Handed straight to the kernel, with no frame of this floor under the task: where tasks
    # run in process (eager), the run executes from the lifecycle down, not from records up.
    transaction.on_commit(partial(queues.enqueue, RUN_EXECUTE_TASK, run_id))


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


def run_refusal(run: Run) -> str | None:
    """Why the run may not execute now (its member, agent or deployment stopped), or None."""
    if run.member.status != Member.Status.ACTIVE:
        return "the member is deactivated"
    if run.agent.status != Agent.Status.ACTIVE:
        return "the agent is stopped"
    if run.agent.deployment.status == Deployment.Status.STOPPED:
        return "the deployment is stopped"
    return None


def run_account(run: Run):
    """What the run's model calls are charged to: its member (and department), its template."""
    return account_for_member(run.member, template_id=run.version.template_id, run_id=run.pk)


@contextmanager
def run_trace(run: Run):
    """Make the run's stored trace id the current one, so every hop shares it."""
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


def model_side(record: dict) -> str:
    """A run's input or output as the model sees it: masked text when masking changed it."""
    return record.get("model_text", record.get("text", ""))


# How far `speaker` follows delegations and publications back (each is bounded far below).
MAX_UPSTREAM = 16


def speaker(run: Run) -> Member:
    """The member whose words the run's input is. A person's turn (and an event's run): the
    run's member. A delegated run's input was written by the parent's model for whoever spoke
    to the root of the chain; a subscription's by the publishing run's model for whoever spoke
    to it: followed back to that person (the run's member when the upstream run is gone)."""
    current = run
    for _ in range(MAX_UPSTREAM):
        if current.parent_id:
            upstream = current.root_id or current.parent_id  # the chain's first run
        elif current.trigger == "subscription":
            upstream = (current.input.get("from") or {}).get("run")
        else:
            return current.member
        found = (
            Run.objects.select_related("member")
            .filter(organization_id=run.organization_id, pk=upstream)
            .exclude(pk=current.pk)
            .first()
        )
        if found is None:
            break
        current = found
    return run.member


def finished_payload(run: Run) -> dict:
    """What a delegating run's wait is resolved with when `run` (its child) finished."""
    # The reply goes to the delegating agent's model: the model's side of it (placeholders).
    return {"status": run.status, "reply": model_side(run.output), "error": run.error}


def early_resolution(wait: Wait) -> dict | None:
    """A wait for something that already happened (a child run that finished first)."""
    match = FINISHED_KEY.match(wait.key)
    if match:
        child = Run.objects.filter(pk=int(match[1])).first()
        if child is not None and child.is_terminal:
            return finished_payload(child)
    return None
