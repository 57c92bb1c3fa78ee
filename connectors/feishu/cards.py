"""Feishu interactive cards (message card JSON) for confirmations and their decided state."""

from __future__ import annotations

from connectors.base.language import decided_line, expires_line


def _text(content) -> dict:
    return {"tag": "plain_text", "content": str(content)}


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
    elements.append({"tag": "note", "elements": [_text(expires_line(card.expires_at))]})
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
            "title": _text(word),
            "template": "green" if decision == "approve" else "red",
        },
        "elements": [
            {"tag": "div", "text": {"tag": "lark_md", "content": card.summary or " "}},
            {
                "tag": "note",
                "elements": [
                    _text(decided_line(str(word), decided_by, decided_at, "%Y-%m-%d %H:%M %Z"))
                ],
            },
        ],
    }
