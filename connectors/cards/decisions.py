"""Confirmation cards: signed single-use decision tokens, sending the cards, updating every copy.

A high-risk confirmation (owned by governance) is delivered as an interactive card to each
person allowed to decide. Each decider's card carries its own token:

    token = base64url(confirmation_ref "." decider_id "." expires "." nonce) "." hmac

HMAC-SHA256 with a key derived from SECRET_KEY. The token binds the confirmation, the decider
and the expiry; the nonce is inserted into `DecisionTokenUse` (unique) when used, so a token
works once. A click from anyone else, a reused token or an expired confirmation is refused with
a message the clicker sees. After a decision every copy of the card is updated.

Governance owns the confirmation (see `ConfirmationLike`) and decides it
(`cadre.governance.confirmations.confirmation_decide`); it tells the connectors of a new
confirmation and of each decision through its `on_created` / `on_decided` listeners
(`cards_for_created`, `cards_for_decided`, registered in `ConnectorsConfig.ready()`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from cadre.errors import CadreError
from cadre.governance.confirmations import (
    APPROVE,
    REJECT,
    confirmation_decide,
    on_created,
    on_decided,
)
from cadre.ports import Registry
from cadre.tenancy.models import IMIdentity, Member
from connectors.base import DecisionOutcome, ParsedEvent, constant_time_equal, platform_for
from connectors.base.identities import identity_resolve
from connectors.base.language import speaking_to
from connectors.models import Connector, DecisionTokenUse, Delivery, InboundEvent
from connectors.outbound.sending import send

logger = logging.getLogger(__name__)

TOKEN_FIELD = "cadre_token"
DECISION_FIELD = "decision"


@dataclass(frozen=True)
class CardKind:
    """A card sent with a decision token that is not a governance confirmation (a skill
    proposal's): what an accepted click shows at once, and what the worker does with it."""

    outcome: Callable[[Member, str], DecisionOutcome]  # (clicker, decision)
    apply: Callable[[InboundEvent, str, str, Member], str]  # (event, ref, decision, clicker)


# Those cards, by the prefix of their reference; filled in `ConnectorsConfig.ready()`.
CARD_KINDS: Registry[CardKind] = Registry("connectors.card_kinds")


def card_kind(confirmation_ref: str) -> CardKind | None:
    """The kind of card a reference names; None for a governance confirmation."""
    for prefix, kind in CARD_KINDS.items():
        if str(confirmation_ref).startswith(prefix):
            return kind
    return None


class ConfirmationLike(Protocol):
    """What connectors need from governance's Confirmation."""

    pk: Any
    summary: str
    expires_at: datetime

    def decider_members(self) -> Iterable[Any]: ...  # active Members allowed to decide


@dataclass(frozen=True)
class DecisionClaim:
    confirmation_ref: str
    decider_id: int
    expires_at: int  # unix seconds
    nonce: str


class DecisionRefused(Exception):
    """The click cannot decide: the message is shown to the person who clicked."""


@dataclass(frozen=True)
class CardContent:
    """A confirmation card, before a platform renders it."""

    confirmation_ref: str
    title: str
    summary: str
    expires_at: datetime
    approve_value: dict
    reject_value: dict
    details: list[tuple[str, str]] = field(default_factory=list)
    # The buttons and the decided state's words: a skill proposal's card
    # (connectors.cards.proposals) says "Save as skill" / "Dismiss" and "Saved as skill" /
    # "Dismissed". Rendered in the active language: the card's reader's (`speaking_to`).
    approve_label: str = gettext_lazy("Approve")
    reject_label: str = gettext_lazy("Reject")
    approved_word: str = gettext_lazy("Approved")
    rejected_word: str = gettext_lazy("Rejected")


# The decided state of an approve and of a reject, as `cards_mark_decided` shows them.
DECIDED_WORDS = (gettext_lazy("Approved"), gettext_lazy("Rejected"))


def _key() -> bytes:
    return hmac.new(
        settings.SECRET_KEY.encode(), b"cadre.connectors.decision-token.v1", hashlib.sha256
    ).digest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def decision_token(confirmation_ref: str, decider_id: int, expires_at: datetime) -> str:
    body = (
        f"{confirmation_ref}.{int(decider_id)}.{int(expires_at.timestamp())}."
        f"{secrets.token_urlsafe(12)}"
    )
    mac = hmac.new(_key(), body.encode(), hashlib.sha256).digest()
    return f"{_b64(body.encode())}.{_b64(mac)}"


def read_decision_token(token: str, *, now: datetime | None = None) -> DecisionClaim:
    """Check signature and expiry (not use): raise DecisionRefused with a visible reason."""
    try:
        body_part, mac_part = token.split(".", 1)
        body = _unb64(body_part)
        given = _unb64(mac_part)
    except (ValueError, AttributeError):
        raise DecisionRefused(_("This button is not valid.")) from None
    expected = hmac.new(_key(), body, hashlib.sha256).digest()
    if not constant_time_equal(expected, given):
        raise DecisionRefused(_("This button is not valid."))
    try:
        ref, decider, expires, nonce = body.decode().rsplit(".", 3)
        claim = DecisionClaim(ref, int(decider), int(expires), nonce)
    except ValueError:
        raise DecisionRefused(_("This button is not valid.")) from None
    current = (now or timezone.now()).timestamp()
    if current > claim.expires_at:
        raise DecisionRefused(_("This confirmation has expired; nothing was done."))
    return claim


def card_content(
    confirmation: ConfirmationLike,
    decider_id: int,
    *,
    title: str = "",
    details: list[tuple[str, str]] | None = None,
) -> CardContent:
    ref = str(confirmation.pk)
    token = decision_token(ref, decider_id, confirmation.expires_at)
    return CardContent(
        confirmation_ref=ref,
        title=str(title or getattr(confirmation, "title", "") or _("Confirmation needed")),
        # In the reader's language where governance can rebuild it (`summary_text`).
        summary=str(getattr(confirmation, "summary_text", None) or confirmation.summary),
        expires_at=confirmation.expires_at,
        approve_value={TOKEN_FIELD: token, DECISION_FIELD: APPROVE},
        reject_value={TOKEN_FIELD: token, DECISION_FIELD: REJECT},
        details=[
            (str(label), str(value))
            for label, value in (details or getattr(confirmation, "details_for_card", []) or [])
        ],
        approve_label=_("Approve"),
        reject_label=_("Reject"),
        approved_word=_("Approved"),
        rejected_word=_("Rejected"),
    )


# --- the click ----------------------------------------------------------------------------


def card_action_received(
    connector: Connector, event: ParsedEvent, event_id: int | None
) -> DecisionOutcome:
    """Synchronous part of a card click: check the token and the clicker, use the token once.

    Runs before the acknowledgement (a few indexed queries), so the person who clicked sees
    the outcome at once; the decision itself is applied by the worker (the stored event).
    The outcome is told in the clicker's language (the organization's for a stranger).
    """
    clicker = None
    if event.sender_id:
        clicker = identity_resolve(
            connector, platform_user_id=event.sender_id, tenant_key=event.tenant_key
        )
    with speaking_to(clicker, organization=connector.organization):
        return _card_action_checked(connector, event, event_id, clicker)


def _card_action_checked(
    connector: Connector, event: ParsedEvent, event_id: int | None, member: Member | None
) -> DecisionOutcome:
    if event_id is None:
        return DecisionOutcome(False, _("This click was already received."))
    token = str(event.action.get(TOKEN_FIELD, ""))
    decision = str(event.action.get(DECISION_FIELD, ""))
    try:
        if decision not in (APPROVE, REJECT):
            raise DecisionRefused(_("This button is not valid."))
        claim = read_decision_token(token)
        if member is None or member.pk != claim.decider_id:
            raise DecisionRefused(_("Only the person this card was sent to can decide here."))
        if member.organization_id != connector.organization_id:
            raise DecisionRefused(_("Only the person this card was sent to can decide here."))
        earlier = (
            DecisionTokenUse.objects.filter(confirmation_ref=claim.confirmation_ref)
            .exclude(nonce=claim.nonce)
            .first()
        )
        if earlier is not None:
            raise DecisionRefused(
                (
                    _("This was already decided (approved) at %(time)s.")
                    if earlier.decision == APPROVE
                    else _("This was already decided (rejected) at %(time)s.")
                )
                % {"time": f"{earlier.used_at:%Y-%m-%d %H:%M %Z}".strip()}
            )
        try:
            with transaction.atomic():
                DecisionTokenUse.objects.create(
                    nonce=claim.nonce,
                    confirmation_ref=claim.confirmation_ref,
                    decider_id=claim.decider_id,
                    decision=decision,
                )
        except IntegrityError:
            raise DecisionRefused(_("This button was already used.")) from None
    except DecisionRefused as refusal:
        InboundEvent.objects.filter(pk=event_id).update(
            status=InboundEvent.Status.IGNORED,
            error=str(refusal)[:300],
            processed_at=timezone.now(),
        )
        return DecisionOutcome(False, str(refusal))
    InboundEvent.objects.filter(pk=event_id).update(member=member)
    kind = card_kind(claim.confirmation_ref)
    if kind is not None:
        return kind.outcome(member, decision)
    text = (
        _("Approved by %(name)s. Recording the decision…")
        if decision == APPROVE
        else _("Rejected by %(name)s. Recording the decision…")
    )
    return DecisionOutcome(True, text % {"name": member.display_name}, decision)


def decision_apply(event: InboundEvent) -> str:
    """Worker part of a click: hand the decision to governance, then update every copy of
    the card."""
    action = event.payload.get("action", {})
    decision = str(action.get(DECISION_FIELD, ""))
    claim = read_decision_token(str(action.get(TOKEN_FIELD, "")), now=event.received_at)
    member = event.member
    kind = card_kind(claim.confirmation_ref)
    if kind is not None:  # a skill proposal's card
        return kind.apply(event, claim.confirmation_ref, decision, member)
    try:
        confirmation_decide(
            confirmation_id=claim.confirmation_ref,
            decider=member,
            decision=decision,
            via=event.connector.platform,
        )
    except CadreError as error:
        # Already decided, expired, or this person may no longer decide: say so.
        return f"refused: {error.message}"
    cards_mark_decided(
        claim.confirmation_ref,
        decided_by=member.display_name,
        decision=decision,
        decided_at=event.received_at,
    )
    return decision


# --- sending and updating cards -------------------------------------------------------------


def confirmation_card(confirmation: ConfirmationLike, decider) -> dict:
    """Platform-neutral card content for one decider (each platform renders it), in the
    decider's language. The approve/reject values carry the decider's signed single-use token."""
    with speaking_to(decider):
        return _confirmation_card(confirmation, decider)


def _confirmation_card(confirmation: ConfirmationLike, decider) -> dict:
    content = card_content(confirmation, decider.pk)
    return {
        "confirmation_id": confirmation.pk,
        "title": content.title,
        "summary": content.summary,
        "fields": [{"label": label, "value": value} for label, value in content.details],
        "expires_at": content.expires_at.isoformat(),
        "actions": [
            {
                "id": APPROVE,
                "label": _("Approve"),
                "style": "primary",
                "value": content.approve_value,
            },
            {"id": REJECT, "label": _("Reject"), "style": "danger", "value": content.reject_value},
        ],
    }


def cards_for_created(confirmation: ConfirmationLike) -> int:
    """Governance's `on_created` listener: send the new confirmation's cards; how many."""
    return len(cards_send(confirmation))


def cards_for_decided(confirmation, actor) -> None:
    """Governance's `on_decided` listener: once the decision commits, update the cards of a
    confirmation decided elsewhere (console, API, expiry, cancel). A decision taken on a card
    is followed by `decision_apply`'s own update."""
    if str(confirmation.decided_via).startswith("im:"):
        return
    ref, decision = str(confirmation.pk), confirmation.status
    # Who decided, by name; "" for no person (expiry, cancel): the card then says only when.
    decided_by = getattr(getattr(confirmation, "decided_by", None), "display_name", "") or ""

    def update() -> None:
        try:
            cards_mark_decided(
                ref, decided_by=decided_by, decision=decision, decided_at=timezone.now()
            )
        except Exception:  # a card left showing its buttons must not fail the decision
            logger.warning("confirmation %s: cards not updated", ref, exc_info=True)

    transaction.on_commit(update)


def cards_send(
    confirmation: ConfirmationLike, *, title: str = "", details: list[tuple[str, str]] | None = None
) -> list[Delivery]:
    """Send the confirmation card to every decider reachable through a card-capable connector."""
    sent: list[Delivery] = []
    deciders = list(confirmation.decider_members())
    if not deciders:
        return sent
    organization_id = deciders[0].organization_id
    connectors = [
        c
        for c in Connector.objects.filter(
            organization_id=organization_id, status=Connector.Status.ACTIVE
        )
        if platform_for(c).capabilities.cards
    ]
    identities = IMIdentity.objects.filter(
        organization_id=organization_id,
        member__in=deciders,
        platform__in={c.platform for c in connectors},
    )
    by_member: dict[int, list[IMIdentity]] = {}
    for identity in identities:
        by_member.setdefault(identity.member_id, []).append(identity)
    for decider in deciders:
        for identity in by_member.get(decider.pk, []):
            connector = next(c for c in connectors if c.platform == identity.platform)
            platform = platform_for(connector)
            with speaking_to(decider):  # each decider reads the card in their language
                content = card_content(confirmation, decider.pk, title=title, details=details)
                card = platform.render_confirmation_card(content)
            delivery = send(
                connector,
                kind="card",
                recipient=identity.platform_user_id,
                body={"card": card, "summary": content.summary},
                idempotency_key=f"confirmation:{content.confirmation_ref}:{decider.pk}:"
                f"{identity.platform}",
                confirmation_ref=content.confirmation_ref,
            )
            sent.append(delivery)
            break  # one card per decider: their first reachable platform
    return sent


def cards_mark_decided(
    confirmation_ref: str,
    *,
    decided_by: str,
    decision: str,
    decided_at: datetime,
    words: tuple[str, str] = DECIDED_WORDS,
) -> int:
    """Update every sent copy of the confirmation's card to show who decided and when
    (`words`: the decided state of an approve and of a reject, lazy texts rendered in each
    copy's reader's language)."""
    updated = 0
    copies = Delivery.objects.filter(
        confirmation_ref=confirmation_ref, kind="card", status=Delivery.Status.SENT
    ).select_related("connector", "connector__organization")
    for copy in copies:
        platform = platform_for(copy.connector)
        with speaking_to(_copy_reader(copy), organization=copy.connector.organization):
            card = platform.render_decided_card(
                CardContent(
                    confirmation_ref=confirmation_ref,
                    title="",
                    summary=copy.body.get("summary", ""),
                    expires_at=decided_at,
                    approve_value={},
                    reject_value={},
                    approved_word=str(words[0]),
                    rejected_word=str(words[1]),
                ),
                decided_by=decided_by,
                decision=decision,
                decided_at=decided_at,
            )
        platform.transport().update_card(
            copy.platform_message_id, card, extra=copy.body.get("_delivery", {})
        )
        updated += 1
    return updated


def _copy_reader(copy: Delivery) -> Member | None:
    """The member a sent card was addressed to (None when no identity names them now)."""
    identity = (
        IMIdentity.objects.filter(
            organization_id=copy.connector.organization_id,
            platform=copy.connector.platform,
            platform_user_id=copy.recipient,
        )
        .select_related("member", "member__organization")
        .first()
    )
    return identity.member if identity is not None else None


def register() -> None:
    """Listen to governance's confirmations (called by `ConnectorsConfig.ready()`)."""
    on_created.register(cards_for_created)
    on_decided.register(cards_for_decided)
