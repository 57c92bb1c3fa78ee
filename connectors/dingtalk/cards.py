"""DingTalk interactive cards: the confirmation's card data for a template with two buttons.

The card template (made once in DingTalk's card builder, id in settings.card_template_id) shows
`title`, `summary`, `details` and `status`, its buttons labelled `approve_label` /
`reject_label` ("Approve" / "Reject", or "Save as skill" / "Dismiss" on a skill proposal's
card) send the callback params `approve_params` / `reject_params` (JSON strings holding the
signed decision token).
"""

from __future__ import annotations

import hashlib
import json

from connectors.base.language import decided_line


def confirmation_card(card) -> dict:
    token = card.approve_value.get("cadre_token", "")
    return {
        "outTrackId": "cadre-" + hashlib.sha256(token.encode()).hexdigest()[:32],
        "cardData": {
            "cardParamMap": {
                "title": card.title,
                "summary": card.summary,
                "details": "\n".join(f"{label}: {value}" for label, value in card.details),
                "expires": card.expires_at.isoformat(),
                "status": "pending",
                "approve_params": json.dumps(card.approve_value),
                "reject_params": json.dumps(card.reject_value),
                "approve_label": str(card.approve_label),
                "reject_label": str(card.reject_label),
            }
        },
    }


def decided_card(card, *, decided_by: str, decision: str, decided_at) -> dict:
    word = card.approved_word if decision == "approve" else card.rejected_word
    return {
        "cardData": {
            "cardParamMap": {
                "status": decision,
                "decided": decided_line(str(word), decided_by, decided_at, "%Y-%m-%d %H:%M %Z"),
                "approve_params": "",
                "reject_params": "",
            }
        }
    }
