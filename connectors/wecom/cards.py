"""WeCom template cards (button_interaction) for confirmations; the decided state."""

from __future__ import annotations

import hashlib
import json

from connectors.base.language import decided_line


def confirmation_card(card) -> dict:
    token = card.approve_value.get("cadre_token", "")
    return {
        "card_type": "button_interaction",
        "source": {"desc": "Cadre"},
        "main_title": {"title": card.title[:26], "desc": card.summary[:120]},
        "task_id": "cadre_" + hashlib.sha256(token.encode()).hexdigest()[:40],
        "horizontal_content_list": [
            {"keyname": str(label)[:5], "value": str(value)[:30]}
            for label, value in card.details[:6]
        ],
        "button_list": [
            {"text": str(card.approve_label), "style": 1, "key": json.dumps(card.approve_value)},
            {"text": str(card.reject_label), "style": 2, "key": json.dumps(card.reject_value)},
        ],
    }


def decided_card(card, *, decided_by: str, decision: str, decided_at) -> dict:
    word = card.approved_word if decision == "approve" else card.rejected_word
    return {"replace_name": decided_line(str(word), decided_by, decided_at, "%m-%d %H:%M")}
