"""Write paths of the runtime: start, cancel, requeue and resume runs, deliver events, expire
waits."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from datetime import timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext as _

from cadre import queues
from cadre.agents.models import Agent, Deployment, Run, Session, Wait
from cadre.agents.runtime.lifecycle import prefetch
from cadre.agents.runtime.records import delivery
from cadre.agents.runtime.records.bookkeeping import emit
from cadre.agents.runtime.records.grants import grants_for_version
from cadre.agents.runtime.records.runs import (
    AFTER_RUN_PRIORITY,
    RUN_AFTER_TASK,
    execution_enqueue,
    finished_payload,
)
from cadre.errors import Conflict, InvalidInput, NotPermitted
from cadre.governance import audit
from cadre.governance.confirmations import Decision, confirmation_decide
from cadre.governance.models import Confirmation
from cadre.identifiers import parse_pk
from cadre.observability import current_trace_id
from cadre.ports import Listeners
from cadre.tenancy.actors import Actor
from cadre.tenancy.models import Member

logger = logging.getLogger(__name__)

MAX_INPUT_CHARS = 32_000


def _check_can_run(actor: Actor, agent: Agent) -> None:
    if agent.organization_id != getattr(actor.organization, "pk", None):
        raise NotPermitted("That agent does not exist.")
    if actor.kind == "system":
        return
    own = actor.member is not None and actor.member.pk == agent.member_id
    if not (own and actor.has("chat.use")):
        raise NotPermitted("You can only talk to your own agents.")


def check_runnable(agent: Agent) -> None:
    if agent.member.status != Member.Status.ACTIVE:
        raise Conflict("The agent's member is deactivated.", code="member_deactivated")
    if agent.status != Agent.Status.ACTIVE:
        raise Conflict("This agent is stopped.", code="agent_stopped")
    if agent.deployment.status == Deployment.Status.STOPPED:
        raise Conflict("This agent's deployment is stopped.", code="agent_stopped")


@transaction.atomic
def run_start(
    *,
    actor: Actor,
    agent: Agent,
    text: str = "",
    session: Session | None = None,
    channel: str = "console",
    event: dict | None = None,
    trigger: str = "message",
    attachments: list[dict] | None = None,
) -> Run:
    """Accept a message (or an event) for an agent and queue its run. `attachments`: files
    that came with an IM message (their descriptions; the connectors download them on demand).
    """
    _check_can_run(actor, agent)
    check_runnable(agent)
    if not text.strip() and event is None:
        raise InvalidInput("A message needs text.", details={"text": ["This field is required."]})
    if len(text) > MAX_INPUT_CHARS:
        raise InvalidInput(f"A message is limited to {MAX_INPUT_CHARS} characters.")
    now = timezone.now()
    if session is None:
        session = Session.objects.create(
            organization_id=agent.organization_id,
            agent=agent,
            member=agent.member,
            channel=channel,
            title=text[:80],
        )
    elif session.agent_id != agent.pk:
        raise InvalidInput("That session belongs to another agent.")
    else:
        Session.objects.filter(pk=session.pk).update(last_activity_at=now)
    run = Run.objects.create(
        organization_id=agent.organization_id,
        session=session,
        agent=agent,
        member_id=agent.member_id,
        version_id=agent.version_id,
        trace_id=current_trace_id() or uuid.uuid4().hex,
        trigger=trigger,
        input={
            "text": text,
            **({"event": event} if event is not None else {}),
            **({"attachments": attachments} if attachments else {}),
        },
        grants=grants_for_version(agent.version),
    )
    Run.objects.filter(pk=run.pk).update(root_id=run.pk)
    run.root_id = run.pk
    emit(run.pk, "status", {"status": Run.Status.QUEUED})
    execution_enqueue(run.pk)
    return run


@transaction.atomic
def run_cancel(*, actor: Actor, run: Run, reason: str = "") -> Run:
    own = actor.member is not None and actor.member.pk == run.member_id and actor.has("chat.use")
    if not (own or actor.has("deployment.manage") or actor.kind == "system"):
        raise NotPermitted("You cannot cancel this run.")
    run = Run.objects.select_for_update().get(pk=run.pk)
    if run.is_terminal:
        raise Conflict(f"The run is already {run.status}.", code="run_finished")
    before = {"status": run.status}
    run.status = Run.Status.CANCELLED
    run.finished_at = timezone.now()
    run.error = reason or "cancelled"
    run.output = {"notice": "cancelled"}
    run.save(update_fields=["status", "finished_at", "error", "output"])
    run.waits.filter(status=Wait.Status.PENDING).update(
        status=Wait.Status.CANCELLED, resolved_at=timezone.now()
    )
    emit(run.pk, "notice", delivery.notice_data(run))
    emit(run.pk, "status", {"status": run.status})
    audit.record(
        actor=actor,
        action="run.cancel",
        target=run,
        before=before,
        after={"status": run.status},
        reason=reason,
    )
    on_run_finished(run)
    return run


@transaction.atomic
def run_requeue(*, actor: Actor, run: Run) -> Run:
    """Hand a queued run to the workers again: the chat's "Retry" for a message that has
    waited too long (its task lost, or taken by no worker). Executing twice is safe (advisory
    lock, replay). Whoever may cancel the run may retry it; audited as `run.requeue`."""
    own = actor.member is not None and actor.member.pk == run.member_id and actor.has("chat.use")
    if not (own or actor.has("deployment.manage") or actor.kind == "system"):
        raise NotPermitted("You cannot retry this run.")
    run = Run.objects.select_for_update().get(pk=run.pk)
    if run.status != Run.Status.QUEUED:
        raise Conflict(
            f"The run is {run.get_status_display().lower()}, not queued.", code="run_not_queued"
        )
    emit(run.pk, "status", {"status": Run.Status.QUEUED, "requeued": True})
    audit.record(
        actor=actor,
        action="run.requeue",
        target=run,
        before={"status": run.status},
        after={"status": run.status, "requeued": True},
    )
    execution_enqueue(run.pk)
    return run


# Told of a person's rating of a run, in its transaction: (actor, run, outcome, note). The Hub
# gives the run's skills the same outcome; the Memory Viewer serves its figures anew.
RUN_RATED: Listeners[Callable[..., object]] = Listeners("run rated")


@transaction.atomic
def run_rate(*, actor: Actor, run: Run, outcome: str, note: str = "") -> Run:
    """The person says whether the answer did its job ("success" or "failure"); a new rating
    replaces the last. The run's member rates their own runs; `deployment.manage` any run of
    the organization. Audited as `run.rating`; the Memory Viewer's recall hit rate counts it."""
    if outcome not in Run.Rating.values:
        raise InvalidInput(
            "outcome must be 'success' or 'failure'.",
            details={"outcome": [f"Choose from: {', '.join(Run.Rating.values)}"]},
        )
    own = actor.member is not None and actor.member.pk == run.member_id
    if not own and not actor.has("deployment.manage"):
        raise NotPermitted("Only the person the run served, or a deployment manager, may rate it.")
    run = Run.objects.select_for_update().get(pk=run.pk)
    before = {"rating": run.rating or None}
    run.rating, run.rating_note, run.rated_at = outcome, note[:500], timezone.now()
    run.save(update_fields=["rating", "rating_note", "rated_at"])
    audit.record(
        actor=actor,
        action="run.rating",
        target=run,
        before=before,
        after={"rating": outcome},
        reason=note,
    )
    RUN_RATED.notify(actor=actor, run=run, outcome=outcome, note=note)
    return run


def _resolve(wait: Wait, payload: dict, status: str = Wait.Status.RESOLVED) -> bool:
    """Resolve a pending wait (conditional: a wait is resolved once) and requeue its run."""
    updated = Wait.objects.filter(pk=wait.pk, status=Wait.Status.PENDING).update(
        status=status, payload=payload, resolved_at=timezone.now()
    )
    if not updated:
        return False
    Run.objects.filter(pk=wait.run_id, status=Run.Status.WAITING).update(status=Run.Status.QUEUED)
    emit(wait.run_id, "resume", {"key": wait.key, "status": status})
    execution_enqueue(wait.run_id)
    return True


@transaction.atomic
def run_resume(*, actor: Actor, run: Run, payload: dict, key: str | None = None) -> Wait:
    """Resolve the run's pending wait (the one with `key`, or the only one) with `payload`
    (a decided confirmation's is `Decision.to_dict()`, see `confirmation_decided`)."""
    waits = Wait.objects.select_for_update().filter(run=run, status=Wait.Status.PENDING)
    if key is not None:
        waits = waits.filter(key=key)
    found = list(waits[:2])
    if not found:
        raise Conflict("The run is not waiting for that.", code="not_waiting")
    if len(found) > 1:
        raise InvalidInput("The run waits for several things: give the key.")
    wait = found[0]
    _resolve(wait, payload)
    audit.record(
        actor=actor,
        action="run.resume",
        target=run,
        changes={"wait": wait.key, "kind": wait.kind, "payload_keys": sorted(payload)},
        organization=run.organization,
    )
    return wait


@transaction.atomic
def run_resume_request(*, actor: Actor, run: Run, payload: dict, key: str | None = None) -> Wait:
    """`POST /runs/{id}/resume/`: an external event the run waits for is resolved with the
    payload; a confirmation it waits for is decided like any decision — through governance,
    by one of its deciders, counting towards its approvals and its requester rule — with
    `{"approved": true|false, "reason": …}`, and the run resumes once the decision is final.
    Returns the wait as it stands (still pending while approvals are missing)."""
    waits = Wait.objects.filter(run=run, status=Wait.Status.PENDING)
    if key is not None:
        waits = waits.filter(key=key)
    found = list(waits[:2])
    if len(found) != 1:
        return run_resume(actor=actor, run=run, payload=payload, key=key)  # its refusals
    wait = found[0]
    if wait.kind != Wait.Kind.CONFIRMATION:
        return run_resume(actor=actor, run=run, payload=payload, key=wait.key)
    approved = payload.get("approved")
    if not isinstance(approved, bool):
        raise InvalidInput(
            _('A confirmation is decided with {"approved": true} or {"approved": false}.'),
            details={"payload": ["approved: true or false"]},
        )
    confirmation = (
        Confirmation.objects.filter(organization_id=run.organization_id, run_id=run.pk)
        .filter(Q(wait_key=wait.key) | Q(pk=parse_pk(wait.key) or 0, wait_key=""))
        .first()
    )
    if confirmation is None:
        raise Conflict(_("The run is not waiting for that."), code="not_waiting")
    reason = payload.get("reason")
    confirmation_decide(
        decision="approve" if approved else "reject",
        via="api",
        confirmation=confirmation,
        actor=actor,
        reason=reason[:500] if isinstance(reason, str) else "",
    )
    wait.refresh_from_db()
    return wait


def confirmation_decided(confirmation: Confirmation, actor: Actor) -> None:
    """Governance's decision listener: resume the run paused on the confirmation, in the
    deciding transaction (decision and resume commit together). Without a run (or with a
    run no longer waiting: cancelled, or its own wait timed out) the decision stands alone."""
    if not confirmation.run_id:
        return
    run = Run.objects.filter(
        pk=confirmation.run_id, organization_id=confirmation.organization_id
    ).first()
    if run is None:
        return
    try:
        run_resume(
            actor=actor,
            run=run,
            payload=Decision.of(confirmation).to_dict(),
            key=confirmation.wait_key or str(confirmation.pk),
        )
    except Conflict:
        logger.info("confirmation %s: run %s is not waiting", confirmation.pk, run.pk)


@transaction.atomic
def event_deliver(*, actor: Actor, key: str, payload: dict) -> int:
    """An external event arrived: resume every run of the organization waiting for `key`."""
    waits = list(
        Wait.objects.select_for_update().filter(
            organization=actor.organization,
            kind=Wait.Kind.EVENT,
            key=key,
            status=Wait.Status.PENDING,
        )
    )
    resumed = sum(1 for wait in waits if _resolve(wait, payload))
    if resumed:
        audit.record(
            actor=actor,
            action="run.event_delivered",
            target=("wait_key", key[:64]),
            changes={"runs": [w.run_id for w in waits]},
        )
    return resumed


def on_run_finished(run: Run) -> None:
    """In the finishing transaction: wake a delegating parent, queue the after-run hooks, hand
    the reply (or, for a run that ended without one, its notice) to the conversation's
    channel."""
    if run.parent_id is not None:  # only a delegating parent waits for a run
        waits = Wait.objects.select_for_update().filter(
            kind=Wait.Kind.EVENT, key=f"run:{run.pk}:finished", status=Wait.Status.PENDING
        )
        for wait in waits:
            _resolve(wait, finished_payload(run))
    # A refused input is not a turn to learn from.
    if run.status == Run.Status.COMPLETED and not run.output.get("refused"):
        # Learning from a turn (memory, compaction, post-processing) yields to answering:
        # the `after` queue, served by another pool than runs, at the lowest priority.
        transaction.on_commit(
            lambda: queues.enqueue_with(RUN_AFTER_TASK, args=(run.pk,), priority=AFTER_RUN_PRIORITY)
        )
        prefetch.schedule(run, priority=AFTER_RUN_PRIORITY)
    # A person always hears back: a failed or cancelled run's notice goes out like a reply.
    delivery.reply_deliver(delivery.run_reply(run))


def waits_expire(now=None) -> int:
    """Expire overdue waits and apply each one's timeout policy (the run resumes and decides)."""
    now = now or timezone.now()
    expired = 0
    overdue = Wait.objects.filter(status=Wait.Status.PENDING, deadline__lte=now).values_list(
        "pk", flat=True
    )[:500]
    for pk in list(overdue):
        with transaction.atomic():
            wait = (
                Wait.objects.select_for_update(skip_locked=True)
                .filter(pk=pk, status=Wait.Status.PENDING)
                .first()
            )
            if wait is not None and _resolve(
                wait, {"deadline": wait.deadline.isoformat()}, status=Wait.Status.EXPIRED
            ):
                expired += 1
    return expired


def runs_requeue_stale(*, older_than: timedelta = timedelta(minutes=10)) -> int:
    """Queue again runs that are queued or running but idle (a lost message, a dead worker
    whose task was not redelivered); executing twice is safe (advisory lock, replay)."""
    cutoff = timezone.now() - older_than
    stale = list(
        Run.objects.filter(status__in=[Run.Status.QUEUED, Run.Status.RUNNING])
        .filter(created_at__lt=cutoff)
        .exclude(heartbeat_at__gte=cutoff)
        .values_list("pk", flat=True)[:500]
    )
    for pk in stale:
        Run.objects.filter(pk=pk).update(heartbeat_at=timezone.now())
        with transaction.atomic():
            execution_enqueue(pk)
    return len(stale)
