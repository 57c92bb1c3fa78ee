"""Feishu interactive cards (message card JSON) for confirmations and their decided state."""

from __future__ import annotations


def _text(content: str) -> dict:
    return {"tag": "plain_text", "content": content}


def confirmation_card(card) -> dict:
    elements: list[dict] = [{"tag": "div", "text": {"tag": "lark_md", "content": card.summary}}]
    if card.details:
        elements.append(
            {
                "tag": "div",
                "fields": [
                    {
                        "is_short": True,
                        "text": {"tag": "lark_md", "content": f"**{label}**\n{value}"},
                    }
                    for label, value in card.details
                ],
            }
        )
    elements.append(
        {
            "tag": "action",
            "actions": [
                {
                    "tag": "button",
                    "text": _text(card.approve_label),
                    "type": "primary",
                    "value": card.approve_value,
                },
                {
                    "tag": "button",
                    "text": _text(card.reject_label),
                    "type": "danger",
                    "value": card.reject_value,
                },
            ],
        }
    )
    elements.append(
        {"tag": "note", "elements": [_text(f"Expires {card.expires_at:%Y-%m-%d %H:%M %Z}".strip())]}
    )
    return {
        # update_multi: one card content for everyone, so a PATCH updates every viewer's copy
        "config": {"wide_screen_mode": True, "update_multi": True},
        "header": {"title": _text(card.title), "template": "orange"},
        "elements": elements,
    }


def decided_card(card, *, decided_by: str, decision: str, decided_at) -> dict:
    word = card.approved_word if decision == "approve" else card.rejected_word
    return {
        "config": {"wide_screen_mode": True, "update_multi": True},
        "header": {
            "title": _text(f"{word}"),
            "template": "green" if decision == "approve" else "red",
        },
        "elements": [
            {"tag": "div", "text": {"tag": "lark_md", "content": card.summary or " "}},
            {
                "tag": "note",
                "elements": [
                    _text(f"{word} by {decided_by} at {decided_at:%Y-%m-%d %H:%M %Z}".strip())
                ],
            },
        ],
    }
