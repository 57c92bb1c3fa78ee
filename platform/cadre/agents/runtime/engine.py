"""The run loop: every model call, tool call, hook and wait is a persisted step.

A step is written `started` before its work and `completed` with its output after it. The
loop is deterministic given the outputs of completed steps, so executing a run again — a
Celery task redelivered after its worker died (acks_late + reject_on_worker_lost), or a run
resumed after a wait — replays completed steps from their stored outputs and carries on from
the first step that did not complete. Tool calls carry the idempotency key
`run:<id>:step:<n>`; the executor records it with the side effect (see tools/executor.py), so
a call that completed its effect but not its step returns the recorded result on retry.

One worker executes a run at a time: a PostgreSQL session advisory lock on the run is held
while executing; a killed worker's connection closes and releases it.
"""

from __future__ import annotations

import json
import logging
import time
from contextlib import contextmanager
from datetime import timedelta
from decimal import Decimal

from django.db import OperationalError, connection, transaction
from django.utils import timezone

from cadre.agents.hooks.registry import hooks_for
from cadre.agents.models import (
    Agent,
    Deployment,
    ModelProviderConfig,
    Run,
    RunEvent,
    Step,
    Wait,
)
from cadre.agents.runtime import context as context_assembly
from cadre.agents.tools import registry as tool_registry
from cadre.llm import ChatResult, ProviderError, provider_for
from cadre.memory.models import Scope, scope_key
from cadre.observability import tracer
from cadre.tenancy.actors import Actor
from cadre.tenancy.models import Member

logger = logging.getLogger(__name__)

LOCK_NAMESPACE = 71001  # pg advisory lock class for runs
DEFAULT_MAX_STEPS = 12
DEFAULT_MAX_TOKENS = 200_000
DEFAULT_CONTEXT_TOKENS = 8_000
DEFAULT_WAIT_SECONDS = 24 * 3600
RECENT_TURNS = 12
DELTA_FLUSH_SECONDS = 0.1


class SimulatedCrash(BaseException):
    """Raised at a crash point in tests: after a step's work, before it is marked completed.

    A BaseException, so no `except Exception` on the way can swallow it — like a killed worker.
    """


class RunPaused(Exception):
    """The run is waiting (a confirmation or an external event); its worker stops here."""


class RunStopped(Exception):
    """The run must not continue (cancelled, member deactivated, budget spent)."""

    def __init__(self, status: str, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


class RunRefused(Exception):
    """The policy chain refused the input: the run ends with a visible refusal, and nothing
    reached the model."""

    def __init__(self, reason: str, retry_after: int | None = None):
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after

    @property
    def reply(self) -> str:
        if self.retry_after:
            return (
                f"I can't take this message right now: {self.reason}. "
                f"Please try again in {self.retry_after} seconds."
            )
        return f"I can't pass this message on to the model: {self.reason}."


class NonDeterministicReplay(Exception):
    """A replayed step does not match what the loop asks for: the run cannot resume safely."""


# Test crash points: {(kind, name or None): remaining count}. Empty in production.
_crash_points: dict[tuple[str, str | None], int] = {}


@contextmanager
def crash_after(kind: str, name: str | None = None, times: int = 1):
    """Make the next `times` steps of `kind` (and `name`) crash after their work (tests)."""
    _crash_points[(kind, name)] = times
    try:
        yield
    finally:
        _crash_points.pop((kind, name), None)


def _maybe_crash(kind: str, name: str) -> None:
    for key in ((kind, name), (kind, None)):
        remaining = _crash_points.get(key, 0)
        if remaining > 0:
            _crash_points[key] = remaining - 1
            raise SimulatedCrash(f"simulated crash after {kind}:{name}")


# --- identity and grants ------------------------------------------------------------------


def agent_actor(agent: Agent) -> Actor:
    """The actor an agent acts as: its own identity, serving its member."""
    return Actor(
        kind="agent",
        organization=agent.organization,
        permissions=frozenset({"chat.use"}),
        member=agent.member,
        agent=agent,
        label=f"agent {agent.name}",
    )


def grants_for_version(version) -> dict:
    """What a run of this template version may do (the template's allow-lists and budget)."""
    settings = version.model_settings or {}
    budget = {"max_steps": DEFAULT_MAX_STEPS, "max_tokens": DEFAULT_MAX_TOKENS}
    budget.update(settings.get("budget") or {})
    policy = version.memory_policy or {}
    return {
        "tools": dict(version.tool_permissions or {}),
        "read_scopes": list(policy.get("read_scopes", ["agent", "user"])),
        "write_scopes": list(policy.get("write_scopes", ["agent"])),
        "budget": budget,
    }


_RANK = {"low": 0, "medium": 1, "high": 2}
_CONFIRM = {"never": 0, "high_risk": 1, "always": 2}


def narrow_grants(parent: dict, proposed: dict) -> dict:
    """`proposed` cut down to `parent`: a subagent can never get more than its parent has."""
    tools = {}
    for name, rule in (proposed.get("tools") or {}).items():
        if name not in parent.get("tools", {}):
            continue
        mine = parent["tools"][name]
        merged = {**mine, **rule}
        merged["risk"] = max(mine.get("risk", "low"), rule.get("risk", "low"), key=_RANK.get)
        merged["confirmation"] = max(
            mine.get("confirmation", "never"), rule.get("confirmation", "never"), key=_CONFIRM.get
        )
        if "allowed_hosts" in mine or "allowed_hosts" in rule:
            merged["allowed_hosts"] = [
                h for h in rule.get("allowed_hosts", []) if h in mine.get("allowed_hosts", [])
            ]
        tools[name] = merged
    budget = {}
    for key, value in (parent.get("budget") or {}).items():
        asked = (proposed.get("budget") or {}).get(key, value)
        budget[key] = min(value, asked)
    return {
        "tools": tools,
        "read_scopes": [
            s for s in proposed.get("read_scopes", []) if s in parent.get("read_scopes", [])
        ],
        "write_scopes": [
            s for s in proposed.get("write_scopes", []) if s in parent.get("write_scopes", [])
        ],
        "budget": budget,
        "shared_memories": list(proposed.get("shared_memories", [])),
    }


def scope_keys_for(agent: Agent, scope_types: list[str]) -> list[str]:
    """Concrete memory scope keys of an agent for scope types ("agent", "user", …)."""
    from cadre.memory.selectors import _department_chain

    member = agent.member
    keys: list[str] = []
    for kind in scope_types:
        if kind == Scope.AGENT:
            keys.append(scope_key(Scope.AGENT, agent.pk))
        elif kind == Scope.USER:
            keys.append(scope_key(Scope.USER, member.pk))
        elif kind == Scope.POSITION:
            keys += [
                scope_key(Scope.POSITION, pk)
                for pk in member.positions.values_list("id", flat=True)
            ]
        elif kind == Scope.DEPARTMENT:
            keys += [
                scope_key(Scope.DEPARTMENT, pk)
                for pk in _department_chain(agent.organization_id, member.department_id)
            ]
        elif kind == Scope.ORGANIZATION:
            keys.append(scope_key(Scope.ORGANIZATION))
    return list(dict.fromkeys(keys))


# --- events and bookkeeping --------------------------------------------------------------


@contextmanager
def bookkeeping():
    """A transaction for the runtime's own progress records (steps, events, run status).

    It commits without waiting for the WAL flush (`synchronous_commit` off for this
    transaction only): other sessions see it at once and a killed worker loses nothing; only
    a crash of PostgreSQL itself can lose its last fraction of a second, and then the lost
    steps are executed again — tool side effects still happen once, because their ToolEffect
    records (and waits) commit with full durability. One commit fewer to wait for per write
    is most of a run's overhead on a busy disk.
    """
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit TO OFF")
        yield


def emit(run_id: int, kind: str, data: dict | None = None) -> None:
    RunEvent.objects.create(run_id=run_id, kind=kind, data=data or {})


# --- the execution context ----------------------------------------------------------------


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
        self.cost = Decimal(0)
        self.model_calls = 0
        self._scope_cache: dict[str, list[str]] = {}
        # The input as the model may see it (masked by the input policy), once on_init ran.
        self.model_text: str | None = None
        self._policy_chain = None
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
            from cadre.governance.policy import resolve_chain

            self._policy_chain = resolve_chain(
                self.run.organization, getattr(self.version, "policy_chain_id", None)
            )
        return self._policy_chain

    def policy_check(self, stage: str, text: str) -> dict | None:
        """The chain's verdict on `text` at `stage`, or None when no plugin looks at it.
        Call it inside a step, so a replayed run reuses the stored verdict."""
        from cadre.governance.policy import policy_check_run, stage_handled

        chain = self.policy_chain()
        if not text or not stage_handled(chain, stage):
            return None
        return policy_check_run(
            run=self.run, stage=stage, text=text, step_index=self.step_index, chain=chain
        )

    def reidentify(self, value):
        """`value` with this conversation's placeholders replaced by the original values —
        for what leaves the model's side: tool arguments and the reply the employee sees."""
        from cadre.governance.masking.policy import PLACEHOLDER
        from cadre.governance.masking.vault import reidentify

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
        if existing is not None and (existing.kind != kind or existing.name != name):
            raise NonDeterministicReplay(
                f"step {index} was {existing.kind}:{existing.name}, now {kind}:{name}"
            )
        return existing

    # Completion fields a step's final write sets.
    _DONE_FIELDS = (
        "status",
        "output",
        "completed_at",
        "duration_ms",
        "tokens_in",
        "tokens_out",
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
        cost}) is moved onto the step's token and cost columns.

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
        if step is not None and step.status == Step.Status.COMPLETED:
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
        _maybe_crash(kind, name)
        usage = output.pop("_usage", None) or {}
        step.status = Step.Status.COMPLETED
        step.output = output
        step.completed_at = timezone.now()
        step.duration_ms = int((time.monotonic() - started) * 1000)
        step.tokens_in = usage.get("input_tokens", 0)
        step.tokens_out = usage.get("output_tokens", 0)
        step.cost = Decimal(str(usage.get("cost", 0)))
        event = RunEvent(
            run_id=self.run.pk,
            kind="step",
            data={
                "index": index,
                "kind": kind,
                "name": name,
                "status": "completed",
                "duration_ms": step.duration_ms,
            },
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
                self.flush([event])
                step.save(update_fields=self._DONE_FIELDS)
        self._count(step)
        return output

    def _count(self, step: Step) -> None:
        self.tokens_in += step.tokens_in
        self.tokens_out += step.tokens_out
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
        _maybe_crash(Step.Kind.WAIT, name)
        with transaction.atomic():
            wait = Wait.objects.select_for_update().get(step_id=step.pk)
            if wait.status == Wait.Status.PENDING:
                from cadre.agents.runtime.services import early_resolution

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
                raise RunStopped(Run.Status.FAILED, f"timed out waiting for {wait.key}")
            if wait.on_timeout == Wait.OnTimeout.CANCEL:
                raise RunStopped(Run.Status.CANCELLED, f"timed out waiting for {wait.key}")
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


# --- the loop -----------------------------------------------------------------------------


def _provider(ctx: RunContext):
    settings = ctx.version.model_settings or {}
    config = None
    config_id = settings.get("provider_config")
    if config_id:
        config = ModelProviderConfig.objects.filter(
            pk=config_id, organization_id=ctx.run.organization_id, is_active=True
        ).first()
        if config is None:
            raise RunStopped(Run.Status.FAILED, "the template's model provider is not available")
    return provider_for(settings, config), (config.prices if config else {})


def _recent_turns(run: Run) -> list[dict]:
    previous = (
        Run.objects.filter(
            session_id=run.session_id, status=Run.Status.COMPLETED, created_at__lt=run.created_at
        )
        .order_by("-created_at")
        .values_list("input", "output")[:RECENT_TURNS]
    )
    turns: list[dict] = []
    for run_input, run_output in reversed(list(previous)):
        # What the model saw and said (placeholders), never the re-identified transcript.
        turns.append({"role": "user", "content": model_side(run_input)})
        turns.append({"role": "assistant", "content": model_side(run_output)})
    return turns


def model_side(record: dict) -> str:
    """A run's input or output as the model sees it: masked text when masking changed it."""
    return record.get("model_text", record.get("text", ""))


def _skill_descriptions(version) -> list[dict]:
    # The template's skill references; the Hub's assemble_context hook supplies installed ones.
    return [
        {
            "name": skill["package"],
            "description": f"version {skill.get('range') or skill.get('tag')}",
        }
        for skill in version.skills or []
    ]


def _apply_input_verdict(ctx: RunContext, output: dict) -> None:
    """An on_init hook's input verdict ({"result": {"action", "reason", "text"}}): a refusal
    ends the run before anything reaches the model; otherwise the (masked) text is what the
    model, retrieval and memory see from now on."""
    verdict = output.get("result") if isinstance(output, dict) else None
    if not isinstance(verdict, dict) or "action" not in verdict:
        return
    if verdict["action"] in ("deny", "require_confirmation"):
        raise RunRefused(verdict.get("reason") or "refused by policy", verdict.get("retry_after"))
    if isinstance(verdict.get("text"), str):
        ctx.model_text = verdict["text"]


def _assemble(ctx: RunContext) -> list[dict]:
    for hook, config in hooks_for(ctx.version.hooks, "on_init"):
        output = ctx.step(
            Step.Kind.HOOK,
            f"on_init:{hook.name}",
            {},
            lambda step, hook=hook, config=config: hook.fn(ctx, config) or {},
        )
        _apply_input_verdict(ctx, output)
    base = ctx.step(
        Step.Kind.HOOK,
        "assemble_context:base",
        {},
        lambda step: {
            "agent_md": ctx.version.agent_md,
            "sop": ctx.version.sop,
            "user_md": ctx.agent.user_md,
            "skills": _skill_descriptions(ctx.version),
            "turns": _recent_turns(ctx.run),
            "shared": ctx.run.input.get("shared_memories", []),
        },
    )
    pieces = context_assembly.ContextPieces(
        agent_md=base["agent_md"],
        sop=base["sop"],
        user_md=base["user_md"],
        skills=base["skills"],
        turns=base["turns"],
        shared=base["shared"],
        input_text=ctx.input_text,
    )
    for hook, config in hooks_for(ctx.version.hooks, "assemble_context"):
        added = ctx.step(
            Step.Kind.HOOK,
            f"assemble_context:{hook.name}",
            {},
            lambda step, hook=hook, config=config: hook.fn(ctx, config) or {},
        )
        pieces.memories += added.get("memories", [])
        pieces.sections += added.get("sections", [])
    budget = int((ctx.version.model_settings or {}).get("context_tokens", DEFAULT_CONTEXT_TOKENS))
    messages, _report = context_assembly.fit(pieces, budget)
    return messages


def _input_for_model(run: Run) -> str:
    text = run.input.get("text", "")
    event = run.input.get("event")
    if event is not None:
        text = (text + "\n" if text else "") + "Event: " + json.dumps(event, ensure_ascii=False)
    return text


def _model_step(
    ctx: RunContext, provider, prices: dict, messages: list[dict], tools: list[dict]
) -> ChatResult:
    budget = ctx.grants.get("budget", {})
    if ctx.model_calls >= int(budget.get("max_steps", DEFAULT_MAX_STEPS)):
        raise RunStopped(Run.Status.FAILED, "budget exceeded: too many model calls")
    if ctx.tokens_in + ctx.tokens_out >= int(budget.get("max_tokens", DEFAULT_MAX_TOKENS)):
        raise RunStopped(Run.Status.FAILED, "budget exceeded: token limit reached")
    if budget.get("max_cost") is not None and ctx.cost >= Decimal(str(budget["max_cost"])):
        raise RunStopped(Run.Status.FAILED, "budget exceeded: cost limit reached")

    def call(step: Step) -> dict:
        # Deltas are written at most every DELTA_FLUSH_SECONDS; an answer that arrives faster
        # (the offline provider, short replies) needs none: the reply event carries it.
        pending: list[str] = []
        state = {"last": time.monotonic(), "flushed": False}

        def flush() -> None:
            with bookkeeping():
                emit(ctx.run.pk, "delta", {"index": step.index, "text": "".join(pending)})
            pending.clear()
            state.update(last=time.monotonic(), flushed=True)

        def on_delta(text: str) -> None:
            pending.append(text)
            if time.monotonic() - state["last"] >= DELTA_FLUSH_SECONDS:
                flush()

        result = provider.chat(messages, tools, stream=True, on_delta=on_delta)
        if pending and state["flushed"]:
            flush()
        data = result.as_dict()
        data["_usage"] = {**data["usage"], "cost": str(result.usage.cost(prices))}
        return data

    output = ctx.step(
        Step.Kind.MODEL_CALL,
        "model",
        {"messages": messages, "tools": [t["name"] for t in tools]},
        call,
    )
    return ChatResult.from_dict(output)


def _tool_specs(ctx: RunContext) -> list[dict]:
    specs = []
    for name in sorted(ctx.grants.get("tools", {})):
        tool = tool_registry.get(name)
        if tool is not None:
            specs.append(tool.spec())
    return specs


def _checked_reply(ctx: RunContext, text: str) -> str:
    """The model's reply through the chain's output stage (content rules): a denial replaces
    it with a visible refusal. A step of its own, so a replay reuses the verdict."""
    from cadre.governance.policy import stage_handled

    if not text or not stage_handled(ctx.policy_chain(), "output"):
        return text
    verdict = ctx.step(
        Step.Kind.HOOK,
        "output_policy",
        {},
        lambda step: ctx.policy_check("output", text) or {"action": "allow", "text": text},
    )
    if verdict["action"] in ("deny", "require_confirmation"):
        return f"[The reply was withheld by policy: {verdict.get('reason') or 'denied'}.]"
    return verdict.get("text", text)


def _execute(ctx: RunContext) -> str:
    from cadre.agents.tools.executor import handle_tool_call

    messages = _assemble(ctx)
    provider, prices = _provider(ctx)
    tools = _tool_specs(ctx)
    while True:
        result = _model_step(ctx, provider, prices, messages, tools)
        if not result.tool_calls:
            return _checked_reply(ctx, result.text)
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


@contextmanager
def _run_lock(run_id: int):
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [LOCK_NAMESPACE, run_id])
        locked = cursor.fetchone()[0]
    try:
        yield locked
    finally:
        if locked:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [LOCK_NAMESPACE, run_id])


class RunBusy(Exception):
    """Another worker is executing this run right now."""


def _refusal(run: Run) -> str | None:
    if run.member.status != Member.Status.ACTIVE:
        return "the member is deactivated"
    if run.agent.status != Agent.Status.ACTIVE:
        return "the agent is stopped"
    if run.agent.deployment.status == Deployment.Status.STOPPED:
        return "the deployment is stopped"
    return None


def _finish(
    run: Run,
    ctx: RunContext | None,
    status: str,
    *,
    text: str = "",
    error: str = "",
    refused: str = "",
) -> None:
    from cadre.agents.runtime.services import on_run_finished

    # The transcript keeps what the employee wrote and is shown (originals); the model's side
    # (placeholders) is kept next to it for later turns and for memory.
    # A delegated run's reply goes back to its parent's model, not to a person: it keeps the
    # placeholders (its session's vault is not the parent's).
    display = ctx.reidentify(text) if ctx is not None and text and not run.parent_id else text
    now = timezone.now()
    with bookkeeping():
        fields = {"status": status, "finished_at": now, "heartbeat_at": now}
        if ctx is not None:
            fields.update(
                tokens_in=ctx.tokens_in,
                tokens_out=ctx.tokens_out,
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
            text = display
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
            from django.db.models import F

            Agent.objects.filter(pk=run.agent_id).update(
                tokens_in=F("tokens_in") + ctx.tokens_in,
                tokens_out=F("tokens_out") + ctx.tokens_out,
                cost=F("cost") + ctx.cost,
            )
        events = []
        if status == Run.Status.COMPLETED:
            events.append(RunEvent(run_id=run.pk, kind="reply", data={"text": text}))
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


def run_execute(run_id: int) -> str:
    """Execute (or resume) a run; returns its status afterwards. Safe to call again."""
    with _run_lock(run_id) as locked:
        if not locked:
            raise RunBusy(run_id)
        run = load_run(run_id, "agent__deployment")
        if run is None or run.is_terminal:
            return run.status if run else "missing"
        refusal = _refusal(run)
        if refusal:
            _finish(run, None, Run.Status.CANCELLED, error=refusal)
            return run.status
        now = timezone.now()
        # One statement, committed at once (the attempt counts even if this worker dies); its
        # event goes with the run's next write.
        Run.objects.filter(pk=run.pk).update(
            status=Run.Status.RUNNING,
            attempts=run.attempts + 1,
            heartbeat_at=now,
            started_at=run.started_at or now,
        )
        ctx = RunContext(run, first_attempt=run.attempts == 0)
        ctx._pending_events.append(
            RunEvent(
                run_id=run.pk,
                kind="status",
                data={"status": Run.Status.RUNNING, "attempt": run.attempts + 1},
            )
        )
        with (
            _trace(run),
            tracer().start_as_current_span(
                "agent.run", attributes={"cadre.run_id": run.pk, "cadre.agent_id": run.agent_id}
            ),
        ):
            try:
                text = _execute(ctx)
            except RunPaused as paused:
                emit(run.pk, "status", {"status": Run.Status.WAITING, "key": str(paused)})
                return Run.Status.WAITING
            except RunRefused as refused:
                _finish(run, ctx, Run.Status.COMPLETED, text=refused.reply, refused=refused.reason)
                return Run.Status.COMPLETED
            except RunStopped as stopped:
                _finish(run, ctx, stopped.status, error=stopped.message)
                return stopped.status
            except NonDeterministicReplay as error:
                _finish(run, ctx, Run.Status.FAILED, error=f"cannot resume: {error}")
                return Run.Status.FAILED
            except ProviderError:
                ctx._flush_now()  # the retry replays the hooks that completed
                raise  # transient: the task retries and the run resumes where it stopped
            except OperationalError:
                raise  # transient: the task retries and the run resumes where it stopped
            except Exception as error:  # a bug or bad data: fail visibly, do not retry forever
                logger.exception("run %s failed", run.pk)
                _finish(run, ctx, Run.Status.FAILED, error=f"{type(error).__name__}: {error}")
                return Run.Status.FAILED
            _finish(run, ctx, Run.Status.COMPLETED, text=text)
            return Run.Status.COMPLETED


@contextmanager
def _trace(run: Run):
    """Make the run's stored trace id the current one, so every hop shares it."""
    from opentelemetry import trace
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

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


def run_fail(run_id: int, error: str) -> None:
    """Give up on a run (retries exhausted)."""
    run = Run.objects.filter(pk=run_id).first()
    if run is not None and not run.is_terminal:
        _finish(run, None, Run.Status.FAILED, error=error)
