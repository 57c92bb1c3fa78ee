"""Console logins (User rows) for members, kept within their organization.

An organization's identity providers (OpenID Connect, SAML, the IM platforms' logins) vouch for
that organization's members and for nobody else: the owner of an organization can point its
provider anywhere and have it assert any e-mail. So a first SSO or IM sign-in never adopts an
existing User found by e-mail — which may be another organization's member, or an operator's
account — it creates a login of its own. A person joins a second organization with the login
they already have only by accepting an invitation while signed in (services/invitations.py).

User.email is the sign-in name and unique across the installation. A new SSO login takes the
member's e-mail when no login has it yet, else a name of its organization's under the reserved
`.invalid` top-level domain (RFC 2606: never anyone's mailbox), still readable as the address:
`alice@acme.test.globex.invalid`. Nobody types it: SSO logins have no password.
"""

from __future__ import annotations

import secrets

from django.db import IntegrityError, transaction

from cadre.governance import audit
from cadre.tenancy.actors import system_actor
from cadre.tenancy.models import Member, User

_RESERVED_DOMAIN = "invalid"
_NAME_LENGTH = User._meta.get_field("email").max_length


def _taken(name: str) -> bool:
    return User.objects.filter(email__iexact=name).exists()


def scoped_login_name(*, email: str, scope: str, discriminator: int) -> str:
    """A free sign-in name that belongs to `scope` (an organization's slug): the e-mail under
    `<scope>.invalid`, with `+<discriminator>` if that is taken, else `m<discriminator>@…`
    (members without e-mail, addresses too long to qualify)."""
    email = email.strip().lower()
    local, _, domain = email.rpartition("@")
    suffix = f"{scope}.{_RESERVED_DOMAIN}"
    candidates = []
    if local and domain:
        candidates += [f"{local}@{domain}.{suffix}", f"{local}+{discriminator}@{domain}.{suffix}"]
    candidates.append(f"m{discriminator}@{suffix}")
    for name in candidates:
        if len(name) <= _NAME_LENGTH and not _taken(name):
            return name
    # Only reachable if someone registered these very names on purpose.
    return f"m{discriminator}-{secrets.token_hex(4)}@{suffix}"


def _create(name: str, display_name: str) -> User | None:
    """A login without password named `name`, or None when a concurrent sign-in took it."""
    try:
        with transaction.atomic():
            return User.objects.create_user(
                email=name, password=None, display_name=display_name[:150]
            )
    except IntegrityError:
        return None


def member_login_create(*, member: Member) -> User:
    """A new login, without password, for a member's first sign-in through their organization's
    identity provider; the caller links it to the member. Never an existing login."""
    email = member.email.strip().lower()
    scope = member.organization.slug
    names = [email] if email and not _taken(email) else []
    names += [
        scoped_login_name(email=email, scope=scope, discriminator=member.pk),
        # A concurrent sign-in took the free name between the check and the insert.
        f"m{member.pk}-{secrets.token_hex(4)}@{scope}.{_RESERVED_DOMAIN}",
    ]
    for name in names:
        user = _create(name, member.display_name)
        if user is not None:
            return user
    raise IntegrityError(f"no free sign-in name for member {member.pk}")


def provider_made(user: User) -> bool:
    """Whether the login exists only because an identity provider named it: no password
    (nobody signs in by its name) and not an operator's account."""
    return not (user.has_usable_password() or user.is_staff or user.is_superuser)


def login_rename(*, user: User, reason: str) -> User:
    """Move a login an identity provider created to a name of its organization's, so the
    person who proved the e-mail it was named after can have it. It keeps its memberships and
    SSO links (neither goes by the name); audited in each of its organizations."""
    if not provider_made(user):
        raise ValueError("only a login without password is renamed")
    memberships = list(
        Member.objects.select_related("organization").filter(user=user).order_by("pk")
    )
    scope = memberships[0].organization.slug if memberships else "unassigned"
    before = user.email
    user.email = scoped_login_name(email=before, scope=scope, discriminator=user.pk)
    user.save(update_fields=["email"])
    for member in memberships:
        audit.record(
            actor=system_actor(member.organization, label="invitation"),
            action="member.login_rename",
            target=member,
            before={"login": before},
            after={"login": user.email},
            reason=reason,
        )
    return user
