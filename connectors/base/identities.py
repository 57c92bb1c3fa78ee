"""Who a platform user is: the member behind an IM account, and the queue of unknown users."""

from __future__ import annotations

import re

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from cadre.errors import Conflict, InvalidInput
from cadre.governance import audit
from cadre.tenancy.actors import Actor, system_actor
from cadre.tenancy.models import IMIdentity, Member
from connectors.base import ParsedEvent
from connectors.models import Connector, ConnectorNotice, UnmappedIdentity


def phone_digits(value: str) -> str:
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
    if member is None and mobile and len(phone_digits(mobile)) >= 7:
        wanted = phone_digits(mobile)
        candidates = [
            m
            for m in members.exclude(mobile="").only("id", "mobile")
            if phone_digits(m.mobile) == wanted
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


# Rendered in the organization's language (the sender is not known yet).
UNMAPPED_REPLY = gettext_lazy(
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
            message=_(
                "%(sender)s wrote to %(connector)s but is not linked to any member. Link the "
                "account in Connectors → Identities."
            )
            % {"sender": event.sender_name or event.sender_id, "connector": connector.name},
            details={"platform_user_id": event.sender_id, "email": event.sender_email},
        )
    else:
        UnmappedIdentity.objects.filter(pk=row.pk).update(
            last_seen_at=now, message_count=F("message_count") + 1, resolved_at=None
        )
    return row


@transaction.atomic
def unmapped_identity_map(
    *, actor: Actor, unmapped: UnmappedIdentity, member: Member
) -> IMIdentity:
    """Link a queued platform user to a member; the next message reaches the member's agent."""
    connector = unmapped.connector
    actor.require("connector.manage", connector)
    if member.organization_id != connector.organization_id:
        raise InvalidInput(_("That member belongs to another organization."))
    if member.status != Member.Status.ACTIVE:
        raise InvalidInput(
            _("%(name)s is not active.") % {"name": member.display_name},
            details={"member": [_("Choose an active member.")]},
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
            _("This account is already mapped to %(name)s.")
            % {"name": existing.member.display_name},
            details={"member": [_("Unlink it on that member's page first.")]},
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
            raise Conflict(_("This account was mapped by someone else meanwhile.")) from None
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
