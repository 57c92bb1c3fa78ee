"""Invitations: inviting someone to the console, accepting and revoking the link."""

from __future__ import annotations

import logging
import secrets
import smtplib
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.db import transaction
from django.utils import timezone, translation
from django.utils.dateformat import format as date_format
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, pgettext_lazy

from cadre.errors import Conflict, InvalidInput
from cadre.governance import audit
from cadre.governance.audit_models import AuditEvent
from cadre.tenancy.actors import Actor, member_actor
from cadre.tenancy.languages import member_language
from cadre.tenancy.models import Department, Invitation, Member, Position, User
from cadre.tenancy.services import logins
from cadre.tenancy.services.common import hash_token
from cadre.tenancy.services.members import member_create

logger = logging.getLogger(__name__)

# Django's backends that keep a message on this machine (printed, written to a file, dropped):
# with one of them nobody receives an invitation, so the console says to copy the link.
UNDELIVERED_MAIL_BACKENDS = frozenset(
    {
        "django.core.mail.backends.console.EmailBackend",
        "django.core.mail.backends.filebased.EmailBackend",
        "django.core.mail.backends.dummy.EmailBackend",
    }
)


# An invitation link that cannot be used, as the person opening it reads it.
_INVITATION_STATES = {
    "accepted": gettext_lazy("This invitation link was already used."),
    "revoked": gettext_lazy("This invitation link was withdrawn."),
    "expired": gettext_lazy("This invitation link has expired."),
    "unknown": gettext_lazy("This invitation link is not valid."),
}


def _state_word(state: str) -> str:
    return str(
        {
            "accepted": pgettext_lazy("invitation", "accepted"),
            "revoked": pgettext_lazy("invitation", "revoked"),
            "expired": pgettext_lazy("invitation", "expired"),
        }.get(state, state)
    )


@transaction.atomic
def member_invite(
    *,
    actor: Actor,
    email: str,
    display_name: str = "",
    roles: list[str] | None = None,
    department: Department | None = None,
    positions: list[Position] | None = None,
    member: Member | None = None,
) -> tuple[Member, Invitation, str]:
    """Invite someone to the console: returns the member, the invitation and the link token."""
    email = email.strip().lower()
    if not email:
        raise InvalidInput(_("An invitation needs an email."), details={"email": [_("Required.")]})
    if member is None:
        member = Member.objects.filter(organization=actor.organization, email=email).first()
    if member is None:
        member = member_create(
            actor=actor,
            display_name=display_name or email.split("@")[0],
            email=email,
            department=department,
            positions=positions,
            roles=roles,
            status=Member.Status.INVITED,
        )
    else:
        actor.require("member.manage", member)
        if member.user_id is not None:
            raise Conflict(_("This member can already sign in."), code="already_member")
        if member.status == Member.Status.DEACTIVATED:
            raise Conflict(_("Reactivate the member before inviting them."), code="deactivated")
        if not member.email:
            member.email = email
            member.save(update_fields=["email"])
    member.invitations.filter(accepted_at=None, revoked_at=None).update(revoked_at=timezone.now())
    token = secrets.token_urlsafe(32)
    invitation = Invitation.objects.create(
        organization=actor.organization,
        member=member,
        email=email,
        token_hash=hash_token(token),
        invited_by=actor.member or member,
        expires_at=timezone.now() + timedelta(days=settings.CADRE_INVITATION_DAYS),
    )
    audit.record(
        actor=actor,
        action="member.invite",
        target=member,
        after={"email": email, "expires_at": invitation.expires_at},
    )
    return member, invitation, token


def mail_delivers() -> bool:
    """Whether EMAIL_BACKEND hands messages on to people (SMTP or another real backend)."""
    return settings.EMAIL_BACKEND not in UNDELIVERED_MAIL_BACKENDS


def invitation_email(*, actor: Actor, invitation: Invitation, url: str) -> bool:
    """E-mail the invitation link to its address when mail is configured to deliver; True when
    the mail server took the message. Called after the invitation is committed (the person
    inviting is told what happened); the attempt is audited either way, the link never."""
    if not mail_delivers():
        return False
    organization = invitation.organization.name
    inviter = actor.member.display_name if actor.member else organization
    # In the invitee's language: the one set for them, else the organization's default.
    with translation.override(member_language(invitation.member)):
        names = {"inviter": inviter, "organization": organization}
        expires = date_format(timezone.localtime(invitation.expires_at), _("j M Y, H:i T"))
        subject = _("%(inviter)s invited you to %(organization)s on Cadre") % names
        message = _(
            "%(inviter)s invited you to %(organization)s's agents on Cadre.\n\n"
            "Open this link to choose your password and sign in:\n%(url)s\n\n"
            "The link works once, until %(expires)s. If you did not expect it, ignore this "
            "message."
        ) % {**names, "url": url, "expires": expires}
    try:
        send_mail(
            subject=subject,
            message=message,
            from_email=None,
            recipient_list=[invitation.email],
        )
        sent, problem = True, ""
    except (smtplib.SMTPException, OSError) as error:
        logger.warning("invitation %s: the mail server refused it: %s", invitation.pk, error)
        sent, problem = False, type(error).__name__
    with transaction.atomic():
        audit.record(
            actor=actor,
            action="member.invitation_email",
            target=invitation.member,
            changes={"email": invitation.email, "sent": sent, "error": problem},
        )
    return sent


def invitation_emailed(invitation: Invitation) -> bool:
    """Whether this invitation's link was e-mailed (its audited send succeeded)."""
    return AuditEvent.objects.filter(
        organization_id=invitation.organization_id,
        action="member.invitation_email",
        target_type="member",
        target_id=str(invitation.member_id),
        created_at__gte=invitation.created_at,
        changes__sent=True,
    ).exists()


def invitation_lookup(token: str) -> Invitation | None:
    return (
        Invitation.objects.select_related("member", "organization")
        .filter(token_hash=hash_token(token))
        .first()
    )


@transaction.atomic
def invitation_accept(
    *,
    token: str,
    password: str | None,
    display_name: str = "",
    user: User | None = None,
) -> Member:
    """Accept an invitation: an existing signed-in user, or a new user with a password."""
    invitation = (
        Invitation.objects.select_for_update()
        .select_related("member", "organization")
        .filter(token_hash=hash_token(token))
        .first()
    )
    if invitation is None or invitation.state != "pending":
        state = invitation.state if invitation else "unknown"
        raise InvalidInput(
            _INVITATION_STATES.get(state, _INVITATION_STATES["unknown"]),
            code=f"invitation_{state}",
        )
    member = invitation.member
    if member.status == Member.Status.DEACTIVATED:
        raise InvalidInput(_("This membership was deactivated."), code="invitation_revoked")
    if member.user_id is not None and (user is None or member.user_id != user.pk):
        # The member signed in (through SSO) after this link was sent: whoever opens it now
        # must not take the member over from the login it has.
        raise Conflict(_("This member can already sign in."), code="already_member")
    if user is None:
        # Opening the link proves the mailbox. A login with that name and a password is its
        # owner's, who signs in first; one an identity provider named after it gives it up.
        holder = User.objects.filter(email__iexact=invitation.email).first()
        if holder is not None and not logins.provider_made(holder):
            raise Conflict(
                _("An account with this email exists: sign in, then open the link."),
                code="sign_in_first",
            )
        candidate = User(email=invitation.email, display_name=display_name)
        try:
            validate_password(password or "", user=candidate)
        except ValidationError as error:
            raise InvalidInput(error.messages[0], details={"password": error.messages}) from None
        if holder is not None:
            logins.login_rename(user=holder, reason="an invitation to this address was accepted")
        user = User.objects.create_user(invitation.email, password, display_name=display_name)
    if Member.objects.filter(organization=invitation.organization, user=user).exists():
        raise Conflict(_("You are already a member of this organization."), code="already_member")
    member.user = user
    member.status = Member.Status.ACTIVE
    if display_name:
        member.display_name = display_name
    member.save(update_fields=["user", "status", "display_name"])
    invitation.accepted_at = timezone.now()
    invitation.save(update_fields=["accepted_at"])
    audit.record(
        actor=member_actor(member),
        action="member.invitation_accept",
        target=member,
        after={"status": member.status},
    )
    return member


@transaction.atomic
def invitation_revoke(*, actor: Actor, invitation: Invitation) -> Invitation:
    actor.require("member.manage", invitation.member)
    if invitation.state != "pending":
        raise Conflict(
            _("The invitation is already %(state)s.") % {"state": _state_word(invitation.state)},
            code="not_pending",
        )
    invitation.revoked_at = timezone.now()
    invitation.save(update_fields=["revoked_at"])
    audit.record(
        actor=actor,
        action="member.invitation_revoke",
        target=invitation.member,
        after={"invitation": invitation.pk},
    )
    return invitation
