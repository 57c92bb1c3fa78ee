"""Skill proposal cards: a proposal drafted from an employee's correction in an IM conversation
is sent to them as an interactive card ("Save as skill" / "Dismiss"); a click decides it.

The skills layer owns the proposal and tells the connectors through its ports
(`cadre.skills.services.proposal_created` / `proposal_decided`, registered in
`ConnectorsConfig.ready()`). The card is a confirmation card (`connectors.cards.decisions`): the
same signed single-use token bound to the employee, the same card-action path back (the click is
checked before the ack, the worker applies it), with the reference `skill-proposal:<id>` and
its own labels. A proposal made in web chat is shown there, not sent over IM.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from cadre.errors import CadreError
from cadre.governance.confirmations import APPROVE
from cadre.skills import selectors, services
from cadre.skills.services import proposal_created, proposal_decided
from cadre.tenancy.actors import member_actor
from connectors.base import DecisionOutcome, platform_for
from connectors.base.language import speaking_to
from connectors.cards.decisions import (
    CARD_KINDS,
    CardContent,
    CardKind,
    cards_mark_decided,
    decision_token,
)
from connectors.models import Delivery, InboundEvent
from connectors.outbound.sending import send

logger = logging.getLogger(__name__)

REF_PREFIX = "skill-proposal:"
# Rendered in the reader's language (`speaking_to`).
TITLE = gettext_lazy("Save this as a skill?")
LABELS = (gettext_lazy("Save as skill"), gettext_lazy("Dismiss"))
WORDS = (gettext_lazy("Saved as skill"), gettext_lazy("Dismissed"))
# The buttons stay usable this long; the proposal itself waits in "My skill proposals".
BUTTON_LIFETIME = timedelta(days=30)


def proposal_ref(proposal) -> str:
    return f"{REF_PREFIX}{proposal.pk}"


def card_content(proposal) -> CardContent:
    """The proposal's card for its employee (the only person who may decide it), in the active
    language."""
    ref = proposal_ref(proposal)
    expires_at = proposal.created_at + BUTTON_LIFETIME
    token = decision_token(ref, proposal.member_id, expires_at)
    details = [(_("Skill"), proposal.name), (_("From your message"), proposal.correction[:200])]
    if proposal.package_id:
        details.insert(1, (_("New version of"), proposal.package.full_name))
    return CardContent(
        confirmation_ref=ref,
        title=str(TITLE),
        summary=proposal.summary,
        expires_at=expires_at,
        approve_value={"cadre_token": token, "decision": "approve"},
        reject_value={"cadre_token": token, "decision": "reject"},
        details=details,
        approve_label=str(LABELS[0]),
        reject_label=str(LABELS[1]),
        approved_word=str(WORDS[0]),
        rejected_word=str(WORDS[1]),
    )


def card_for_created(proposal) -> int:
    """Skills' `proposal_created` listener: send the card to the employee in the IM
    conversation the correction came from; how many were sent (0 for a web-chat proposal)."""
    event = (
        InboundEvent.objects.filter(run_ref=str(proposal.run_id), kind="message")
        .select_related("connector")
        .first()
    )
    if event is None or not event.sender_id:
        return 0  # not from IM: web chat shows the proposal itself
    connector = event.connector
    if connector.status != connector.Status.ACTIVE:
        return 0
    platform = platform_for(connector)
    if not platform.capabilities.cards:
        return 0
    with speaking_to(proposal.member):  # the employee reads it in their language
        content = card_content(proposal)
        card = platform.render_confirmation_card(content)
    send(
        connector,
        kind="card",
        recipient=event.sender_id,
        body={"card": card, "summary": content.summary},
        idempotency_key=f"{content.confirmation_ref}:card",
        confirmation_ref=content.confirmation_ref,
    )
    return 1


def card_for_decided(proposal, via: str) -> None:
    """Skills' `proposal_decided` listener: once a decision taken elsewhere (console, API, a
    "yes, save it" reply) commits, the card shows it and loses its buttons. A click on the
    card is followed by `click_apply`'s own update."""
    if str(via).startswith("im:"):
        return
    ref = proposal_ref(proposal)
    decision = APPROVE if proposal.status == "confirmed" else "reject"

    def update() -> None:
        if not Delivery.objects.filter(confirmation_ref=ref, kind="card").exists():
            return
        try:
            cards_mark_decided(
                ref,
                decided_by=proposal.member.display_name,
                decision=decision,
                decided_at=proposal.decided_at or timezone.now(),
                words=WORDS,
            )
        except Exception:  # a card left showing its buttons must not fail the decision
            logger.warning("skill proposal %s: cards not updated", proposal.pk, exc_info=True)

    transaction.on_commit(update)


def click_outcome(member, decision: str) -> DecisionOutcome:
    """What the employee sees at once after an accepted click (in the active language: the
    clicker's, `card_action_received`)."""
    text = (
        _("Saving it as a skill, %(name)s…")
        if decision == APPROVE
        else _("Dismissing it, %(name)s…")
    )
    return DecisionOutcome(True, text % {"name": member.display_name}, decision)


def click_apply(event: InboundEvent, ref: str, decision: str, member) -> str:
    """Worker part of an accepted click: confirm (a skill candidate goes to review) or
    dismiss the proposal as the employee, then update the card."""
    actor = member_actor(member)
    via = f"im:{event.connector.platform}"
    try:
        proposal = selectors.proposal_get(actor, ref.removeprefix(REF_PREFIX))
        if decision == APPROVE:
            services.proposal_confirm(actor=actor, proposal=proposal, via=via)
        else:
            services.proposal_dismiss(actor=actor, proposal=proposal, via=via)
    except CadreError as error:  # already decided elsewhere, or no longer theirs
        return f"refused: {error.message}"
    cards_mark_decided(
        ref,
        decided_by=member.display_name,
        decision=decision,
        decided_at=event.received_at,
        words=WORDS,
    )
    return "confirmed" if decision == APPROVE else "dismissed"


def register() -> None:
    """Listen to the skills layer's proposals (called by `ConnectorsConfig.ready()`)."""
    proposal_created.register(card_for_created)
    proposal_decided.register(card_for_decided)
    CARD_KINDS.register(REF_PREFIX, CardKind(outcome=click_outcome, apply=click_apply))
