"""Write paths for connectors: configuration (audited), inbound storage, identity, outbound log."""

from __future__ import annotations

import contextlib
import json
import logging
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta

from django.db import IntegrityError, connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from cadre.errors import Conflict, InvalidInput
from cadre.governance import audit
from cadre.tenancy.actors import Actor, system_actor
from cadre.tenancy.models import Department, IMIdentity, Member, Position
from connectors.base import DecisionOutcome, ParsedEvent, registry
from connectors.models import (
    Connector,
    ConnectorBinding,
    ConnectorNotice,
    OutboundMessage,
    UnmappedIdentity,
)

logger = logging.getLogger(__name__)

CONNECTOR_FIELDS = ("name", "platform", "status", "settings")


def _snapshot(connector: Connector) -> dict:
    return {name: getattr(connector, name) for name in CONNECTOR_FIELDS}


def _platform_class(platform: str):
    try:
        return registry()[platform]
    except KeyError:
        raise InvalidInput(
            f"Unknown platform {platform!r}.",
            details={"platform": [f"Choose from {', '.join(sorted(registry()))}."]},
        ) from None


def _check_credentials(platform: str, credentials: dict) -> dict:
    platform_class = _platform_class(platform)
    if not isinstance(credentials, dict):
        raise InvalidInput("Credentials must be an object.")
    allowed = set(platform_class.credential_fields) | set(platform_class.optional_credential_fields)
    unknown = sorted(set(credentials) - allowed)
    missing = [name for name in platform_class.credential_fields if not credentials.get(name)]
    details = {}
    if unknown:
        details.update({name: ["Not a credential of this platform."] for name in unknown})
    if missing:
        details.update({name: ["This credential is required."] for name in missing})
    if details:
        raise InvalidInput("The credentials do not fit the platform.", details=details)
    return {name: str(value).strip() for name, value in credentials.items() if value}


def _check_settings(platform: str, settings: dict | None) -> dict:
    settings = dict(settings or {})
    if not isinstance(settings, dict):
        raise InvalidInput("Settings must be an object.")
    return settings


@transaction.atomic
def connector_create(
    *, actor: Actor, platform: str, name: str, credentials: dict, settings: dict | None = None
) -> Connector:
    """Add a connector; credentials are stored encrypted and never audited."""
    actor.require("connector.manage")
    connector = Connector(
        organization=actor.organization,
        platform=platform,
        name=name.strip(),
        settings=_check_settings(platform, settings),
    )
    connector.credentials = _check_credentials(platform, credentials)
    connector.credentials_rotated_at = timezone.now()
    try:
        with transaction.atomic():
            connector.save()
    except IntegrityError:
        raise Conflict(
            "A connector with this name already exists.", details={"name": ["Choose another name."]}
        ) from None
    audit.record(
        actor=actor, action="connector.create", target=connector, after=_snapshot(connector)
    )
    return connector


@transaction.atomic
def connector_update(
    *,
    actor: Actor,
    connector: Connector,
    name: str | None = None,
    settings: dict | None = None,
    status: str | None = None,
) -> Connector:
    actor.require("connector.manage", connector)
    before = _snapshot(connector)
    if name is not None:
        connector.name = name.strip()
    if settings is not None:
        connector.settings = _check_settings(connector.platform, settings)
    if status is not None:
        if status not in Connector.Status.values:
            raise InvalidInput(f"Unknown status {status!r}.")
        connector.status = status
    connector.updated_at = timezone.now()
    try:
        with transaction.atomic():
            connector.save(update_fields=["name", "settings", "status", "updated_at"])
    except IntegrityError:
        raise Conflict("A connector with this name already exists.") from None
    audit.record(
        actor=actor,
        action="connector.update",
        target=connector,
        before=before,
        after=_snapshot(connector),
    )
    return connector


@transaction.atomic
def connector_rotate_credentials(
    *, actor: Actor, connector: Connector, credentials: dict
) -> Connector:
    """Replace the credentials; the audit event says that they changed, never what they are."""
    actor.require("connector.manage", connector)
    connector.credentials = _check_credentials(connector.platform, credentials)
    connector.credentials_rotated_at = timezone.now()
    connector.updated_at = connector.credentials_rotated_at
    connector.save(update_fields=["credentials_encrypted", "credentials_rotated_at", "updated_at"])
    audit.record(
        actor=actor,
        action="connector.rotate_credentials",
        target=connector,
        changes={"rotated_at": connector.credentials_rotated_at},
    )
    return connector


def _same_org(actor: Actor, objects: Iterable) -> list:
    objects = list(objects)
    for obj in objects:
        if obj.organization_id != actor.organization.pk:
            raise InvalidInput("That object belongs to another organization.")
    return objects


@transaction.atomic
def binding_create(
    *,
    actor: Actor,
    connector: Connector,
    name: str = "",
    positions: Iterable[Position] = (),
    departments: Iterable[Department] = (),
    members: Iterable[Member] = (),
    chat_ids: Iterable[str] = (),
    deployment_id: int | None = None,
) -> ConnectorBinding:
    actor.require("connector.manage", connector)
    positions, departments, members = (
        _same_org(actor, positions),
        _same_org(actor, departments),
        _same_org(actor, members),
    )
    binding = ConnectorBinding.objects.create(
        organization=actor.organization,
        connector=connector,
        name=name,
        deployment_id=deployment_id,
        chat_ids=[c.strip() for c in chat_ids if c.strip()],
    )
    binding.positions.set(positions)
    binding.departments.set(departments)
    binding.members.set(members)
    audit.record(
        actor=actor,
        action="connector.bind",
        target=connector,
        after={
            "binding": binding.pk,
            "positions": [p.pk for p in positions],
            "departments": [d.pk for d in departments],
            "members": [m.pk for m in members],
            "chat_ids": binding.chat_ids,
            "deployment_id": deployment_id,
        },
    )
    return binding


@transaction.atomic
def binding_delete(*, actor: Actor, binding: ConnectorBinding) -> None:
    actor.require("connector.manage", binding.connector)
    audit.record(
        actor=actor,
        action="connector.unbind",
        target=binding.connector,
        before={"binding": binding.pk},
    )
    binding.delete()


# --- inbound: the hot path ------------------------------------------------------------------

_INSERT_EVENT = (
    "INSERT INTO connectors_inboundevent (organization_id, connector_id, event_key, kind, "
    "sender_id, chat_id, payload, status, received_at, attempts, error, run_ref) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s, 'queued', %s, 0, '', '') "
    "ON CONFLICT (connector_id, event_key) DO NOTHING RETURNING id"
)

HEALTH_WRITE_INTERVAL = 5  # seconds between last_event_at writes for one connector


@dataclass(frozen=True)
class Stored:
    event: ParsedEvent
    event_id: int | None  # None: a duplicate of an event already stored
    decision: DecisionOutcome | None = None  # card clicks: what the clicker is told


def inbound_store(
    connector: Connector, events: list[ParsedEvent], *, notify_refusals: bool = False
) -> list[Stored]:
    """Insert each event once (ON CONFLICT DO NOTHING) and ask for a drain on commit.

    Concurrent deliveries of one event race on the unique (connector, event_key) index:
    exactly one insert returns an id, and the worker's drain claims each stored event once
    (`connectors.drain.inbound_drain`). A card click is checked (token, clicker, single
    use) in the same transaction, so the worker only ever sees accepted clicks; a refused one
    is answered in the ack or, with `notify_refusals`, by a notice task.
    """
    from connectors.decisions import card_action_received
    from connectors.drain import drain_request
    from connectors.tasks import decision_refused_notice

    now = timezone.now()
    stored: list[Stored] = []
    to_process = False
    # One plain message needs one statement: in autocommit the INSERT commits by itself (one
    # round trip instead of BEGIN/INSERT/COMMIT) and on_commit runs right after it.
    single = len(events) == 1 and events[0].kind != "card_action"
    with (
        contextlib.nullcontext() if single else transaction.atomic(),
        connection.cursor() as cursor,
    ):
        for event in events:
            cursor.execute(
                _INSERT_EVENT,
                [
                    connector.organization_id,
                    connector.pk,
                    event.event_key[:191],
                    event.kind,
                    event.sender_id[:191],
                    event.chat_id[:191],
                    json.dumps(event.payload(), ensure_ascii=False),
                    now,
                ],
            )
            row = cursor.fetchone()
            event_id = row[0] if row else None
            decision = None
            if event.kind == "card_action":
                decision = card_action_received(connector, event, event_id)
            stored.append(Stored(event, event_id, decision))
            if event_id is None:
                continue
            if decision is None or decision.accepted:
                to_process = True
            elif notify_refusals:
                transaction.on_commit(
                    lambda event_id=event_id: decision_refused_notice.delay(event_id)
                )
        if to_process:  # one request for the whole request's events, after they are visible
            transaction.on_commit(drain_request)
    if any(item.event_id for item in stored):
        _touch_last_event(connector, now)
    return stored


_health_written: dict[int, float] = {}  # connector id -> monotonic time of this process' write


def _touch_last_event(connector: Connector, now) -> None:
    """Health: last_event_at, written at most every few seconds per process, conditionally
    (concurrent requests do not queue on the connector row)."""
    clock = time.monotonic()
    if clock - _health_written.get(connector.pk, -HEALTH_WRITE_INTERVAL) < HEALTH_WRITE_INTERVAL:
        return
    _health_written[connector.pk] = clock
    threshold = now - timedelta(seconds=HEALTH_WRITE_INTERVAL)
    Connector.objects.filter(
        Q(last_event_at__isnull=True) | Q(last_event_at__lt=threshold), pk=connector.pk
    ).update(last_event_at=now)


def record_signature_rejection(connector: Connector) -> None:
    Connector.objects.filter(pk=connector.pk).update(
        signature_rejections=F("signature_rejections") + 1
    )


def record_failure(connector: Connector, message: str) -> None:
    Connector.objects.filter(pk=connector.pk).update(
        failures=F("failures") + 1, last_failure=message[:300], last_failure_at=timezone.now()
    )


# --- identity -----------------------------------------------------------------------------


def _digits(value: str) -> str:
    digits = re.sub(r"\D", "", value or "")
    # +86 138… and 138… are the same phone: compare national numbers (last 11 digits).
    return digits[-11:] if len(digits) > 11 else digits


def identity_resolve(
    connector: Connector,
    *,
    platform_user_id: str,
    tenant_key: str = "",
    email: str = "",
    mobile: str = "",
    display_name: str = "",
) -> Member | None:
    """The active member behind a platform user: IM identity first, then email, then mobile.

    A match by email or mobile is remembered as an IMIdentity (audited), so the next message
    resolves by platform user id.
    """
    identity = (
        IMIdentity.objects.filter(
            organization_id=connector.organization_id,
            platform=connector.platform,
            platform_user_id=platform_user_id,
            tenant_key__in={tenant_key, ""},
            member__status=Member.Status.ACTIVE,
        )
        .select_related("member")
        .order_by("-tenant_key")
        .first()
    )
    if identity is not None:
        return identity.member
    members = Member.objects.filter(
        organization_id=connector.organization_id, status=Member.Status.ACTIVE
    )
    member = None
    if email:
        member = members.filter(email__iexact=email.strip()).first()
    if member is None and mobile and len(_digits(mobile)) >= 7:
        wanted = _digits(mobile)
        candidates = [
            m
            for m in members.exclude(mobile="").only("id", "mobile")
            if _digits(m.mobile) == wanted
        ]
        if len(candidates) == 1:
            member = members.get(pk=candidates[0].pk)
    if member is None:
        return None
    _identity_link(
        connector,
        member,
        platform_user_id,
        tenant_key,
        display_name,
        "email" if email and member.email.lower() == email.strip().lower() else "mobile",
    )
    return member


def _identity_link(
    connector: Connector,
    member: Member,
    platform_user_id: str,
    tenant_key: str,
    display_name: str,
    matched_by: str,
) -> None:
    try:
        with transaction.atomic():
            IMIdentity.objects.create(
                organization_id=connector.organization_id,
                member=member,
                platform=connector.platform,
                tenant_key=tenant_key,
                platform_user_id=platform_user_id,
                display_name=display_name[:150],
            )
            audit.record(
                actor=system_actor(connector.organization, label=f"connector {connector.name}"),
                action="member.identity_add",
                target=member,
                after={
                    "platform": connector.platform,
                    "platform_user_id": platform_user_id,
                    "matched_by": matched_by,
                },
            )
    except IntegrityError:
        pass  # linked concurrently by another worker


UNMAPPED_REPLY = (
    "Hello! I could not find your account in Cadre yet, so I cannot start your assistant. "
    "Your administrator has been notified and will link your account shortly."
)


@transaction.atomic
def unmapped_record(connector: Connector, event: ParsedEvent) -> UnmappedIdentity:
    """Queue an unknown platform user for the console; notify admins on first sight."""
    now = timezone.now()
    row, created = UnmappedIdentity.objects.get_or_create(
        connector=connector,
        platform_user_id=event.sender_id[:191],
        defaults={
            "organization_id": connector.organization_id,
            "display_name": event.sender_name[:150],
            "email": event.sender_email[:254],
            "mobile": event.sender_mobile[:32],
        },
    )
    if created:
        ConnectorNotice.objects.create(
            organization_id=connector.organization_id,
            connector=connector,
            kind=ConnectorNotice.Kind.UNMAPPED_USER,
            message=f"{event.sender_name or event.sender_id} wrote to {connector.name} but is "
            "not linked to any member. Link the account in Connectors → Identities.",
            details={"platform_user_id": event.sender_id, "email": event.sender_email},
        )
    else:
        UnmappedIdentity.objects.filter(pk=row.pk).update(
            last_seen_at=now, message_count=F("message_count") + 1, resolved_at=None
        )
    return row


# --- outbound log --------------------------------------------------------------------------


def outbound_claim(
    connector: Connector,
    *,
    idempotency_key: str,
    kind: str,
    recipient: str,
    recipient_type: str = "user",
    body: dict | None = None,
    thread_ref: str = "",
    confirmation_ref: str = "",
    inbound_event_id: int | None = None,
) -> tuple[OutboundMessage, bool]:
    """The outbound row for this key; (row, True) when it still has to be sent."""
    message, _ = OutboundMessage.objects.get_or_create(
        connector=connector,
        idempotency_key=idempotency_key[:191],
        defaults={
            "organization_id": connector.organization_id,
            "kind": kind,
            "recipient": recipient[:191],
            "recipient_type": recipient_type,
            "body": body or {},
            "thread_ref": thread_ref[:191],
            "confirmation_ref": confirmation_ref,
            "inbound_event_id": inbound_event_id,
        },
    )
    return message, message.status != OutboundMessage.Status.SENT


def outbound_mark(
    message: OutboundMessage,
    *,
    sent: bool,
    platform_message_id: str = "",
    error: str = "",
    extra: dict | None = None,
) -> None:
    message.attempts += 1
    if sent:
        message.status = OutboundMessage.Status.SENT
        message.sent_at = timezone.now()
        message.platform_message_id = platform_message_id[:191]
        if extra:
            message.body = {**message.body, "_delivery": extra}
    else:
        message.status = OutboundMessage.Status.FAILED
        message.error = error[:300]
    message.save(
        update_fields=["attempts", "status", "sent_at", "platform_message_id", "error", "body"]
    )


# --- console: selectors, credential test, the unmapped-user queue -------------------------


def connector_list(actor: Actor):
    """The connectors the actor manages, with the size of each one's unmapped-user queue."""
    from django.db.models import Count

    return (
        Connector.objects.restrict(actor, "manage")
        .annotate(unmapped_waiting=Count("unmapped", filter=Q(unmapped__resolved_at__isnull=True)))
        .order_by("name", "pk")
    )


def connector_recent_failures(connector: Connector, *, limit: int = 10) -> list:
    """The latest inbound events that failed, newest first (the connector page's health)."""
    from connectors.models import InboundEvent

    return list(
        InboundEvent.objects.filter(connector=connector, status=InboundEvent.Status.FAILED)
        .only("id", "event_key", "kind", "sender_id", "received_at", "attempts", "error")
        .order_by("-received_at")[:limit]
    )


@dataclass(frozen=True)
class CredentialCheck:
    """The outcome of testing a connector's credentials against the platform."""

    ok: bool
    message: str
    host: str = ""
    reachable: bool = True


def _credentials_probe(transport) -> tuple[str, str]:
    """Call the platform's token/auth endpoint once: (what was called, what it said)."""
    platform = transport.platform
    if platform == "slack":
        # Bot tokens do not expire, so there is no token endpoint: auth.test checks the token.
        data = transport.call("POST", "/auth.test")
        who = " in ".join(part for part in (data.get("user"), data.get("team")) if part)
        return transport.url("/auth.test"), f"Slack accepted the bot token ({who or 'ok'})."
    if platform == "webhook":
        # A webhook has no platform to authenticate to: send a signed ping to the callback URL.
        url = transport.settings.get("callback_url", "")
        if not url:
            raise InvalidInput(
                "This webhook has no callback URL to test.",
                details={"callback_url": ["Set a callback URL to send replies to."]},
            )
        transport._post({"type": "ping", "to": {"id": "", "type": "user"}, "text": "ping"})
        return url, "The callback URL accepted a signed ping."
    transport.fetch_token()  # Feishu tenant_access_token, WeCom gettoken, DingTalk accessToken
    return transport.base_url, "The platform issued an access token for these credentials."


def connector_test_credentials(
    *, actor: Actor, connector: Connector, client=None, timeout: float = 10.0
) -> CredentialCheck:
    """Ask the platform whether the stored credentials work; the outcome is audited.

    The network call happens outside any transaction (it may take seconds); only the audit
    event is written in one. An unreachable platform (offline machine, DNS failure, refused
    connection) is reported as such, not as a failure of the credentials.
    """
    import importlib
    from urllib.parse import urlsplit

    import httpx

    from connectors.transport import TransportError

    actor.require("connector.manage", connector)
    _platform_class(connector.platform)
    # The platform package's TRANSPORT class, as the connector base class finds it.
    module = importlib.import_module(f"connectors.{connector.platform}.transport")
    transport = module.TRANSPORT(connector, client=client or httpx.Client(timeout=timeout))
    # One attempt: a person is waiting for the answer, and retrying a refused connection or
    # a wrong secret tells them nothing new.
    transport.max_attempts = 1
    host = urlsplit(transport.base_url or transport.settings.get("callback_url", "")).netloc
    try:
        target, message = _credentials_probe(transport)
        host = urlsplit(target).netloc or host
        result = CredentialCheck(True, message, host)
    except TransportError as error:
        network = error.status is None and error.retryable and str(error).startswith("network")
        if network:
            result = CredentialCheck(
                False,
                f"Could not reach {host}: {str(error).removeprefix('network error: ')}. Check "
                "that this server can reach the platform (firewall, proxy, DNS).",
                host,
                reachable=False,
            )
        else:
            result = CredentialCheck(False, f"The platform refused the credentials: {error}", host)
    except KeyError as error:
        result = CredentialCheck(
            False, f"The credentials or the platform's answer lack {error.args[0]!r}.", host
        )
    except InvalidInput as error:
        result = CredentialCheck(False, error.message, host)
    finally:
        if client is None:
            transport.client.close()
    with transaction.atomic():
        audit.record(
            actor=actor,
            action="connector.test_credentials",
            target=connector,
            changes={
                "ok": result.ok,
                "reachable": result.reachable,
                "host": result.host,
                "result": result.message[:300],
            },
        )
    return result


def unmapped_queue(actor: Actor, connector: Connector):
    """Platform users waiting to be mapped (or dismissed) on this connector, latest first."""
    return UnmappedIdentity.objects.restrict(actor, "manage").filter(
        connector=connector, resolved_at__isnull=True
    )


@transaction.atomic
def unmapped_identity_map(
    *, actor: Actor, unmapped: UnmappedIdentity, member: Member
) -> IMIdentity:
    """Link a queued platform user to a member; the next message reaches the member's agent."""
    connector = unmapped.connector
    actor.require("connector.manage", connector)
    if member.organization_id != connector.organization_id:
        raise InvalidInput("That member belongs to another organization.")
    if member.status != Member.Status.ACTIVE:
        raise InvalidInput(
            f"{member.display_name} is not active.",
            details={"member": ["Choose an active member."]},
        )
    existing = (
        IMIdentity.objects.filter(
            organization_id=connector.organization_id,
            platform=connector.platform,
            platform_user_id=unmapped.platform_user_id,
            tenant_key="",
        )
        .select_related("member")
        .first()
    )
    if existing is not None and existing.member_id != member.pk:
        raise Conflict(
            f"This account is already mapped to {existing.member.display_name}.",
            details={"member": ["Unlink it on that member's page first."]},
        )
    identity = existing
    if identity is None:
        try:
            with transaction.atomic():
                identity = IMIdentity.objects.create(
                    organization_id=connector.organization_id,
                    member=member,
                    platform=connector.platform,
                    platform_user_id=unmapped.platform_user_id,
                    display_name=unmapped.display_name[:150],
                )
        except IntegrityError:
            raise Conflict("This account was mapped by someone else meanwhile.") from None
        audit.record(
            actor=actor,
            action="member.identity_add",
            target=member,
            after={
                "platform": connector.platform,
                "platform_user_id": unmapped.platform_user_id,
                "matched_by": "unmapped queue",
                "connector": connector.pk,
            },
        )
    unmapped.resolved_at = timezone.now()
    unmapped.save(update_fields=["resolved_at"])
    return identity


@transaction.atomic
def unmapped_identity_dismiss(*, actor: Actor, unmapped: UnmappedIdentity) -> None:
    """Take a platform user off the queue without mapping them (they return if they write)."""
    actor.require("connector.manage", unmapped.connector)
    unmapped.resolved_at = timezone.now()
    unmapped.save(update_fields=["resolved_at"])
    audit.record(
        actor=actor,
        action="connector.unmapped_dismiss",
        target=unmapped.connector,
        changes={"platform_user_id": unmapped.platform_user_id},
    )
