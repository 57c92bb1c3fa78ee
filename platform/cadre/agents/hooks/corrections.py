"""A person correcting a fact in conversation ("No, that's wrong: our discount limit is 12%, not
10%", "其实用编号列表，不要用项目符号"): the memory_write hook applies it as memory feedback —
the statements it contradicts are superseded, as the person who said it, exactly as
`POST /api/v1/memories/feedback/` does — and the person is told what happened, in web chat (the
run's `memory_feedback` event) and in their IM conversation (a line after the reply).

A correction of a line of the agent's SOP is the skills layer's (a proposed change, see
`cadre.skills.hooks`); a reusable lesson ("next time, also include …") is a skill proposal.
"""

from __future__ import annotations

from django.utils import translation

from cadre.agents.runtime.records import delivery
from cadre.agents.runtime.records.bookkeeping import emit
from cadre.memory import services as memory_services
from cadre.tenancy.actors import member_actor

EVENT = "memory_feedback"


def chat_correction(run, said: str) -> dict | None:
    """Apply the person's message as a correction when it reads as one; what happened
    (`outcome`, `message`, the ids written and superseded), or None when it is no correction.
    The person is told at once when memory changed; `acknowledge` tells them otherwise."""
    member = run.member
    if run.trigger != "message" or run.parent_id is not None:
        return None  # events and subagents: no person said it
    if member is None or not member.is_active or not memory_services.is_factual_correction(said):
        return None
    # What the person is told (`result.message`) is in their language.
    with translation.override(delivery.run_language(run)):
        result = memory_services.memory_feedback(
            actor=member_actor(member), text=said, conversation_id=str(run.session_id)
        )
    data = {
        "outcome": result.outcome,
        "message": result.message,
        "created": [memory.pk for memory in result.created],
        "superseded": [memory.pk for memory in result.superseded],
    }
    if result.superseded:
        acknowledge(run, data)
    return data


def acknowledge(run, data: dict) -> None:
    """Tell the person what their correction did: the chat's event, and a line in their IM."""
    emit(run.pk, EVENT, data)
    delivery.follow_up_deliver(run, EVENT, data["message"])
