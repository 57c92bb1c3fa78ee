"""Read paths for connectors: the console's lists, health and the unmapped-user queue."""

from __future__ import annotations

from django.db.models import Count, Q

from cadre.tenancy.actors import Actor
from connectors.models import Connector, InboundEvent, UnmappedIdentity


def connector_list(actor: Actor):
    """The connectors the actor manages, with the size of each one's unmapped-user queue."""
    return (
        Connector.objects.restrict(actor, "manage")
        .annotate(unmapped_waiting=Count("unmapped", filter=Q(unmapped__resolved_at__isnull=True)))
        .order_by("name", "pk")
    )


def connector_recent_failures(connector: Connector, *, limit: int = 10) -> list:
    """The latest inbound events that failed, newest first (the connector page's health)."""
    return list(
        InboundEvent.objects.filter(connector=connector, status=InboundEvent.Status.FAILED)
        .only("id", "event_key", "kind", "sender_id", "received_at", "attempts", "error")
        .order_by("-received_at")[:limit]
    )


def unmapped_queue(actor: Actor, connector: Connector):
    """Platform users waiting to be mapped (or dismissed) on this connector, latest first."""
    return UnmappedIdentity.objects.restrict(actor, "manage").filter(
        connector=connector, resolved_at__isnull=True
    )
