"""Finishing a run: its final status, output and usage, its last events, and what follows
a finished run (delivery, after-run hooks)."""

from __future__ import annotations

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from cadre.agents.models import Agent, Run, RunEvent
from cadre.agents.runtime.lifecycle.services import on_run_finished
from cadre.agents.runtime.records.bookkeeping import relaxed_durability
from cadre.agents.runtime.records.delivery import notice_data
from cadre.agents.runtime.steps.run_context import RunContext


def finish_run(
    run: Run,
    ctx: RunContext | None,
    status: str,
    *,
    text: str = "",
    error: str = "",
    refused: str = "",
    refused_code: str = "",
    notice: str = "",
) -> None:
    """Record how the run ended (status, output, usage, its last events) and what follows in
    the same transaction (`on_run_finished`); nothing when it already ended. A run ending
    without a reply records `notice`, what the person is told (`delivery.NOTICES`; by default
    its status's own), and tells the chat with a `notice` event."""
    # The transcript keeps what the employee wrote and is shown (originals); the model's side
    # (placeholders) is kept next to it for later turns and for memory.
    # A delegated run's reply goes back to its parent's model, not to a person: it keeps the
    # placeholders (its session's vault is not the parent's).
    display = ctx.reidentify(text) if ctx is not None and text and not run.parent_id else text
    now = timezone.now()
    # The bookkeeping transaction (see records.bookkeeping), opened here: what on_run_finished
    # queues on its commit is handed over from this floor.
    with transaction.atomic():
        relaxed_durability()
        fields = {"status": status, "finished_at": now, "heartbeat_at": now}
        if ctx is not None:
            fields.update(
                tokens_in=ctx.tokens_in,
                tokens_out=ctx.tokens_out,
                tokens_cached=ctx.tokens_cached,
                cost=ctx.cost,
                step_count=ctx.next_index,
            )
            if ctx.model_text is not None and ctx.model_text != run.input.get("text", ""):
                fields["input"] = {**run.input, "model_text": ctx.model_text}
        if status == Run.Status.COMPLETED:
            fields["output"] = {"text": display}
            if display != text:
                fields["output"]["model_text"] = text
            if refused:
                fields["output"]["refused"] = refused
            if refused_code:  # "budget_exceeded"; a policy refusal has none
                fields["output"]["refused_code"] = refused_code
            text = display
        else:
            fields["output"] = {"notice": notice or status}
        if error:
            fields["error"] = error[:4000]
        updated = Run.objects.filter(pk=run.pk).exclude(status__in=Run.TERMINAL).update(**fields)
        if not updated:
            if ctx is not None:
                ctx.flush()
            return
        for name, value in fields.items():
            setattr(run, name, value)
        if ctx is not None:
            Agent.objects.filter(pk=run.agent_id).update(
                tokens_in=F("tokens_in") + ctx.tokens_in,
                tokens_out=F("tokens_out") + ctx.tokens_out,
                cost=F("cost") + ctx.cost,
            )
        events = []
        if status == Run.Status.COMPLETED:
            events.append(RunEvent(run_id=run.pk, kind="reply", data={"text": text}))
        else:
            events.append(RunEvent(run_id=run.pk, kind="notice", data=notice_data(run)))
        events.append(
            RunEvent(
                run_id=run.pk,
                kind="status",
                data={"status": status, **({"error": error} if error else {})},
            )
        )
        if ctx is not None:
            ctx.flush(events)
        else:
            RunEvent.objects.bulk_create(events)
        on_run_finished(run)


def run_fail(run_id: int, error: str) -> None:
    """Give up on a run (retries exhausted)."""
    run = Run.objects.filter(pk=run_id).first()
    if run is not None and not run.is_terminal:
        finish_run(run, None, Run.Status.FAILED, error=error)
