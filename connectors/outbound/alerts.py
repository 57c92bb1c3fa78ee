"""Governance alerts over IM: the "im" alert channel, a text to each member through their
organization's active connector on a platform where the member has an identity."""

from __future__ import annotations

from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from cadre.governance.models import Alert
from cadre.tenancy.models import IMIdentity
from connectors.base.language import speaking_to
from connectors.models import Connector
from connectors.outbound.sending import send

# How the alert's severity is written before its title, by severity code.
SEVERITIES = {
    "info": gettext_lazy("INFO"),
    "warning": gettext_lazy("WARNING"),
    "critical": gettext_lazy("CRITICAL"),
}


def alert_text(alert: Alert) -> str:
    """The alert's line in the active language ("[WARNING] Spend over budget")."""
    severity = SEVERITIES.get(alert.severity)
    return _("[%(severity)s] %(title)s") % {
        "severity": str(severity) if severity is not None else alert.severity.upper(),
        "title": alert.title,
    }


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
    ).select_related("member", "member__organization")
    done: set[int] = set()
    for identity in identities:
        if identity.member_id in done:
            continue
        with speaking_to(identity.member):  # each member reads it in their language
            text = alert_text(alert)
        send(
            connectors[identity.platform],
            kind="text",
            recipient=identity.platform_user_id,
            body={"text": text},
            idempotency_key=f"alert:{alert.pk}:{identity.member_id}",
        )
        done.add(identity.member_id)
    return "im"
