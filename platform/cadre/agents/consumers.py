"""Web chat over websockets (`ws/chat/<session id>/`): an employee's conversation with one of
their own agents, live.

Connect: the signed-in member must own the session (another member's session, or another
organization's, is refused with close code 4404; no sign-in, 4401). The consumer then joins the
session's group (`cadre.agents.live`), reads the session's `RunEvent` rows after its cursor once
to catch up (the `after` query parameter on a reconnect), and afterwards forwards the events the
runtime pushes to the group as they commit — the same rows the SSE endpoint of the runs API
streams. The cursor drops what was already sent, so nothing arrives twice or out of order.

Frames sent:
    {"type": "ready", "session": id, "after": last event id already known}
    {"type": "event", "id", "run", "kind", "data"[, "confirmation"]}
        kind: status, step, delta, wait, resume, reply, notice, hook; a `wait` on a governance
        confirmation carries {"id", "summary", "risk_level", "status", "can_decide", ...};
        a `reply` carries "answered_by", which model answered ("<provider> · <model>", or
        "offline model"), when a model call of the run completed;
        a failed run's `status` carries its internal `error` only to a viewer who may manage
        models (everyone sees the run's `notice`)
    {"type": "accepted", "run": id, "text": "..."}          a message was accepted
    {"type": "decided", "confirmation": {...}}              a decision was recorded
    {"type": "queue", "run", "status", "queued_at", "waited", "workers"}
        how a queued run waits (`selectors.chat_queue_state`; `workers` "" too early to tell,
        "busy", or "none": no worker is taking runs), the answer to `queue`, `retry`, `cancel`
    {"type": "error", "code": "...", "message": "..."}

Frames received:
    {"type": "message", "text": "..."}                      → runtime.run_start
    {"type": "decide", "confirmation": id, "decision": "approve"|"reject", "reason"?}
                                                            → governance confirmation_decide
    {"type": "queue", "run": id}                            how the run waits (a read)
    {"type": "cancel", "run": id}                           → runtime.run_cancel
    {"type": "retry", "run": id}                            → runtime.run_requeue
"""

from __future__ import annotations

from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.utils import translation
from django.utils.translation import gettext as _

from cadre.agents import selectors
from cadre.agents.live import session_group
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.errors import CadreError, InvalidInput
from cadre.governance.confirmations import confirmation_decide
from cadre.identifiers import parse_pk
from cadre.languages import scope_language
from cadre.tenancy.actors import member_actor
from cadre.tenancy.languages import chosen_language
from cadre.tenancy.middleware import SESSION_KEY, session_memberships
from cadre.tenancy.models import Member

CATCH_UP_PAGE = selectors.CHAT_EVENTS_PAGE
CLOSE_UNAUTHENTICATED = 4401
CLOSE_NOT_FOUND = 4404


def _member_for(scope):
    """The member the websocket's signed-in user acts as (the organization chosen in the
    console session, else their first), as the console's middleware resolves it."""
    user = scope.get("user")
    if user is None or not user.is_authenticated:
        return None
    session = scope.get("session")
    wanted = session.get(SESSION_KEY) if session is not None else None
    members = session_memberships(session, user)
    member = members.filter(organization_id=wanted).first() if wanted else None
    return member or members.first()


def _language(scope, member) -> str:
    """The language the error frames speak: the member's preference, else the browser's (the
    switcher's cookie, Accept-Language), else the organization's, as the console decides it."""
    return chosen_language(scope_language(scope), member)


def _actor(member_id: int):
    """A fresh actor per action: a member deactivated or stripped of chat.use meanwhile is
    refused by the services."""
    return member_actor(Member.objects.select_related("organization").get(pk=member_id))


@database_sync_to_async
def _open(scope, session_id: int, after: int | None) -> dict | None:
    """Who is connecting, their session (or None), and the event id to stream from."""
    member = _member_for(scope)
    if member is None:
        return {"refused": CLOSE_UNAUTHENTICATED}
    session = selectors.chat_session_get(member_actor(member), session_id)
    if session is None:
        return {"refused": CLOSE_NOT_FOUND}
    if after is None:
        after = selectors.chat_stream_from(session)
    return {
        "member": member.pk,
        "organization": member.organization_id,
        "session": session.pk,
        "agent": session.agent_id,
        "after": after,
        "language": _language(scope, member),
    }


@database_sync_to_async
def _events_after(session_id: int, member_id: int, after: int) -> list[dict]:
    """Up to CATCH_UP_PAGE events of the session's runs after `after`, oldest first."""
    return selectors.chat_events_after(session_id, member_id, after, limit=CATCH_UP_PAGE)


@database_sync_to_async
def _send_message(member_id: int, session_id: int, text: str) -> dict:
    actor = _actor(member_id)
    session = selectors.chat_session_get(actor, session_id)
    if session is None:  # the session (or the member's right to chat) is gone
        return {"type": "error", "code": "not_found", "message": _("This conversation is gone.")}
    run = runtime.run_start(actor=actor, agent=session.agent, text=text, session=session)
    return {"type": "accepted", "run": run.pk, "text": text}


@database_sync_to_async
def _decide(member_id: int, session_id: int, content: dict) -> dict:
    actor = _actor(member_id)
    try:
        confirmation_id = int(content.get("confirmation"))
    except (TypeError, ValueError):
        return {"type": "error", "code": "invalid", "message": _("confirmation must be an id.")}
    # Only the confirmations of this conversation's runs are decided here.
    confirmation = selectors.chat_confirmation_get(actor, session_id, confirmation_id)
    if confirmation is None:
        return {"type": "error", "code": "not_found", "message": _("No such confirmation.")}
    decided = confirmation_decide(
        confirmation=confirmation,
        actor=actor,
        decision=str(content.get("decision", "")),
        via="console",
        reason=str(content.get("reason", ""))[:2000],
    )
    return {"type": "decided", "confirmation": selectors.chat_confirmation_item(decided, member_id)}


@database_sync_to_async
def _queued_run(member_id: int, session_id: int, content: dict) -> dict:
    """`queue`, `cancel` or `retry` one of this conversation's runs (another's is not found);
    the answer is the run's `queue` frame (the cancel's events reach the page as usual)."""
    actor = _actor(member_id)
    run = selectors.chat_queued_run(actor, session_id, content.get("run"))
    if run is None:
        return {"type": "error", "code": "not_found", "message": _("No such message.")}
    if content["type"] == "cancel":
        run = runtime.run_cancel(actor=actor, run=run, reason="cancelled in the chat")
    elif content["type"] == "retry":
        run = runtime.run_requeue(actor=actor, run=run)
    state = selectors.chat_queue_state(run) if run.status == run.Status.QUEUED else {}
    return {"type": "queue", "run": run.pk, "status": run.status, **state}


class ChatConsumer(AsyncJsonWebsocketConsumer):
    """One browser tab's live view of one chat session."""

    async def connect(self):
        try:
            session_id = int(self.scope["url_route"]["kwargs"]["session_id"])
        except (KeyError, TypeError, ValueError):
            await self.close(code=CLOSE_NOT_FOUND)
            return
        query = parse_qs(self.scope.get("query_string", b"").decode())
        after = query.get("after", [""])[0]
        opened = await _open(self.scope, session_id, parse_pk(after))
        if "refused" in opened:
            await self.close(code=opened["refused"])
            return
        self.member_id = opened["member"]
        self.session_id = opened["session"]
        self.after = opened["after"]
        self.language = opened["language"]
        # Joined before catching up: what commits meanwhile is queued, not lost.
        self.group = session_group(self.session_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        await self.send_json({"type": "ready", "session": self.session_id, "after": self.after})
        while True:
            frames = await _events_after(self.session_id, self.member_id, self.after)
            await self._forward(frames)
            if len(frames) < CATCH_UP_PAGE:
                break

    async def disconnect(self, code):
        group = getattr(self, "group", None)
        if group is not None:
            await self.channel_layer.group_discard(group, self.channel_name)

    async def run_events(self, message):
        """Events the runtime pushed to the session's group (see cadre.agents.live)."""
        fresh = [event for event in message["events"] if event["id"] > self.after]
        if not fresh:
            return
        if any(selectors.chat_frame_needs_lookup(event) for event in fresh):
            frames = await database_sync_to_async(selectors.chat_event_frames)(
                fresh, self.member_id
            )
        else:
            frames = [{"type": "event", **event} for event in fresh]
        await self._forward(frames)

    async def _forward(self, frames: list[dict]) -> None:
        for frame in frames:
            if frame["id"] > self.after:  # sent once, in id order
                self.after = frame["id"]
                await self.send_json(frame)

    async def receive_json(self, content, **kwargs):
        with translation.override(getattr(self, "language", None)):
            await self._receive_json(content)

    async def _receive_json(self, content):
        kind = content.get("type") if isinstance(content, dict) else None
        try:
            if kind == "message":
                text = content.get("text")
                if not isinstance(text, str):
                    raise InvalidInput(_("text must be a string."))
                reply = await _send_message(self.member_id, self.session_id, text)
            elif kind == "decide":
                reply = await _decide(self.member_id, self.session_id, content)
            elif kind in ("queue", "cancel", "retry"):
                reply = await _queued_run(self.member_id, self.session_id, content)
            else:
                raise InvalidInput(
                    _('type must be "message", "decide", "queue", "cancel" or "retry".')
                )
        except CadreError as error:
            reply = {"type": "error", "code": error.code, "message": error.message}
        await self.send_json(reply)

    async def receive(self, text_data=None, bytes_data=None, **kwargs):
        # Frames that are not JSON text get an error frame, not a dropped connection.
        try:
            content = await self.decode_json(text_data) if text_data else None
        except ValueError:
            content = None
        if content is None:
            with translation.override(getattr(self, "language", None)):
                message = _("Frames are JSON.")
            await self.send_json({"type": "error", "code": "invalid", "message": message})
            return
        await self.receive_json(content, **kwargs)
