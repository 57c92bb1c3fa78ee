"""Event triggers: per-organization inbound endpoints for business systems.

A request is accepted when X-Cadre-Signature is `v1=` + hex HMAC-SHA256(secret,
"<X-Cadre-Timestamp>.<raw body>"), compared in constant time, and the timestamp (unix seconds)
is within the trigger's tolerance. The JSON body carries `event_id` (de-duplication: a replay
returns the first delivery's run), `type` and `data`; the member is the trigger's, or is looked
up from `data[member_field]` (email, employee number or member id). The event starts a run of
that member's agent in the trigger's deployment, with the event as input.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils.translation import gettext as _

from cadre.agents.models import Agent, Deployment, EventTrigger, TriggerEvent
from cadre.agents.runtime.lifecycle.services import run_start
from cadre.api.parsers import json_body_problem
from cadre.errors import CadreError, InvalidInput, NotFound
from cadre.governance import audit
from cadre.identifiers import parse_pk
from cadre.tenancy.actors import Actor, system_actor
from cadre.tenancy.models import Member

MAX_EVENT_BYTES = 256 * 1024


class BadSignature(CadreError):
    code = "bad_signature"
    status = 401


def sign(secret: str, timestamp: str, body: bytes) -> str:
    digest = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "v1=" + digest.hexdigest()


@transaction.atomic
def trigger_create(
    *,
    actor: Actor,
    name: str,
    deployment: Deployment,
    member: Member | None = None,
    member_field: str = "",
    tolerance_seconds: int = 300,
) -> tuple[EventTrigger, str]:
    actor.require("deployment.manage", deployment)
    if member is None and not member_field:
        raise InvalidInput(_("Give the member the events are for, or the event field naming them."))
    if not 30 <= tolerance_seconds <= 3600:
        raise InvalidInput(_("tolerance_seconds must be between 30 and 3600."))
    secret = secrets.token_urlsafe(32)
    trigger = EventTrigger.objects.create(
        organization=actor.organization,
        name=name,
        deployment=deployment,
        member=member,
        member_field=member_field,
        secret=secret,
        tolerance_seconds=tolerance_seconds,
    )
    audit.record(
        actor=actor,
        action="trigger.create",
        target=trigger,
        after={
            "name": name,
            "deployment": deployment.pk,
            "member": member.pk if member else None,
            "member_field": member_field,
        },
    )
    return trigger, secret


def _member_for(trigger: EventTrigger, data: dict) -> Member:
    if not trigger.member_field:
        return trigger.member
    value = str((data or {}).get(trigger.member_field, "")).strip()
    if not value:
        raise InvalidInput(
            _("The event has no %(member_field)r.") % {"member_field": trigger.member_field}
        )
    condition = Q(email__iexact=value) | Q(employee_no=value)
    if (key := parse_pk(value)) is not None:
        condition |= Q(pk=key)
    found = list(
        Member.objects.filter(organization_id=trigger.organization_id).filter(condition)[:2]
    )
    if len(found) != 1:
        raise InvalidInput(
            _("No single member matches %(member_field)s=%(value)r.")
            % {"member_field": trigger.member_field, "value": value},
            code="unknown_member",
        )
    return found[0]


def _event_payload(body: bytes) -> dict:
    """The signed body as an event the database and the run can hold, or InvalidInput.

    A signature proves who sent the body, not that it is usable: the same rules as every JSON
    body of the API (depth, NUL, lone surrogates, finite numbers) keep it from failing as a 500
    at the TriggerEvent insert or in the run that reads it."""
    try:
        payload = json.loads(body)
    except (ValueError, RecursionError):
        raise InvalidInput(_("The body must be JSON.")) from None
    problem = json_body_problem(payload)
    if problem:
        raise InvalidInput(problem)
    if not isinstance(payload, dict) or not str(payload.get("event_id", "")).strip():
        raise InvalidInput(_("The event needs an event_id."), details={"event_id": ["required"]})
    if not isinstance(payload.get("data") or {}, dict):
        raise InvalidInput(_("data must be a JSON object."), details={"data": ["object"]})
    return payload


def trigger_receive(
    *, trigger_id: int, timestamp: str, signature: str, body: bytes, now: float | None = None
) -> dict:
    """Verify, de-duplicate and start a run. Returns {"duplicate", "run", "event_id"}."""
    trigger = (
        EventTrigger.objects.select_related("organization", "deployment", "member")
        .filter(pk=trigger_id, is_active=True)
        .first()
    )
    if trigger is None:
        raise NotFound(_("No such trigger."))
    if len(body) > MAX_EVENT_BYTES:
        raise InvalidInput(_("The event is too large."), code="payload_too_large")
    try:
        sent_at = int(timestamp)
    except ValueError:
        raise BadSignature(_("X-Cadre-Timestamp must be unix seconds.")) from None
    current = now or time.time()
    # Compared, not subtracted: int - float overflows for a timestamp of 400 digits, and
    # Python compares an int of any size with a float exactly.
    if not current - trigger.tolerance_seconds <= sent_at <= current + trigger.tolerance_seconds:
        raise BadSignature(_("The timestamp is outside the accepted window."), code="stale")
    if not hmac.compare_digest(sign(trigger.secret, timestamp, body), signature or ""):
        raise BadSignature(_("The signature does not match."))
    payload = _event_payload(body)
    event_id = str(payload["event_id"])[:191]
    with transaction.atomic():
        existing = TriggerEvent.objects.filter(trigger=trigger, event_id=event_id).first()
        if existing is not None:
            return {"duplicate": True, "run": existing.run_id, "event_id": event_id}
        member = _member_for(trigger, payload.get("data") or {})
        agent = (
            Agent.objects.select_related("member", "deployment", "version")
            .filter(deployment=trigger.deployment, member=member)
            .first()
        )
        if agent is None:
            raise InvalidInput(
                _("That member has no agent in the trigger's deployment."), code="no_agent"
            )
        try:
            with transaction.atomic():
                event = TriggerEvent.objects.create(
                    organization_id=trigger.organization_id,
                    trigger=trigger,
                    event_id=event_id,
                    payload=payload,
                )
        except IntegrityError:  # the same event delivered twice at once
            existing = TriggerEvent.objects.get(trigger=trigger, event_id=event_id)
            return {"duplicate": True, "run": existing.run_id, "event_id": event_id}
        actor = system_actor(trigger.organization, label=f"trigger {trigger.name}")
        run = run_start(
            actor=actor,
            agent=agent,
            text=f"Event {payload.get('type', 'event')} received.",
            event={
                "id": event_id,
                "type": payload.get("type", ""),
                "data": payload.get("data") or {},
            },
            channel="event",
            trigger="event",
        )
        event.run = run
        event.save(update_fields=["run"])
        audit.record(
            actor=actor,
            action="trigger.event",
            target=run,
            changes={"trigger": trigger.pk, "event_id": event_id, "type": payload.get("type", "")},
        )
    return {"duplicate": False, "run": run.pk, "event_id": event_id}
