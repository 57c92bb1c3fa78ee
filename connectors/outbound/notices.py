"""Members' notices over IM: a text to the member on each platform where they have an identity
and the organization an active connector (tenancy's `notice_sent` port, registered in
`ConnectorsConfig.ready()`; sent by the task `connectors.tasks.notice_deliver`)."""

from __future__ import annotations

from django.conf import settings

from cadre.queues import enqueue
from cadre.tenancy.models import IMIdentity, Notice
from cadre.tenancy.services.notices import notice_sent
from connectors.models import Connector
from connectors.outbound.sending import send

TASK = "connectors.tasks.notice_deliver"


def notice_enqueue(notice: Notice) -> None:
    """tenancy's `notice_sent` listener (called after the notice commits)."""
    enqueue(TASK, notice.pk)


def register() -> None:
    notice_sent.register(notice_enqueue)


def notice_text(notice: Notice) -> str:
    text = notice.title
    if notice.body:
        text += f"\n{notice.body}"
    if notice.url:
        text += f"\n{settings.CADRE_BASE_URL}{notice.url}"
    return text


def notice_deliver(notice_id: int) -> int:
    """Text the notice once per platform where its member can be reached; how many were sent
    (a retry sends nothing twice: one delivery per notice and identity)."""
    notice = Notice.objects.select_related("member").filter(pk=notice_id).first()
    if notice is None or not notice.member.is_active:
        return 0
    connectors = {
        c.platform: c
        for c in Connector.objects.filter(
            organization_id=notice.organization_id, status=Connector.Status.ACTIVE
        ).order_by("pk")
    }
    identities = IMIdentity.objects.filter(
        organization_id=notice.organization_id,
        member_id=notice.member_id,
        platform__in=list(connectors),
    ).order_by("pk")
    sent = 0
    for identity in identities:
        send(
            connectors[identity.platform],
            kind="text",
            recipient=identity.platform_user_id,
            body={"text": notice_text(notice)},
            idempotency_key=f"notice:{notice.pk}:{identity.pk}",
        )
        sent += 1
    return sent
