"""Webhook confirmation cards: a plain JSON description the receiving system renders."""

from __future__ import annotations


def confirmation_card(card) -> dict:
    return {
        "type": "confirmation",
        "confirmation_id": card.confirmation_ref,
        "title": card.title,
        "summary": card.summary,
        "details": [{"label": str(label), "value": str(value)} for label, value in card.details],
        "expires_at": card.expires_at.isoformat(),
        "actions": [
            {"label": str(card.approve_label), "style": "primary", "value": card.approve_value},
            {"label": str(card.reject_label), "style": "danger", "value": card.reject_value},
        ],
    }


def decided_card(card, *, decided_by: str, decision: str, decided_at) -> dict:
    return {
        "type": "confirmation_decided",
        "confirmation_id": card.confirmation_ref,
        "decision": decision,
        "decided_by": decided_by,
        "decided_at": decided_at.isoformat(),
        "actions": [],
    }
