"""Notices: a short message for one member, kept for their console and sent over IM.

A notice is written in its member's language: `title` and `body` may be lazy texts
(`gettext_lazy`, `ngettext_lazy(…, "count")`), rendered inside
`translation.override(member_language(member))` and filled with `params` (named
placeholders), so the language of whoever caused the notice never leaks in.

A notice is stored once per member and `key` (sending it again changes nothing), and once its
transaction commits each `notice_sent` listener is told — connectors registers the one that
texts it to the member on every platform where they have an identity and the organization an
active connector. A member reads their notices in the console and marks them read.
"""

from __future__ import annotations

from collections.abc import Callable

from django.db import IntegrityError, transaction
from django.utils import timezone, translation

from cadre.errors import NotFound
from cadre.ports import Listeners
from cadre.tenancy.actors import Actor
from cadre.tenancy.languages import member_language
from cadre.tenancy.models import Member, Notice

# Told of a new notice after its transaction commits (connectors: the IM text).
notice_sent: Listeners[Callable[[Notice], object]] = Listeners("notice sent")


def notice_send(
    *,
    member: Member,
    kind: str,
    key: str,
    title: str,
    body: str = "",
    url: str = "",
    params: dict | None = None,
) -> Notice | None:
    """Keep a notice for `member` and tell the listeners after commit; None when a notice with
    this key was already sent to them (or the member is not active). `title` and `body` are
    rendered in the member's language, then filled with `params` when given."""
    if not member.is_active:
        return None
    title, body = notice_texts(member, title, body, params)
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


def notice_texts(member: Member, title, body, params: dict | None = None) -> tuple[str, str]:
    """A notice's title and body as `member` reads them (lazy texts rendered in their language,
    named placeholders filled from `params`)."""
    with translation.override(member_language(member)):
        # `%` on a lazy text renders it in the active language (an `ngettext_lazy` whose count
        # is named picks its form from `params`).
        title = str(title % params) if params else str(title)
        body = (str(body % params) if params else str(body)) if body else ""
    return title, body


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
