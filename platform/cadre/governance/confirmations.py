"""High-risk confirmations: create, decide exactly once, expire, cancel — and resume the run.

A decision is a conditional UPDATE … WHERE status = 'pending' AND expires_at > now() on a row
already locked by the deciding transaction: of two deciders at once exactly one decides, the
other gets a Conflict naming the outcome. The `on_decided` listeners are told inside the same
transaction as the decision: the agents runtime resumes the paused run with the `Decision`
(resolving its Wait and requeueing it), so a worker dying around it either loses both or keeps
both; the tool then executes once because its step and ToolEffect record are keyed by the
step's idempotency key. The `on_created` listeners are told of each new confirmation from a
worker after it commits (the connectors send its cards).

Who decides is a rule per risk level (organization setting "confirmation_rules" overrides
DEFAULT_RULES):

    {"deciders": ["requester", "manager", "role:it_admin", "member:12"],
     "approvals": 1, "expires_minutes": 30}

`approvals` > 1 is N-of-M (one vote per person). At the highest level (critical) the
requester alone is never enough: at least one approval must come from someone else.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone, translation
from django.utils.translation import gettext as _

from cadre import im
from cadre.errors import Conflict, InvalidInput, NotFound, NotPermitted
from cadre.governance import audit, policy
from cadre.governance.masking.engine import mask
from cadre.governance.masking.vault import ConversationVault, EphemeralVault
from cadre.governance.models import Confirmation, ConfirmationVote
from cadre.governance.risk import (
    RiskAssessment,
    classify,
    confirmation_summary,
    shown_arguments,
)
from cadre.identifiers import parse_pk
from cadre.observability import current_trace_id
from cadre.ports import Listeners
from cadre.queues import enqueue
from cadre.tenancy.actors import member_actor, system_actor
from cadre.tenancy.models import Member

logger = logging.getLogger(__name__)

DEFAULT_RULES: dict[str, dict] = {
    "medium": {"deciders": ["requester"], "approvals": 1, "expires_minutes": 30},
    "high": {"deciders": ["requester", "manager"], "approvals": 1, "expires_minutes": 30},
    "critical": {"deciders": ["manager", "role:it_admin"], "approvals": 2, "expires_minutes": 30},
}
FALLBACK_ROLES = ("it_admin", "owner")
APPROVE, REJECT = "approve", "reject"
_DECISIONS = {"approve": APPROVE, "approved": APPROVE, "reject": REJECT, "rejected": REJECT}
GROUP_PREFIX = "confirmations"

# Told (from a worker, after commit) of each new confirmation still pending; returns how many
# cards it sent. The connectors send the cards.
on_created: Listeners[Callable[[Confirmation], int]] = Listeners("confirmation created")
# Told of each decision (approved, rejected, expired, cancelled) with the actor who took it,
# inside the deciding transaction. The agents runtime resumes the run; the connectors update
# the cards.
on_decided: Listeners[Callable[[Confirmation, object], None]] = Listeners("confirmation decided")


def group_name(organization_id: int) -> str:
    return f"{GROUP_PREFIX}.{organization_id}"


# --- rules and deciders ---------------------------------------------------------------------


def rule_for(organization, level: str) -> dict:
    configured = (organization.settings or {}).get("confirmation_rules", {}).get(level)
    rule = {**DEFAULT_RULES.get(level, DEFAULT_RULES["high"]), **(configured or {})}
    rule["approvals"] = max(1, int(rule.get("approvals", 1)))
    rule["expires_minutes"] = max(1, int(rule.get("expires_minutes", 30)))
    return rule


def resolve_deciders(organization, rule: dict, requester: Member | None) -> list[int]:
    """Member ids the rule names (active members of the organization), in a stable order."""
    ids: list[int] = []
    roles: list[str] = []
    for entry in rule.get("deciders", []):
        if entry == "requester" and requester is not None:
            ids.append(requester.pk)
        elif entry == "manager" and requester is not None and requester.manager_id:
            ids.append(requester.manager_id)
        elif isinstance(entry, str) and entry.startswith("role:"):
            roles.append(entry[5:])
        elif (
            isinstance(entry, str)
            and entry.startswith("member:")
            and (key := parse_pk(entry[7:])) is not None
        ):
            ids.append(key)
    active = Member.objects.filter(organization=organization, status=Member.Status.ACTIVE)
    if roles:
        ids += list(active.filter(roles__overlap=roles).order_by("pk").values_list("pk", flat=True))
    usable = set(active.filter(pk__in=ids).values_list("pk", flat=True))
    ids = [pk for pk in dict.fromkeys(ids) if pk in usable]
    others = [pk for pk in ids if requester is None or pk != requester.pk]
    if len(others) < _others_needed(rule, requester, ids):
        # Nobody (else) to decide: route to the organization's IT admins and owners.
        fallback = active.filter(roles__overlap=list(FALLBACK_ROLES)).order_by("pk")
        ids += [pk for pk in fallback.values_list("pk", flat=True) if pk not in ids]
    return ids


def _others_needed(rule: dict, requester, ids: list[int]) -> int:
    if not ids:
        return 1
    return 1 if rule.get("level") == "critical" else 0


# --- masking and summary --------------------------------------------------------------------


def mask_arguments(organization, arguments: dict, conversation_key: str = "") -> dict:
    """The arguments with every string masked (placeholders consistent with the conversation)."""
    vault = (
        ConversationVault(organization, conversation_key) if conversation_key else EphemeralVault()
    )

    def walk(value):
        if isinstance(value, str):
            return mask(value, conversation=vault, organization=organization).text
        if isinstance(value, dict):
            return {key: walk(item) for key, item in value.items()}
        if isinstance(value, list):
            return [walk(item) for item in value]
        return value

    return walk(arguments or {})


def summarize(tool: str, arguments: dict, assessment: RiskAssessment, requester) -> str:
    """The summary stored on the confirmation, in English (the record's language; a person
    reads it in theirs through `Confirmation.summary_text`)."""
    with translation.override("en"):
        return confirmation_summary(
            tool=tool,
            arguments_shown=shown_arguments(arguments),
            level=assessment.level,
            reasons=assessment.reasons,
            radius=assessment.blast_radius,
            who=requester.display_name if requester is not None else None,
        )


# --- create ---------------------------------------------------------------------------------


@transaction.atomic
def confirmation_create(
    *,
    organization,
    tool: str,
    arguments: dict,
    assessment: RiskAssessment,
    idempotency_key: str,
    requester: Member | None = None,
    agent_id: int | None = None,
    run_id: int | None = None,
    step_index: int | None = None,
    wait_key: str = "",
    conversation_key: str = "",
    trace_id: str = "",
    actor=None,
) -> Confirmation:
    """Create the confirmation of one tool call (or return the one with this key: a run that
    re-executes asks again and gets the same confirmation)."""
    existing = Confirmation.objects.filter(idempotency_key=idempotency_key).first()
    if existing is not None:
        return existing
    level = assessment.level if assessment.level != "low" else "medium"
    rule = {**rule_for(organization, level), "level": level}
    deciders = resolve_deciders(organization, rule, requester)
    masked = mask_arguments(organization, arguments, conversation_key)
    if not trace_id:
        trace_id = current_trace_id()
    confirmation = Confirmation(
        organization=organization,
        idempotency_key=idempotency_key,
        run_id=run_id,
        step_index=step_index,
        wait_key=wait_key,
        agent_id=agent_id,
        requester=requester,
        tool=tool,
        arguments=masked,
        summary=summarize(tool, masked, assessment, requester),
        risk_level=level,
        risk_reasons=assessment.reasons,
        blast_radius=assessment.blast_radius,
        rule=rule,
        decider_ids=deciders,
        required_approvals=min(rule["approvals"], max(1, len(deciders))),
        expires_at=timezone.now() + timedelta(minutes=rule["expires_minutes"]),
        trace_id=trace_id,
    )
    try:
        with transaction.atomic():
            confirmation.save(force_insert=True)
    except IntegrityError:  # the same call asked at the same moment by a second worker
        return Confirmation.objects.get(idempotency_key=idempotency_key)

    audit.record(
        actor=actor or system_actor(organization, label="agent runtime"),
        action="confirmation.request",
        target=confirmation,
        organization=organization,
        changes={
            "tool": tool,
            "risk": level,
            "reasons": assessment.reasons,
            "blast_radius": assessment.blast_radius,
            "run": run_id,
            "step": step_index,
            "deciders": deciders,
            "approvals": confirmation.required_approvals,
            "expires_at": confirmation.expires_at.isoformat(),
        },
    )
    _after_commit(confirmation, "created")

    transaction.on_commit(
        lambda: enqueue("cadre.governance.tasks.confirmation_notify", confirmation.pk)
    )
    return confirmation


# --- decide ---------------------------------------------------------------------------------


def _get(confirmation_id, organization=None) -> Confirmation:
    try:
        queryset = Confirmation.objects.select_for_update()
        if organization is not None:
            queryset = queryset.filter(organization=organization)
        return queryset.get(pk=int(confirmation_id))
    except (Confirmation.DoesNotExist, TypeError, ValueError):
        raise NotFound(_("No such confirmation.")) from None


def _via(via: str) -> str:
    via = (via or "").lower()
    if via in im.platforms:
        return f"im:{via}"
    if via in ("console", "api", "im", "system") or via.startswith("im:"):
        return via[:16]
    raise InvalidInput(_("unknown decision channel %(via)r") % {"via": via})


def _already(confirmation: Confirmation) -> Conflict:
    if confirmation.status == Confirmation.Status.PENDING:
        return Conflict(_("The confirmation has expired; nothing was done."), code="expired")
    if confirmation.decided_by_id:
        by = {
            "approved": _("This confirmation was already approved by %(who)s."),
            "rejected": _("This confirmation was already rejected by %(who)s."),
            "expired": _("This confirmation was already expired by %(who)s."),
            "cancelled": _("This confirmation was already cancelled by %(who)s."),
        }.get(confirmation.status) or _("This confirmation was already %(status)s by %(who)s.")
        message = by % {"who": confirmation.decided_by, "status": confirmation.status}
    else:
        message = {
            "approved": _("This confirmation was already approved."),
            "rejected": _("This confirmation was already rejected."),
            "expired": _("This confirmation was already expired."),
            "cancelled": _("This confirmation was already cancelled."),
        }.get(confirmation.status) or _("This confirmation was already %(status)s.") % {
            "status": confirmation.status
        }
    return Conflict(
        message,
        code=f"already_{confirmation.status}",
        details={"status": confirmation.status},
    )


@transaction.atomic
def confirmation_decide(
    *,
    decision: str,
    via: str,
    confirmation: Confirmation | None = None,
    confirmation_id=None,
    decider: Member | None = None,
    actor=None,
    reason: str = "",
) -> Confirmation:
    """Record one decider's decision. Raises NotPermitted for someone not allowed to decide,
    Conflict when it is already decided or expired. Reject by any decider rejects; approval
    needs `required_approvals` votes (and, at critical level, one not from the requester)."""
    verdict = _DECISIONS.get(str(decision).lower())
    if verdict is None:
        raise InvalidInput(_("decision must be 'approve' or 'reject'"))
    via = _via(via)
    if decider is None and actor is not None:
        decider = actor.member
    if decider is None:
        raise NotPermitted(_("Only a member can decide a confirmation."))
    organization = actor.organization if actor is not None else decider.organization
    ref = confirmation.pk if confirmation is not None else confirmation_id
    confirmation = _get(ref, organization)
    decider = Member.objects.filter(pk=decider.pk, organization=organization).first()
    if decider is None or not decider.is_active or decider.pk not in confirmation.decider_ids:
        raise NotPermitted(_("You are not one of the people who may decide this confirmation."))
    if actor is not None and actor.kind == "api_key" and not actor.has("confirmation.decide"):
        raise NotPermitted(_("This API key may not decide confirmations."))
    now = timezone.now()
    if confirmation.status != Confirmation.Status.PENDING:
        raise _already(confirmation)
    if confirmation.expires_at <= now:  # the beat task records the expiry
        raise Conflict(_("The confirmation has expired; nothing was done."), code="expired")
    try:
        with transaction.atomic():
            ConfirmationVote.objects.create(
                confirmation=confirmation, member=decider, decision=verdict, via=via
            )
    except IntegrityError:
        raise Conflict(
            _("You have already decided on this confirmation."), code="already_voted"
        ) from None
    decider_actor = actor or member_actor(decider)
    if verdict == APPROVE and not _approved_enough(confirmation):
        audit.record(
            actor=decider_actor,
            action="confirmation.vote",
            target=confirmation,
            changes={"decision": verdict, "via": via},
            reason=reason,
        )
        _after_commit(confirmation, "vote")
        return confirmation
    status = Confirmation.Status.APPROVED if verdict == APPROVE else Confirmation.Status.REJECTED
    updated = Confirmation.objects.filter(
        pk=confirmation.pk, status=Confirmation.Status.PENDING, expires_at__gt=now
    ).update(
        status=status,
        decided_by=decider,
        decided_at=now,
        decided_via=via,
        decision_reason=reason[:2000],
    )
    if updated != 1:  # unreachable while the row lock is held; kept as the guarantee
        confirmation.refresh_from_db()
        raise _already(confirmation)
    confirmation.refresh_from_db()
    audit.record(
        actor=decider_actor,
        action=f"confirmation.{'approve' if verdict == APPROVE else 'reject'}",
        target=confirmation,
        before={"status": Confirmation.Status.PENDING},
        after={"status": status, "decided_via": via},
        reason=reason,
    )
    _decided(confirmation, decider_actor)
    return confirmation


def _approved_enough(confirmation: Confirmation) -> bool:
    approvers = list(
        confirmation.votes.filter(decision=APPROVE).values_list("member_id", flat=True)
    )
    if len(approvers) < confirmation.required_approvals:
        return False
    if confirmation.risk_level == "critical":
        return any(pk != confirmation.requester_id for pk in approvers)
    return True


@dataclass(frozen=True)
class Decision:
    """What a run paused on a confirmation is resumed with (its Wait's payload, as a dict).

    A wait resolved otherwise (the run API, an expired wait: `{"timeout": true, …}`) reads as
    a Decision too; what is missing is not an approval."""

    approved: bool
    status: str = ""  # approved, rejected, expired, cancelled
    confirmation: int | None = None
    decided_by: int | None = None
    via: str = ""
    reason: str = ""
    timeout: bool = False

    @classmethod
    def of(cls, confirmation: Confirmation) -> Decision:
        reason = confirmation.decision_reason or (
            f"{confirmation.status} by {confirmation.decided_by}"
            if confirmation.decided_by_id
            else f"the confirmation {confirmation.status}"
        )
        return cls(
            approved=confirmation.status == Confirmation.Status.APPROVED,
            status=confirmation.status,
            confirmation=confirmation.pk,
            decided_by=confirmation.decided_by_id,
            via=confirmation.decided_via,
            reason=reason,
        )

    def to_dict(self) -> dict:
        data = {
            "approved": self.approved,
            "decision": self.status,
            "confirmation": self.confirmation,
            "decided_by": self.decided_by,
            "via": self.via,
            "reason": self.reason,
        }
        if self.timeout:
            data["timeout"] = True
        return data

    @classmethod
    def from_dict(cls, data: dict) -> Decision:
        return cls(
            approved=bool(data.get("approved")),
            status=str(data.get("decision") or ""),
            confirmation=data.get("confirmation"),
            decided_by=data.get("decided_by"),
            via=str(data.get("via") or ""),
            reason=str(data.get("reason") or ""),
            timeout=bool(data.get("timeout")),
        )


def _decided(confirmation: Confirmation, actor) -> None:
    """Tell the decision listeners (same transaction: the run resumes with the decision) and
    the live queue (after commit)."""
    on_decided.notify(confirmation, actor)
    _after_commit(confirmation, "decided")


# --- expire and cancel ----------------------------------------------------------------------


def _expire_one(pk: int, now) -> bool:
    with transaction.atomic():
        updated = Confirmation.objects.filter(
            pk=pk, status=Confirmation.Status.PENDING, expires_at__lte=now
        ).update(status=Confirmation.Status.EXPIRED, decided_at=now, decided_via="system")
        if not updated:
            return False
        confirmation = Confirmation.objects.select_related("organization").get(pk=pk)
        actor = system_actor(confirmation.organization, label="confirmation expiry")
        audit.record(
            actor=actor,
            action="confirmation.expire",
            target=confirmation,
            before={"status": Confirmation.Status.PENDING},
            after={"status": Confirmation.Status.EXPIRED},
            reason="expired: treated as rejected, nothing was executed",
        )
        _decided(confirmation, actor)
    return True


def confirmations_expire(now=None) -> int:
    """Expire every pending confirmation past its deadline (the beat task calls this)."""
    now = now or timezone.now()
    overdue = list(
        Confirmation.objects.filter(status=Confirmation.Status.PENDING, expires_at__lte=now)
        .order_by("expires_at")
        .values_list("pk", flat=True)[:1000]
    )
    return sum(1 for pk in overdue if _expire_one(pk, now))


@transaction.atomic
def confirmation_cancel(*, actor, confirmation: Confirmation, reason: str = "") -> Confirmation:
    """Withdraw a pending confirmation (its requester, or someone with policy.manage)."""
    own = actor.member is not None and actor.member.pk == confirmation.requester_id
    if confirmation.organization_id != actor.organization.pk:
        raise NotFound(_("No such confirmation."))
    if not (own or actor.has("policy.manage") or actor.kind == "system"):
        raise NotPermitted(_("You cannot cancel this confirmation."))
    now = timezone.now()
    updated = Confirmation.objects.filter(
        pk=confirmation.pk, status=Confirmation.Status.PENDING
    ).update(
        status=Confirmation.Status.CANCELLED,
        decided_at=now,
        decided_via="system",
        decided_by=actor.member,
        decision_reason=reason[:2000],
    )
    confirmation.refresh_from_db()
    if not updated:
        raise _already(confirmation)
    audit.record(
        actor=actor,
        action="confirmation.cancel",
        target=confirmation,
        before={"status": Confirmation.Status.PENDING},
        after={"status": Confirmation.Status.CANCELLED},
        reason=reason,
    )
    _decided(confirmation, actor)
    return confirmation


# --- surfaces: live queue, card listeners ---------------------------------------------------


def queue_item(confirmation: Confirmation) -> dict:
    """What the console's live queue shows (and the websocket pushes)."""
    return {
        "id": confirmation.pk,
        "status": confirmation.status,
        "tool": confirmation.tool,
        "summary": confirmation.summary,
        "risk_level": confirmation.risk_level,
        "blast_radius": confirmation.blast_radius,
        "requester": confirmation.requester_id,
        "deciders": list(confirmation.decider_ids),
        "required_approvals": confirmation.required_approvals,
        "expires_at": confirmation.expires_at.isoformat(),
        "decided_via": confirmation.decided_via,
        "decided_by": confirmation.decided_by_id,
        "run": confirmation.run_id,
    }


def _after_commit(confirmation: Confirmation, event: str) -> None:
    item = queue_item(confirmation)
    organization_id = confirmation.organization_id

    def push() -> None:
        try:
            from asgiref.sync import async_to_sync
            from channels.layers import get_channel_layer

            layer = get_channel_layer()
            if layer is not None:
                async_to_sync(layer.group_send)(
                    group_name(organization_id),
                    {"type": "confirmation.event", "event": event, "confirmation": item},
                )
        except Exception:  # a live view missing an update must not fail the decision
            logger.warning("confirmation %s: live update not sent", item["id"], exc_info=True)

    transaction.on_commit(push)


def confirmation_send_cards(*, confirmation_id: int) -> int:
    """Have a new confirmation's cards sent (the task `confirmation_notify` calls this after
    commit): every `on_created` listener is told while it is pending; returns the cards sent."""
    confirmation = Confirmation.objects.filter(pk=confirmation_id).first()
    if confirmation is None or not confirmation.is_pending:
        return 0
    return sum(sent or 0 for sent in on_created.notify(confirmation))


# --- the runtime's entry point --------------------------------------------------------------


@dataclass
class ToolCallGate:
    """What the runtime does with one tool call: "allow", "deny" (with `reason`) or "confirm"
    (wait on `confirmation.wait_key`)."""

    action: str
    reason: str = ""
    confirmation: Confirmation | None = None
    assessment: RiskAssessment | None = None
    policy_result: object = None
    retry_after: int | None = None

    def as_dict(self) -> dict:
        """JSON-safe, for the runtime to store in a step (replayed, never re-evaluated)."""
        return {
            "action": self.action,
            "reason": self.reason,
            "confirmation": self.confirmation.pk if self.confirmation else None,
            "wait_key": self.confirmation.wait_key if self.confirmation else "",
            "level": self.assessment.level if self.assessment else None,
            "expires_at": self.confirmation.expires_at.isoformat() if self.confirmation else None,
            "retry_after": self.retry_after,
        }


def tool_call_gate(
    *,
    organization,
    tool: str,
    arguments: dict,
    declared_risk: str = "low",
    idempotency_key: str,
    requester: Member | None = None,
    agent_id: int | None = None,
    run_id: int | None = None,
    step_index: int | None = None,
    policy_chain_id: int | None = None,
    conversation_key: str = "",
    trace_id: str = "",
    always_confirm: bool = False,
    internal_domains: list[str] | None = None,
    reach: dict | None = None,
) -> ToolCallGate:
    """Policy chain at the tool_call stage, then risk; a high-risk (or `always_confirm`) call
    gets its Confirmation, keyed by `idempotency_key` — pass the key of the wait step the run
    will pause on, and use it as the wait key too, so a replayed run finds the same one.

    `reach` is what the caller resolved of the call's blast radius (a message to a group: how
    many people it reaches, `risk.classify`); ask only about a call that can succeed."""
    result = policy.evaluate(
        organization=organization,
        stage="tool_call",
        payload={"tool": tool, "arguments": arguments, "risk": declared_risk},
        chain_id=policy_chain_id,
        member_id=requester.pk if requester is not None else None,
        agent_id=agent_id,
        run_id=run_id,
        step_index=step_index,
        conversation_key=conversation_key,
        trace_id=trace_id,
    )
    if result.action == policy.DENY:
        return ToolCallGate(
            "deny", result.reason, policy_result=result, retry_after=result.retry_after
        )

    assessment = classify(
        tool=tool,
        arguments=arguments,
        declared=declared_risk,
        policy_result=result,
        internal_domains=internal_domains,
        reach=reach,
    )
    if not (assessment.needs_confirmation or always_confirm):
        return ToolCallGate("allow", assessment=assessment, policy_result=result)
    if always_confirm and not assessment.needs_confirmation:
        assessment.reasons.append("the template always asks for this tool")
    confirmation = confirmation_create(
        organization=organization,
        tool=tool,
        arguments=arguments,
        assessment=assessment,
        idempotency_key=idempotency_key,
        requester=requester,
        agent_id=agent_id,
        run_id=run_id,
        step_index=step_index,
        wait_key=idempotency_key,
        conversation_key=conversation_key,
        trace_id=trace_id,
    )
    return ToolCallGate(
        "confirm",
        "; ".join(assessment.reasons),
        confirmation=confirmation,
        assessment=assessment,
        policy_result=result,
    )
