"""Slack Block Kit confirmation messages (actions block with approve/reject) and decided state."""

from __future__ import annotations

import json

from connectors.base.language import decided_line, expires_line


def confirmation_card(card) -> dict:
    blocks: list[dict] = [
        {"type": "header", "text": {"type": "plain_text", "text": card.title[:150]}},
        {"type": "section", "text": {"type": "mrkdwn", "text": card.summary[:3000]}},
    ]
    if card.details:
        blocks.append(
            {
                "type": "section",
                "fields": [
                    {"type": "mrkdwn", "text": f"*{label}*\n{value}"}
                    for label, value in card.details[:10]
                ],
            }
        )
    blocks.append(
        {
            "type": "actions",
            "block_id": "cadre_confirmation",
            "elements": [
                {
                    "type": "button",
                    "action_id": "cadre_approve",
                    "style": "primary",
                    "text": {"type": "plain_text", "text": str(card.approve_label)},
                    "value": json.dumps(card.approve_value),
                },
                {
                    "type": "button",
                    "action_id": "cadre_reject",
                    "style": "danger",
                    "text": {"type": "plain_text", "text": str(card.reject_label)},
                    "value": json.dumps(card.reject_value),
                },
            ],
        }
    )
    blocks.append(
        {
            "type": "context",
            "elements": [{"type": "mrkdwn", "text": expires_line(card.expires_at)}],
        }
    )
    return {"text": f"{card.title}: {card.summary}"[:3000], "blocks": blocks}


def decided_card(card, *, decided_by: str, decision: str, decided_at) -> dict:
    word = card.approved_word if decision == "approve" else card.rejected_word
    line = decided_line(str(word), decided_by, decided_at, "%Y-%m-%d %H:%M %Z")
    return {
        "text": line,
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": card.summary or line}},
            {"type": "context", "elements": [{"type": "mrkdwn", "text": f"*{line}*"}]},
        ],
    }
