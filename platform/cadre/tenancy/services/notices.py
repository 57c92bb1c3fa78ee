"""Notices: a short message for one member, kept for their console and sent over IM.

A notice is stored once per member and `key` (sending it again changes nothing), and once its
transaction commits each `notice_sent` listener is told — connectors registers the one that
texts it to the member on every platform where they have an identity and the organization an
active connector. A member reads their notices in the console and marks them read.
"""

from __future__ import annotations

from collections.abc import Callable

from django.db import IntegrityError, transaction
from django.utils import timezone

from cadre.errors import NotFound
from cadre.ports import Listeners
from cadre.tenancy.actors import Actor
from cadre.tenancy.models import Member, Notice

# Told of a new notice after its transaction commits (connectors: the IM text).
notice_sent: Listeners[Callable[[Notice], object]] = Listeners("notice sent")


def notice_send(
    *, member: Member, kind: str, key: str, title: str, body: str = "", url: str = ""
) -> Notice | None:
    """Keep a notice for `member` and tell the listeners after commit; None when a notice with
    this key was already sent to them (or the member is not active)."""
    if not member.is_active:
        return None
    try:
        with transaction.atomic():
            notice = Notice.objects.create(
                organization_id=member.organization_id,
                member=member,
                kind=kind[:64],
                key=key[:200],
                title=title[:200],
                body=body[:4000],
                url=url[:500],
            )
    except IntegrityError:
        return None
    transaction.on_commit(lambda: notice_sent.notify(notice))
    return notice


def notices_for(actor: Actor):
    """The actor's own notices, newest first (a member reads only their own)."""
    if actor.member is None:
        return Notice.objects.none()
    return Notice.objects.filter(member=actor.member)


def notices_shown(*, actor: Actor, kind: str = "", limit: int = 10) -> list[Notice]:
    """The actor's newest notices (of `kind`, if given) as a page shows them; the unread ones
    among them are marked read (each keeps `read_at` None in the returned copies, so the page
    can still say which are new)."""
    notices = notices_for(actor)
    if kind:
        notices = notices.filter(kind=kind)
    shown = list(notices[:limit])
    unread = [notice.pk for notice in shown if notice.read_at is None]
    if unread:
        Notice.objects.filter(pk__in=unread).update(read_at=timezone.now())
    return shown


@transaction.atomic
def notice_mark_read(*, actor: Actor, notice_id: int) -> Notice:
    notice = notices_for(actor).select_for_update().filter(pk=notice_id).first()
    if notice is None:
        raise NotFound("No such notice.", code="notice_not_found")
    if notice.read_at is None:
        notice.read_at = timezone.now()
        notice.save(update_fields=["read_at"])
    return notice
