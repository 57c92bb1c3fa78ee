"""The run loop: context, model call, tool calls, until the model replies; and how a loop ended.

Every model call, tool call, hook and wait is a persisted step (steps/run_context.py). A step is
written `started` before its work and `completed` with its output after it. The loop is
deterministic given the outputs of completed steps, so executing a run again — a Celery task
redelivered after its worker died (acks_late + reject_on_worker_lost), or a run resumed after a
wait — replays completed steps from their stored outputs and carries on from the first step
that did not complete. Tool calls carry the idempotency key `run:<id>:step:<n>`; the executor
records it with the side effect (see steps/executor.py), so a call that completed its effect but
not its step returns the recorded result on retry.

The loop does not start or finish runs: the lifecycle floor locks and loads the run, calls
`execute`, and finishes the run with the `Outcome` it returns.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from django.db import OperationalError

from cadre.agents.models import MODEL_FAILURE, Run, Step
from cadre.agents.runtime.records.bookkeeping import bookkeeping, emit
from cadre.agents.runtime.records.delivery import budget_refusal
from cadre.agents.runtime.records.runs import run_account
from cadre.agents.runtime.steps.assembly import assemble
from cadre.agents.runtime.steps.executor import handle_tool_call
from cadre.agents.runtime.steps.model import checked_reply, model_step, run_provider, tool_specs
from cadre.agents.runtime.steps.run_context import (
    NonDeterministicReplay,
    RunContext,
    RunPaused,
    RunRefused,
    RunStopped,
)
from cadre.llm import BudgetExceeded, ProviderError
from cadre.llm.metering import charged_to

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Outcome:
    """How an execution ended: the run's status (`waiting` when it paused, otherwise the one to
    finish it with) and what the finish records."""

    status: str
    text: str = ""
    error: str = ""
    refused: str = ""
    refused_code: str = ""
    notice: str = ""  # what the person is told of a run ending without a reply (delivery.NOTICES)


def run_loop(ctx: RunContext) -> str:
    """Assemble the context, then call the model and its tools until it replies; the reply."""
    messages, manifest = assemble(ctx)
    provider, prices = run_provider(ctx)
    tools = tool_specs(ctx)
    while True:
        result = model_step(ctx, provider, prices, messages, tools, manifest)
        if not result.tool_calls:
            return checked_reply(ctx, result.text)
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


def execute(ctx: RunContext) -> Outcome:
    """Run the loop for `ctx`'s run, charged to its member and template; how it ended."""
    run = ctx.run
    try:
        with charged_to(run_account(run)):
            text = run_loop(ctx)
    except RunPaused as paused:
        emit(run.pk, "status", {"status": Run.Status.WAITING, "key": str(paused)})
        return Outcome(Run.Status.WAITING)
    except RunRefused as refused:
        return Outcome(Run.Status.COMPLETED, text=refused.reply, refused=refused.reason)
    except RunStopped as stopped:
        return Outcome(stopped.status, error=stopped.message, notice=stopped.notice)
    except NonDeterministicReplay as error:
        return Outcome(Run.Status.FAILED, error=f"cannot resume: {error}")
    except BudgetExceeded as exceeded:
        # Refused before the model call: a visible reply, no retry.
        return _budget_refused(run, exceeded)
    except ProviderError as error:
        # The client already retried within the call's time budget: the run fails now, with
        # the endpoint's own words, rather than after minutes of retries.
        return Outcome(Run.Status.FAILED, error=f"{MODEL_FAILURE}{error}")
    except OperationalError:
        raise  # transient: the task retries and the run resumes where it stopped
    except Exception as error:  # a bug or bad data: fail visibly, do not retry forever
        logger.exception("run %s failed", run.pk)
        return Outcome(Run.Status.FAILED, error=f"{type(error).__name__}: {error}")
    return Outcome(Run.Status.COMPLETED, text=text)


def _budget_refused(run: Run, exceeded: BudgetExceeded) -> Outcome:
    with bookkeeping():
        Step.objects.filter(
            run_id=run.pk, kind=Step.Kind.MODEL_CALL, status=Step.Status.STARTED
        ).update(status=Step.Status.FAILED, error=exceeded.message[:4000])
    return Outcome(
        Run.Status.COMPLETED,
        text=budget_refusal(exceeded.message),
        refused=exceeded.message,
        refused_code=exceeded.code,
    )
