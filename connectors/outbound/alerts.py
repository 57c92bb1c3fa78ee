"""Governance alerts over IM: the "im" alert channel, a text to each member through their
organization's active connector on a platform where the member has an identity."""

from __future__ import annotations

from cadre.governance.models import Alert
from cadre.tenancy.models import IMIdentity
from connectors.models import Connector
from connectors.outbound.sending import send


def alert_im_deliver(alert: Alert, channel: dict) -> str:
    """Text the alert once to each of the channel's members (the "im" entry of
    governance's ALERT_CHANNELS)."""
    member_ids = [int(pk) for pk in channel.get("members", [])]
    connectors = {
        c.platform: c
        for c in Connector.objects.filter(
            organization_id=alert.organization_id, status=Connector.Status.ACTIVE
        )
    }
    identities = IMIdentity.objects.filter(
        organization_id=alert.organization_id,
        member_id__in=member_ids,
        platform__in=list(connectors),
    )
    done: set[int] = set()
    for identity in identities:
        if identity.member_id in done:
            continue
        send(
            connectors[identity.platform],
            kind="text",
            recipient=identity.platform_user_id,
            body={"text": f"[{alert.severity.upper()}] {alert.title}"},
            idempotency_key=f"alert:{alert.pk}:{identity.member_id}",
        )
        done.add(identity.member_id)
    return "im"
