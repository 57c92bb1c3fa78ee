"""A run's execution context: its steps (replayed from their stored outputs, or done and
recorded), its waits, its grants and its policy chain; and the exceptions that end or pause an
execution."""

from __future__ import annotations

import json
import time
from datetime import timedelta
from decimal import Decimal

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from cadre.agents.models import Run, RunEvent, Step, Wait
from cadre.agents.runtime.records.bookkeeping import bookkeeping, emit
from cadre.agents.runtime.records.crashpoints import maybe_crash
from cadre.agents.runtime.records.grants import agent_actor, scope_keys_for
from cadre.agents.runtime.records.runs import early_resolution
from cadre.governance.masking.policy import PLACEHOLDER
from cadre.governance.masking.vault import reidentify
from cadre.governance.policy import policy_check_run, resolve_chain, stage_handled
from cadre.observability import tracer


class RunPaused(Exception):
    """The run is waiting (a confirmation or an external event); its worker stops here."""


class RunStopped(Exception):
    """The run must not continue (cancelled, member deactivated, budget spent). `notice` names
    what the person is told (a `records.delivery.NOTICES` key; the status's own when empty)."""

    def __init__(self, status: str, message: str, *, notice: str = ""):
        super().__init__(message)
        self.status = status
        self.message = message
        self.notice = notice


class RunRefused(Exception):
    """The policy chain refused the input: the run ends with a visible refusal, and nothing
    reached the model."""

    def __init__(self, reason: str, retry_after: int | None = None):
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after

    @property
    def reply(self) -> str:
        """What the person is told, in the active language (the run's member's)."""
        if self.retry_after:
            return ngettext(
                "I can't take this message right now: %(reason)s. Please try again in "
                "%(seconds)s second.",
                "I can't take this message right now: %(reason)s. Please try again in "
                "%(seconds)s seconds.",
                self.retry_after,
            ) % {"reason": self.reason, "seconds": self.retry_after}
        return _("I can't pass this message on to the model: %(reason)s.") % {"reason": self.reason}


# Steps recorded under an earlier name: a run paused before an upgrade resumes with them.
RENAMED_STEPS = {"on_init:input_policy": "input_policy"}

# In a step's output: why its tool call failed (its effect failed, or it could not be tried).
# Taken off the output; the step is recorded `failed` with it as the error, and, finished, is
# replayed from its output like a completed one (the model already read that result).
FAILED_KEY = "_failed"


class NonDeterministicReplay(Exception):
    """A replayed step does not match what the loop asks for: the run cannot resume safely."""


class RunContext:
    def __init__(self, run: Run, *, first_attempt: bool = False):
        self.run = run
        self.agent = run.agent
        self.version = run.version
        self.member = run.member
        self.actor = agent_actor(self.agent)
        # A run's first attempt has no steps yet: nothing to replay, nothing to load.
        self.steps = (
            {} if first_attempt else {step.index: step for step in run.steps.select_related("wait")}
        )
        self.next_index = 0
        self.step_index = 0
        self.tokens_in = 0
        self.tokens_out = 0
        self.tokens_cached = 0
        self.cost = Decimal(0)
        self.model_calls = 0
        self._scope_cache: dict[str, list[str]] = {}
        # The input as the model may see it (masked by the input policy), once on_init ran.
        self.model_text: str | None = None
        self._policy_chain = None
        # The organization's MCP servers by name, looked up once per execution (steps/executor.py).
        self.mcp_servers: dict = {}
        # Completed hooks, a model call's completion and their events, waiting for the run's
        # next write (see `step`).
        self._pending_new: list[Step] = []
        self._pending_done: list[Step] = []
        self._pending_events: list[RunEvent] = []

    @property
    def input_text(self) -> str:
        """The input for the model and for retrieval: masked once the input policy ran."""
        if self.model_text is not None:
            return self.model_text
        return _input_for_model(self.run)

    @property
    def conversation_key(self) -> str:
        """The masking vault's scope: placeholders are consistent within a session."""
        return f"session:{self.run.session_id}"

    def policy_chain(self):
        """The organization's and template's policy chain, resolved once per execution."""
        if self._policy_chain is None:
            self._policy_chain = resolve_chain(
                self.run.organization, getattr(self.version, "policy_chain_id", None)
            )
        return self._policy_chain

    def policy_check(self, stage: str, text: str) -> dict | None:
        """The chain's verdict on `text` at `stage`, or None when no plugin looks at it.
        Call it inside a step, so a replayed run reuses the stored verdict."""
        chain = self.policy_chain()
        if not text or not stage_handled(chain, stage):
            return None
        return policy_check_run(
            run=self.run, stage=stage, text=text, step_index=self.step_index, chain=chain
        )

    def reidentify(self, value):
        """`value` with this conversation's placeholders replaced by the original values —
        for what leaves the model's side: tool arguments and the reply the employee sees."""
        if isinstance(value, str):
            if not PLACEHOLDER.search(value):
                return value
            return reidentify(
                value, organization=self.run.organization, conversation_key=self.conversation_key
            )
        if isinstance(value, dict):
            return {key: self.reidentify(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self.reidentify(item) for item in value]
        return value

    @property
    def grants(self) -> dict:
        return self.run.grants

    def read_scope_keys(self) -> list[str]:
        if "read" not in self._scope_cache:
            self._scope_cache["read"] = scope_keys_for(
                self.agent, self.grants.get("read_scopes", [])
            )
        return self._scope_cache["read"]

    def write_scope_key(self, scope: str) -> str | None:
        if scope not in self.grants.get("write_scopes", []):
            return None
        keys = scope_keys_for(self.agent, [scope])
        return keys[0] if keys else None

    def key(self, index: int) -> str:
        return f"run:{self.run.pk}:step:{index}"

    # --- steps ------------------------------------------------------------------------

    def _check_not_cancelled(self) -> None:
        """One query: a heartbeat for the live run, nothing if it was cancelled meanwhile."""
        alive = (
            Run.objects.filter(pk=self.run.pk)
            .exclude(status=Run.Status.CANCELLED)
            .update(heartbeat_at=timezone.now())
        )
        if not alive:
            raise RunStopped(Run.Status.CANCELLED, "cancelled")

    def _replayed(self, index: int, kind: str, name: str) -> Step | None:
        existing = self.steps.get(index)
        if existing is not None and (
            existing.kind != kind or RENAMED_STEPS.get(existing.name, existing.name) != name
        ):
            raise NonDeterministicReplay(
                f"step {index} was {existing.kind}:{existing.name}, now {kind}:{name}"
            )
        return existing

    # Completion fields a step's final write sets.
    _DONE_FIELDS = (
        "status",
        "error",
        "output",
        "completed_at",
        "duration_ms",
        "tokens_in",
        "tokens_out",
        "tokens_cached",
        "tokens_cache_write",
        "cost",
    )

    def flush(self, events: list[RunEvent] = ()) -> None:
        """Write what is waiting to be recorded (inside the caller's transaction): completed
        hooks, a model call's completion, their events, then `events`."""
        if self._pending_new:
            Step.objects.bulk_create(self._pending_new)
        for step in self._pending_done:
            step.save(update_fields=self._DONE_FIELDS)
        events = [*self._pending_events, *events]
        if events:
            RunEvent.objects.bulk_create(events)
        self._pending_new, self._pending_done, self._pending_events = [], [], []

    def record_event(self, kind: str, data: dict) -> None:
        """A run event written with the run's next write (no commit of its own)."""
        self._pending_events.append(RunEvent(run_id=self.run.pk, kind=kind, data=data))

    @property
    def has_pending(self) -> bool:
        return bool(self._pending_new or self._pending_done or self._pending_events)

    def _flush_now(self) -> None:
        if self.has_pending:
            with bookkeeping():
                self.flush()

    def step(self, kind: str, name: str, payload: dict, perform) -> dict:
        """Run `perform(step)` as step n, or return step n's stored output if it completed.

        `perform` returns the output dict; a "_usage" entry ({input_tokens, output_tokens,
        cached_input_tokens, cache_write_tokens, cost}) is moved onto the step's token and
        cost columns.

        Model and tool calls are written `started` before their work. A hook is written
        once, completed, with the run's next write (the next model or tool call, a wait or
        the finish, which follow at once): the hooks before a model call share its commit.
        A model call's completion is recorded the same way. If the worker dies in between,
        the redelivered run does that work again — hooks only read and decide (what they
        record on the side, policy decisions and context records, is recorded again), and a
        tool call's effect never repeats: it is keyed and recorded durably by the executor.
        """
        index = self.next_index
        self.next_index += 1
        self.step_index = index
        step = self._replayed(index, kind, name)
        if step is not None and (
            step.status == Step.Status.COMPLETED
            or (step.status == Step.Status.FAILED and kind == Step.Kind.TOOL_CALL)
        ):
            self._count(step)
            return step.output
        slow = kind != Step.Kind.HOOK
        if step is None and not slow:  # a hook: written once, completed (see below)
            step = Step(
                run_id=self.run.pk,
                index=index,
                kind=kind,
                name=name,
                idempotency_key=self.key(index),
                input=payload,
                started_at=timezone.now(),
            )
        else:
            with bookkeeping():
                if slow:  # slow, or with effects: beat the heart, check for cancellation
                    self._check_not_cancelled()
                if self._pending_new:  # earlier steps first: ids follow the run's order
                    Step.objects.bulk_create(self._pending_new)
                    self._pending_new = []
                if step is None:
                    step = Step.objects.create(
                        run_id=self.run.pk,
                        index=index,
                        kind=kind,
                        name=name,
                        idempotency_key=self.key(index),
                        input=payload,
                    )
                    self.steps[index] = step
                else:  # started before a crash: do it again (effects are keyed, see executor)
                    step.attempts += 1
                    step.started_at = timezone.now()
                    step.save(update_fields=["attempts", "started_at"])
                started = [
                    RunEvent(
                        run_id=self.run.pk,
                        kind="step",
                        data={"index": index, "kind": kind, "name": name, "status": "started"},
                    )
                ]
                self.flush(started if slow else [])
        started = time.monotonic()
        with tracer().start_as_current_span(
            f"agent.{kind}",
            attributes={
                "cadre.run_id": self.run.pk,
                "cadre.step": index,
                "cadre.step_name": name,
            },
        ):
            output = perform(step)
        maybe_crash(kind, name)
        usage = output.pop("_usage", None) or {}
        # A tool call whose effect failed (`FAILED_KEY`) is finished, and failed.
        failure = output.pop(FAILED_KEY, None)
        step.status = Step.Status.FAILED if failure else Step.Status.COMPLETED
        step.error = str(failure or "")[:4000]
        step.output = output
        step.completed_at = timezone.now()
        step.duration_ms = int((time.monotonic() - started) * 1000)
        step.tokens_in = usage.get("input_tokens", 0)
        step.tokens_out = usage.get("output_tokens", 0)
        step.tokens_cached = usage.get("cached_input_tokens", 0)
        step.tokens_cache_write = usage.get("cache_write_tokens", 0)
        step.cost = Decimal(str(usage.get("cost", 0)))
        event = RunEvent(
            run_id=self.run.pk,
            kind="step",
            data={
                "index": index,
                "kind": kind,
                "name": name,
                "status": step.status,
                "duration_ms": step.duration_ms,
            },
        )
        events = [event]
        if failure and "message_id" not in output:
            # The chat says a failed effect (`effect` events); an agent message that failed
            # told it already (`delivery.message_outcome`).
            events.append(
                RunEvent(
                    run_id=self.run.pk,
                    kind="effect",
                    data={"tool": name, "step": index, "status": "failed", "reason": step.error},
                )
            )
        if step.pk is None:  # a hook: inserted, completed, with the run's next write
            self._pending_new.append(step)
            self.steps[index] = step
            self._pending_events.append(event)
        elif kind == Step.Kind.MODEL_CALL:  # recorded with the run's next write
            self._pending_done.append(step)
            self._pending_events.append(event)
        else:
            with bookkeeping():
                self.flush(events)
                step.save(update_fields=self._DONE_FIELDS)
        self._count(step)
        return output

    def _count(self, step: Step) -> None:
        self.tokens_in += step.tokens_in
        self.tokens_out += step.tokens_out
        self.tokens_cached += step.tokens_cached
        self.cost += step.cost
        if step.kind == Step.Kind.MODEL_CALL:
            self.model_calls += 1

    def wait(
        self, kind: str, key: str | None, details: dict, *, timeout_seconds: int, on_timeout: str
    ) -> dict:
        """A wait step: pause the run until its Wait is resolved (or expires); then return
        the resolution payload ({"timeout": true, …} when it expired and the policy is
        "continue")."""
        index = self.next_index
        self.next_index += 1
        self.step_index = index
        name = f"{kind}:{details.get('tool', '')}".rstrip(":")
        step = self._replayed(index, Step.Kind.WAIT, name)
        if step is not None and step.status == Step.Status.COMPLETED:
            return step.output
        self._flush_now()
        self._check_not_cancelled()
        if step is None:
            with transaction.atomic():
                step = Step.objects.create(
                    run_id=self.run.pk,
                    index=index,
                    kind=Step.Kind.WAIT,
                    name=name,
                    idempotency_key=self.key(index),
                    input=details,
                    status=Step.Status.WAITING,
                )
                Wait.objects.create(
                    organization_id=self.run.organization_id,
                    run_id=self.run.pk,
                    step=step,
                    kind=kind,
                    key=key or self.key(index),
                    details=details,
                    deadline=timezone.now() + timedelta(seconds=timeout_seconds),
                    on_timeout=on_timeout,
                )
            self.steps[index] = step
            emit(
                self.run.pk,
                "wait",
                {"index": index, "kind": kind, "key": key or self.key(index), "details": details},
            )
        maybe_crash(Step.Kind.WAIT, name)
        with transaction.atomic():
            wait = Wait.objects.select_for_update().get(step_id=step.pk)
            if wait.status == Wait.Status.PENDING:
                early = early_resolution(wait)
                if early is not None:
                    Wait.objects.filter(pk=wait.pk).update(
                        status=Wait.Status.RESOLVED, payload=early, resolved_at=timezone.now()
                    )
                    wait.status, wait.payload = Wait.Status.RESOLVED, early
            if wait.status == Wait.Status.PENDING:
                # Only a run still marked running goes to waiting (not a cancelled one).
                Run.objects.filter(pk=self.run.pk, status=Run.Status.RUNNING).update(
                    status=Run.Status.WAITING
                )
        # Raised outside the atomic block, which must commit the status change.
        if wait.status == Wait.Status.PENDING:
            raise RunPaused(wait.key)
        if wait.status == Wait.Status.CANCELLED:
            raise RunStopped(Run.Status.CANCELLED, "the wait was cancelled")
        output = dict(wait.payload)
        if wait.status == Wait.Status.EXPIRED:
            if wait.on_timeout == Wait.OnTimeout.FAIL:
                raise RunStopped(
                    Run.Status.FAILED, f"timed out waiting for {wait.key}", notice="timed_out"
                )
            if wait.on_timeout == Wait.OnTimeout.CANCEL:
                raise RunStopped(
                    Run.Status.CANCELLED, f"timed out waiting for {wait.key}", notice="timed_out"
                )
            output = {"timeout": True, **output}
        with transaction.atomic():
            step.status = Step.Status.COMPLETED
            step.output = output
            step.completed_at = timezone.now()
            step.duration_ms = int((step.completed_at - step.started_at).total_seconds() * 1000)
            step.save(update_fields=["status", "output", "completed_at", "duration_ms"])
        emit(
            self.run.pk,
            "step",
            {"index": index, "kind": "wait", "name": name, "status": "completed"},
        )
        return output


def _input_for_model(run: Run) -> str:
    text = run.input.get("text", "")
    event = run.input.get("event")
    if event is not None:
        text = (text + "\n" if text else "") + "Event: " + json.dumps(event, ensure_ascii=False)
    return text
