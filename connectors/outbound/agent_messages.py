"""Delivery of the messages agents send with the `im_send` tool (`AgentMessage`).

The tool stores what to send (`recipients`: `{"member": id}` or `{"group": "<chat>"}`, and the
text); `agent_message_deliver` sends it through the right connector, one platform message per
recipient, each recorded as a connectors `Delivery` under the key
`agent-message:<message id>:<recipient index>`:

- a member is reached through their `IMIdentity` on a platform with an active connector — the
  connector of the run's own IM session first, then the platform the run came from, then the
  member's other platforms;
- a group is `<platform>:<chat id>`, a chat id listed in a connector binding, or a chat id on
  the run's own IM connector (or the organization's only connector).

A retried delivery skips every recipient already sent (on any connector), and a Redis lock keeps
two concurrent deliveries of one message from both sending; the message's status becomes `sent`
when every recipient has it, `failed` when one cannot be reached (the reasons are kept on the
message and on the per-recipient rows, and shown with the tool call in chat, transcript and API).
`undeliverable` tells the tool call at once when no recipient can be reached at all.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from django.core.cache import cache
from django.utils import translation
from django.utils.translation import gettext as _

from cadre.agents.models import AgentMessage
from cadre.agents.runtime.records import delivery
from cadre.tenancy.languages import organization_language
from cadre.tenancy.models import IMIdentity, Member
from connectors.base import registry
from connectors.base.transport import TransportError
from connectors.models import Connector, Delivery
from connectors.outbound.sending import send

logger = logging.getLogger(__name__)

LOCK_SECONDS = 600  # longer than a delivery can take; a dead worker's lock expires
KEY_PREFIX = "agent-message"


class Undeliverable(Exception):
    """This recipient cannot be reached on any connector (a permanent failure)."""


class DeliveryBusy(Exception):
    """Another worker is delivering this message right now."""


@dataclass(frozen=True)
class Route:
    connector: Connector
    recipient: str
    recipient_type: str  # user, chat


def delivery_key(message_id: int, index: int) -> str:
    return f"{KEY_PREFIX}:{message_id}:{index}"


@contextmanager
def _delivery_lock(message_id: int) -> Iterator[None]:
    key = f"connectors:agent-message-lock:{message_id}"
    token = secrets.token_hex(8)
    if not cache.add(key, token, LOCK_SECONDS):
        raise DeliveryBusy(f"message {message_id} is being delivered")
    try:
        yield
    finally:
        if cache.get(key) == token:
            cache.delete(key)


class Router:
    """Where each recipient of one message goes; loads connectors and identities once."""

    def __init__(self, message):
        self.message = message
        self.connectors = list(
            Connector.objects.filter(
                organization_id=message.organization_id, status=Connector.Status.ACTIVE
            )
            .prefetch_related("bindings")
            .order_by("pk")
        )
        self.session_connector = self._session_connector()

    def _session_connector(self) -> Connector | None:
        """The connector the run's conversation came through (its session's external id is
        `<connector id>:<chat id>`)."""
        run = self.message.run
        session = run.session if run is not None else None
        if session is None or session.channel not in registry():
            return None
        connector_id = session.external_id.partition(":")[0]
        return next((c for c in self.connectors if str(c.pk) == connector_id), None)

    def _preferred(self) -> list[Connector]:
        """Connectors in the order to try: the session's, its platform's, then the rest."""
        channel = self.message.channel
        first = [self.session_connector] if self.session_connector else []
        same_platform = [c for c in self.connectors if c.platform == channel and c not in first]
        rest = [c for c in self.connectors if c not in first and c not in same_platform]
        return first + same_platform + rest

    def member_routes(self, member_ids: set[int]) -> dict[int, Route]:
        identities: dict[int, dict[str, str]] = {}
        for member_id, platform, user_id in (
            IMIdentity.objects.filter(
                organization_id=self.message.organization_id,
                member_id__in=member_ids,
                member__status=Member.Status.ACTIVE,
            )
            .order_by("pk")
            .values_list("member_id", "platform", "platform_user_id")
        ):
            identities.setdefault(member_id, {}).setdefault(platform, user_id)
        routes = {}
        for member_id, by_platform in identities.items():
            for connector in self._preferred():
                if connector.platform in by_platform:
                    routes[member_id] = Route(connector, by_platform[connector.platform], "user")
                    break
        return routes

    def group_route(self, group: str) -> Route:
        platform, _sep, chat_id = group.partition(":")
        if chat_id and platform in registry():
            candidates = [c for c in self._preferred() if c.platform == platform]
            if not candidates:
                raise Undeliverable(
                    _("no active %(platform)s connector for group %(group)r")
                    % {"platform": platform, "group": group}
                )
            bound = [c for c in candidates if _binds_chat(c, chat_id)]
            return Route((bound or candidates)[0], chat_id, "chat")
        bound = [c for c in self._preferred() if _binds_chat(c, group)]
        if bound:
            return Route(bound[0], group, "chat")
        if self.session_connector is not None:
            return Route(self.session_connector, group, "chat")
        if len(self.connectors) == 1:
            return Route(self.connectors[0], group, "chat")
        raise Undeliverable(
            _(
                "no connector knows group %(group)r: name it as <platform>:<chat id> or list the "
                "chat in a connector binding"
            )
            % {"group": group}
        )


def _binds_chat(connector: Connector, chat_id: str) -> bool:
    return any(chat_id in (binding.chat_ids or []) for binding in connector.bindings.all())


def _member_unreachable(recipient: dict) -> str:
    return _("member %(name)s has no IM account on an active connector") % {
        "name": recipient.get("name") or recipient["member"]
    }


def _message_language(message) -> str:
    """The language the reasons of a failed delivery are told in: the language of the person
    whose run sent it (they read them in the chat), else the organization's."""
    if message.run is not None:
        return delivery.run_language(message.run)
    return organization_language(message.organization)


def undeliverable(message: AgentMessage) -> str:
    """Why no recipient of the message (stored or not yet) can be reached, or "" when one may
    be (the delivery channel's `check`: `im_send` refuses at once, before any confirmation)."""
    router = Router(message)
    if not router.connectors:
        return _(
            "no connector for channel %(channel)r: the organization has no active IM connector"
        ) % {"channel": message.channel or "(none)"}
    member_ids = {
        int(item["member"]) for item in message.recipients if isinstance(item.get("member"), int)
    }
    members = router.member_routes(member_ids) if member_ids else {}
    problems = []
    for recipient in message.recipients:
        try:
            if "member" in recipient:
                if recipient["member"] in members:
                    return ""
                raise Undeliverable(_member_unreachable(recipient))
            if "group" in recipient:
                router.group_route(str(recipient["group"]))
                return ""
            raise Undeliverable(_("unreadable recipient %(recipient)r") % {"recipient": recipient})
        except Undeliverable as error:
            problems.append(str(error))
    return "; ".join(problems)


def deliver(message_id: int) -> str:
    """Deliver one agent message to every recipient once; returns the message's status.

    Raises `DeliveryBusy` when another worker holds the message, and a retryable
    `TransportError` when a platform failed transiently (the task retries; recipients already
    sent are skipped).
    """
    message = AgentMessage.objects.select_related("run__session").filter(pk=message_id).first()
    if message is None or message.status != AgentMessage.Status.QUEUED:
        return message.status if message is not None else "missing"
    with _delivery_lock(message.pk), translation.override(_message_language(message)):
        return _deliver_locked(message)


def _deliver_locked(message) -> str:
    message.refresh_from_db(fields=["status"])
    if message.status != AgentMessage.Status.QUEUED:
        return message.status
    keys = [delivery_key(message.pk, index) for index in range(len(message.recipients))]
    already = set(
        Delivery.objects.filter(
            organization_id=message.organization_id,
            idempotency_key__in=keys,
            status=Delivery.Status.SENT,
        ).values_list("idempotency_key", flat=True)
    )
    router = Router(message)
    member_ids = {
        int(item["member"]) for item in message.recipients if isinstance(item.get("member"), int)
    }
    members = router.member_routes(member_ids) if member_ids else {}
    problems: list[str] = []
    retry: TransportError | None = None
    for key, recipient in zip(keys, message.recipients, strict=True):
        if key in already:
            continue
        try:
            if "member" in recipient:
                route = members.get(recipient["member"])
                if route is None:
                    raise Undeliverable(_member_unreachable(recipient))
            elif "group" in recipient:
                route = router.group_route(str(recipient["group"]))
            else:
                raise Undeliverable(
                    _("unreadable recipient %(recipient)r") % {"recipient": recipient}
                )
        except Undeliverable as error:
            problems.append(str(error))
            continue
        try:
            send(
                route.connector,
                kind="text",
                recipient=route.recipient,
                recipient_type=route.recipient_type,
                body={"text": message.text},
                idempotency_key=key,
            )
        except TransportError as error:
            # Recorded on the recipient's row either way; a transient failure is retried by
            # the task (after the other recipients had their turn), a permanent one fails.
            if error.retryable:
                retry = retry or error
            else:
                problems.append(f"{route.connector.platform}: {error}")
    if retry is not None:
        raise retry
    return finish(message.pk, problems)


def finish(message_id: int, problems: list[str]) -> str:
    """Record the message's outcome: sent when nothing went wrong, else failed with the
    reasons (on the message, its tool effect and its run's chat: `delivery.message_outcome`)."""
    status = AgentMessage.Status.FAILED if problems else AgentMessage.Status.SENT
    if problems:
        logger.warning("connectors: agent message %s not delivered: %s", message_id, problems)
    return delivery.message_outcome(message_id, status, "; ".join(problems))
