"""Delivery channels: who sends a finished run's reply, and an agent's messages, out of the runtime.

The runtime does not know the IM platforms. Each channel (one per IM platform, registered by the
connectors in their `ready()` under the session channel's name) receives a `Reply` — what
delivery needs of a finished run, never the `Run` itself — and the id of each message an agent
sends with `im_send`. Both are handed over once the runtime's transaction commits. A channel with
nothing registered delivers nothing: the run finishes all the same.

A person always hears back: a run that ends without a reply (failed, cancelled, stopped by its
limits, its agent unavailable) hands its channel a notice instead, one of `NOTICES`: what
happened and what to do, never the internal error (that stays on the run for those who manage
it). The web chat shows the same line (`run_notice`); a run a hard budget refuses replies with
the budget's reason and `BUDGET_ADVICE`.

An agent message that no channel can deliver (none registered, or the channel's `check` finds no
way to reach any recipient) fails at once, with the reason, so the tool's result says so —
`message_unreachable` asks the same of a message not yet stored, so `im_send` can refuse before
anyone is asked to confirm a send that cannot succeed; one
that fails later is marked by `message_outcome`, which corrects the recorded tool effect and
tells the chat, so chat, transcript and API never show `queued` for a message that failed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

from django.db import transaction
from django.utils import translation
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, gettext_noop

from cadre.agents.models import AgentMessage, Run, RunEvent, ToolEffect
from cadre.governance import audit
from cadre.ports import Registry
from cadre.tenancy.actors import system_actor
from cadre.tenancy.languages import member_language, organization_language


@dataclass(frozen=True)
class Reply:
    """A finished run's reply, as its channel delivers it."""

    run_id: int
    session_id: int
    channel: str  # the session's channel: the IM platform
    conversation: str  # the session's external id: "<connector id>:<chat id>"
    status: str  # the run's terminal status
    text: str  # what the person is shown (originals, not the model's placeholders)
    notice: str = ""  # "" for the agent's reply, else what `text` tells of (a `NOTICES` key)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Reply:
        return cls(**data)


@dataclass(frozen=True)
class Channel:
    """One platform's delivery: `reply` sends a run's reply; `message` sends an agent message
    (an `AgentMessage` id) to its recipients; `check`, when given, says why an `AgentMessage`
    (stored or not yet) cannot be delivered at all ("" when it can be tried)."""

    reply: Callable[[Reply], object]
    message: Callable[[int], object]
    check: Callable[[AgentMessage], str] | None = None


channels: Registry[Channel] = Registry("delivery channels")


class _Lines(dict):
    """Lazy texts by code: reading one gives it in the active language (a plain `str`)."""

    def __getitem__(self, key):
        return str(super().__getitem__(key))

    def get(self, key, default=None):
        value = super().get(key)
        return default if value is None else str(value)


# What a person is told of a run that ended without a reply, by the code its finish records
# (`Run.output["notice"]`): what happened and what to do, no internal details. In the active
# language: the reader's (`run_reply` speaks the run's member's).
NOTICES = _Lines(
    {
        "failed": gettext_lazy(
            "Sorry, I could not finish that: something went wrong on my side. Please try again in "
            "a moment; if it keeps happening, tell your administrator."
        ),
        "cancelled": gettext_lazy(
            "This request was cancelled before I finished it. Send it again if you still need it."
        ),
        "timed_out": gettext_lazy(
            "I stopped: what I was waiting for (such as a confirmation) did not come in time. "
            "Send the request again if you still need it."
        ),
        "limit": gettext_lazy(
            "I stopped before finishing: this request needed more work than I may do for one "
            "request. Please try a smaller request, or ask your administrator to raise the limit."
        ),
        "unavailable": gettext_lazy(
            "I could not take this request: this assistant is not available right now. Please "
            "ask your administrator."
        ),
    }
)
# In English (tests match it); the reply gives it in the reader's language, `_(BUDGET_ADVICE)`.
BUDGET_ADVICE = gettext_noop("Please ask your administrator if you need it sooner.")


def budget_refusal(reason: str) -> str:
    """The reply of a run a hard budget refused: the budget's reason and what to do (in the
    active language: the run's member's, `run_execute`)."""
    return _("I can't run this request: %(reason)s %(advice)s") % {
        "reason": reason,
        "advice": _(BUDGET_ADVICE),
    }


def run_language(run: Run) -> str:
    """The language a run speaks to its person in: its member's (docs/i18n.md), else its
    organization's. The LLM-facing prompts stay as they are; only what a person reads follows."""
    if run.member_id is not None:
        return member_language(run.member)
    return organization_language(run.organization)


def run_notice(run: Run) -> str:
    """The line a person is shown for a run that ended without a reply; "" for any other."""
    if run.status not in (Run.Status.FAILED, Run.Status.CANCELLED):
        return ""
    return NOTICES.get((run.output or {}).get("notice", "")) or NOTICES[run.status]


def notice_data(run: Run) -> dict:
    """The data of the `notice` run event a run ending without a reply records for the chat."""
    return {"notice": (run.output or {}).get("notice") or run.status, "text": run_notice(run)}


def run_reply(run: Run) -> Reply:
    """What the channel of a finished run's conversation delivers: its reply, or its notice
    (in the language of the run's member, who reads it)."""
    with translation.override(run_language(run)):
        notice = run_notice(run)
    output = run.output or {}
    return Reply(
        run_id=run.pk,
        session_id=run.session_id,
        channel=run.session.channel,
        conversation=run.session.external_id,
        status=run.status,
        text=notice or output.get("text", ""),
        notice=(output.get("notice") or run.status) if notice else output.get("refused_code", ""),
    )


# A line told after a finished run's reply, about what the turn changed ("Updated memory: …"):
# its own delivery, once per run and kind (the notice `follow_up:<kind>`).
FOLLOW_UP = "follow_up:"


def follow_up_deliver(run: Run, kind: str, text: str) -> bool:
    """Hand the conversation of a finished run one more line after its reply; False when no
    channel serves it (web chat shows the run's event instead)."""
    return reply_deliver(
        Reply(
            run_id=run.pk,
            session_id=run.session_id,
            channel=run.session.channel,
            conversation=run.session.external_id,
            status=run.status,
            text=text,
            notice=f"{FOLLOW_UP}{kind}",
        )
    )


def reply_deliver(reply: Reply) -> bool:
    """Hand the reply to its channel after commit; False when no channel serves it."""
    channel = channels.get(reply.channel)
    if channel is None:
        return False
    transaction.on_commit(lambda: channel.reply(reply))
    return True


def _message_channel(channel_name: str) -> Channel | None:
    # Its session's channel, else any: its recipients may be reached on every platform (a
    # message sent from the console goes out too).
    return channels.get(channel_name) or next((entry for _name, entry in channels.items()), None)


def message_unreachable(message: AgentMessage) -> str:
    """Why no channel can deliver the agent message (stored or not yet), "" when one may."""
    channel = _message_channel(message.channel)
    if channel is None:
        return _("no connector for channel %(channel)r") % {"channel": message.channel or "(none)"}
    return channel.check(message) if channel.check is not None else ""


def message_deliver(message: AgentMessage) -> bool:
    """Hand a stored agent message to a channel after commit. False, and the message marked
    failed with the reason, when no channel can deliver it (`message_unreachable`)."""
    reason = message_unreachable(message)
    if reason:
        message_outcome(message.pk, "failed", reason)
        return False
    channel = _message_channel(message.channel)
    transaction.on_commit(lambda: channel.message(message.pk))
    return True


@transaction.atomic
def message_outcome(message_id: int, status: str, reason: str = "") -> str:
    """Record how an agent message ended (`sent` or `failed`, with the reason): on the message,
    on the tool effect recorded for its `im_send` call, as a live `effect` event of its run
    (the chat shows it), and in the audit log. A message already decided keeps its outcome;
    returns the message's status."""
    message = (
        AgentMessage.objects.select_for_update()
        .select_related("organization")
        .filter(pk=message_id)
        .first()
    )
    if message is None:
        return "missing"
    if message.status != AgentMessage.Status.QUEUED:
        return message.status
    message.status = status
    message.reason = reason[:2000] if status == AgentMessage.Status.FAILED else ""
    message.save(update_fields=["status", "reason"])
    effect = ToolEffect.objects.select_for_update().filter(key=message.idempotency_key).first()
    if effect is not None:  # absent while the tool call is still recording it
        effect.result = {**effect.result, "status": message.status}
        if message.reason:
            effect.result["reason"] = message.reason
        effect.save(update_fields=["result"])
    if message.run_id is not None:
        RunEvent.objects.create(
            run_id=message.run_id,
            kind="effect",
            data={
                "tool": "im_send",
                "message_id": message.pk,
                "status": message.status,
                "reason": message.reason,
            },
        )
    audit.record(
        actor=system_actor(message.organization, label="agent message delivery"),
        action=f"agents.message.{message.status}",
        target=("agentmessage", message.pk, f"agent message {message.pk}"),
        organization=message.organization,
        before={"status": AgentMessage.Status.QUEUED},
        after={"status": message.status, "run": message.run_id},
        reason=message.reason,
    )
    return message.status
