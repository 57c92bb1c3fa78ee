"""Connector writes: configuration (audited), health counters, deliveries, credential tests."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone
from django.utils.translation import gettext as _

from cadre import outbound
from cadre.agents.models import Deployment
from cadre.errors import Conflict, InvalidInput
from cadre.governance import audit
from cadre.tenancy.actors import Actor
from cadre.tenancy.models import Department, Member, Position
from connectors.base import registry
from connectors.base.transport import DestinationRefused, TransportError, check_api_url
from connectors.models import Connector, ConnectorBinding, Delivery

CONNECTOR_FIELDS = ("name", "platform", "status", "settings")
# Settings naming a platform API Cadre calls (a private deployment, a proxy): checked by the
# outbound guard when saved, and again at every connection.
API_URL_SETTINGS = ("api_base_url", "oapi_base_url")


def _snapshot(connector: Connector) -> dict:
    return {name: getattr(connector, name) for name in CONNECTOR_FIELDS}


def _platform_class(platform: str):
    try:
        return registry()[platform]
    except KeyError:
        raise InvalidInput(
            _("Unknown platform %(platform)r.") % {"platform": platform},
            details={
                "platform": [
                    _("Choose from %(platforms)s.") % {"platforms": ", ".join(sorted(registry()))}
                ]
            },
        ) from None


def _check_credentials(platform: str, credentials: dict) -> dict:
    platform_class = _platform_class(platform)
    if not isinstance(credentials, dict):
        raise InvalidInput(_("Credentials must be an object."))
    allowed = set(platform_class.credential_fields) | set(platform_class.optional_credential_fields)
    unknown = sorted(set(credentials) - allowed)
    missing = [name for name in platform_class.credential_fields if not credentials.get(name)]
    details = {}
    if unknown:
        details.update({name: [_("Not a credential of this platform.")] for name in unknown})
    if missing:
        details.update({name: [_("This credential is required.")] for name in missing})
    if details:
        raise InvalidInput(_("The credentials do not fit the platform."), details=details)
    return {name: str(value).strip() for name, value in credentials.items() if value}


def _unstorable(value) -> str:
    """Why a settings value cannot be stored (PostgreSQL's JSON takes no NUL, no lone surrogate
    and no infinity), or "" when it can."""
    if isinstance(value, str):
        if "\x00" in value:
            return _("Null characters are not allowed.")
        if any("\ud800" <= character <= "\udfff" for character in value):
            return _("Surrogate characters are not allowed.")
    elif isinstance(value, float) and not math.isfinite(value):
        return _("Numbers must be finite.")
    elif isinstance(value, dict):
        return next(
            (reason for item in value.items() for reason in map(_unstorable, item) if reason), ""
        )
    elif isinstance(value, list):
        return next((reason for reason in map(_unstorable, value) if reason), "")
    return ""


# Numeric settings the transport reads at every send: (type, lowest, highest).
_DECIMAL = re.compile(r"[0-9]{1,6}(\.[0-9]{1,6})?")
NUMERIC_SETTINGS = {"max_attempts": (int, 1, 10), "backoff_base": (float, 0.0, 60.0)}


def _check_numbers(settings: dict) -> None:
    for name, (kind, lowest, highest) in NUMERIC_SETTINGS.items():
        if name not in settings:
            continue
        value = settings[name]
        # Digits from a form arrive as text: ASCII ones only ("²".isdigit() is true).
        number = float(value) if isinstance(value, str) and _DECIMAL.fullmatch(value) else value
        if (
            isinstance(number, bool)
            or not isinstance(number, int | float)
            or (kind is int and number != int(number))
            or not lowest <= number <= highest
        ):
            bounds = {"name": name, "lowest": lowest, "highest": highest}
            raise InvalidInput(
                _("%(name)s must be a number from %(lowest)s to %(highest)s.") % bounds,
                details={
                    "settings": {name: [_("A number from %(lowest)s to %(highest)s.") % bounds]}
                },
            )
        settings[name] = kind(number)


def _check_settings(platform: str, settings: dict | None) -> dict:
    if settings is not None and not isinstance(settings, dict):
        raise InvalidInput(_("Settings must be an object."))
    settings = dict(settings or {})
    if reason := _unstorable(settings):
        raise InvalidInput(
            _("Settings: %(reason)s") % {"reason": reason}, details={"settings": [reason]}
        )
    _check_numbers(settings)
    settings = _platform_class(platform).settings_checked(settings)
    for name in API_URL_SETTINGS:
        if settings.get(name):  # empty: the platform's public API
            settings[name] = check_api_url(settings[name], field=name)
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
            _("A connector with this name already exists."),
            details={"name": [_("Choose another name.")]},
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
            raise InvalidInput(_("Unknown status %(status)r.") % {"status": status})
        connector.status = status
    connector.updated_at = timezone.now()
    try:
        with transaction.atomic():
            connector.save(update_fields=["name", "settings", "status", "updated_at"])
    except IntegrityError:
        raise Conflict(_("A connector with this name already exists.")) from None
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
            raise InvalidInput(_("That object belongs to another organization."))
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
    if deployment_id is not None and not (
        Deployment.objects.filter(pk=deployment_id, organization=actor.organization).exists()
    ):
        # Another organization's deployment is as unknown as one that does not exist.
        raise InvalidInput(
            _("No such deployment."),
            details={"deployment_id": [_("Choose a deployment of your organization.")]},
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


def record_signature_rejection(connector: Connector) -> None:
    Connector.objects.filter(pk=connector.pk).update(
        signature_rejections=F("signature_rejections") + 1
    )


def record_failure(connector: Connector, message: str) -> None:
    Connector.objects.filter(pk=connector.pk).update(
        failures=F("failures") + 1, last_failure=message[:300], last_failure_at=timezone.now()
    )


# --- deliveries ----------------------------------------------------------------------------


def claim_delivery(
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
) -> tuple[Delivery, bool]:
    """The delivery for this key; (delivery, True) when it still has to be sent."""
    delivery, _created = Delivery.objects.get_or_create(
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
    return delivery, delivery.status != Delivery.Status.SENT


def mark_delivery(
    delivery: Delivery,
    *,
    sent: bool,
    platform_message_id: str = "",
    error: str = "",
    extra: dict | None = None,
) -> None:
    delivery.attempts += 1
    if sent:
        delivery.status = Delivery.Status.SENT
        delivery.sent_at = timezone.now()
        delivery.platform_message_id = platform_message_id[:191]
        if extra:
            delivery.body = {**delivery.body, "_delivery": extra}
    else:
        delivery.status = Delivery.Status.FAILED
        delivery.error = error[:300]
    delivery.save(
        update_fields=["attempts", "status", "sent_at", "platform_message_id", "error", "body"]
    )


# --- credential test -----------------------------------------------------------------------


@dataclass(frozen=True)
class CredentialCheck:
    """The outcome of testing a connector's credentials against the platform."""

    ok: bool
    message: str
    host: str = ""
    reachable: bool = True


def connector_test_credentials(
    *, actor: Actor, connector: Connector, client=None, timeout: float = 10.0
) -> CredentialCheck:
    """Ask the platform whether the stored credentials work; the outcome is audited.

    The network call happens outside any transaction (it may take seconds); only the audit
    event is written in one. An unreachable platform (offline machine, DNS failure, refused
    connection) is reported as such, not as a failure of the credentials.
    """
    actor.require("connector.manage", connector)
    # The platform package's TRANSPORT class, as the connector base class finds it.
    module = _platform_class(connector.platform).part("transport")
    transport = module.TRANSPORT(
        connector,
        client=client
        or outbound.http_client(allow_setting=module.TRANSPORT.allow_setting, timeout=timeout),
    )
    # One attempt: a person is waiting for the answer, and retrying a refused connection or
    # a wrong secret tells them nothing new.
    transport.max_attempts = 1
    host = urlsplit(transport.base_url or transport.settings.get("callback_url", "")).netloc
    try:
        target, message = transport.credentials_probe()
        host = urlsplit(target).netloc or host
        result = CredentialCheck(True, message, host)
    except DestinationRefused as error:
        result = CredentialCheck(
            False,
            _("Cadre does not call %(host)s: %(error)s") % {"host": host, "error": error},
            host,
            reachable=False,
        )
    except TransportError as error:
        network = error.status is None and error.retryable and str(error).startswith("network")
        if network:
            result = CredentialCheck(
                False,
                _(
                    "Could not reach %(host)s: %(error)s. Check that this server can reach the "
                    "platform (firewall, proxy, DNS)."
                )
                % {"host": host, "error": str(error).removeprefix("network error: ")},
                host,
                reachable=False,
            )
        else:
            result = CredentialCheck(
                False, _("The platform refused the credentials: %(error)s") % {"error": error}, host
            )
    except KeyError as error:
        result = CredentialCheck(
            False,
            _("The credentials or the platform's answer lack %(field)r.")
            % {"field": error.args[0]},
            host,
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
