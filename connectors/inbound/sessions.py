"""Who wrote and where it goes: the sender's member (identity, profile lookup), the member's
agent on this connector, the chat's session and the run started in it; `Batch`, the lookups
the events of one batch share."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from django.core.cache import cache
from django.utils import timezone

from cadre.agents.models import Agent, Deployment, Session
from cadre.agents.runtime.lifecycle.services import run_start
from cadre.tenancy.actors import system_actor
from cadre.tenancy.languages import remember_platform_locale
from connectors.base import ParsedEvent, identities, registry
from connectors.base.transport import Transport, TransportError
from connectors.models import Connector, InboundEvent
from connectors.outbound.sending import transport_for

logger = logging.getLogger(__name__)

# How long a platform's answer "no locale for this user" is trusted before asking again.
LOCALE_ASK_SECONDS = 24 * 3600


@dataclass
class Batch:
    """What the events of one batch share: looked up once, not once per event."""

    identities: dict = field(default_factory=dict)
    agents: dict = field(default_factory=dict)
    bindings: dict = field(default_factory=dict)
    transports: dict = field(default_factory=dict)
    locales: dict = field(default_factory=dict)  # (connector, user id) -> what the profile said
    settled: list = field(default_factory=list)

    def transport(self, connector: Connector) -> Transport:
        if connector.pk not in self.transports:
            self.transports[connector.pk] = transport_for(connector)
        return self.transports[connector.pk]

    def settle(self, event: InboundEvent, status: str, *, error: str = "") -> None:
        """Mark an event whose only effect was a reply: written with the batch's others in
        one statement (`flush`). Safe to delay: should the worker die first, the event is
        claimed again later and its reply, already logged as sent, is not sent twice."""
        event.status, event.error, event.processed_at = status, error[:300], timezone.now()
        self.settled.append(event)

    def flush(self) -> None:
        if self.settled:
            settled, self.settled = self.settled, []
            InboundEvent.objects.bulk_update(settled, ["status", "error", "processed_at", "member"])


def agent_for(connector: Connector, member, chat_id: str, batch: Batch | None = None):
    """The member's agent this connector serves: a bound deployment first, else one whose
    channels name the platform, else the member's first active agent."""
    batch = batch or Batch()
    cache_key = (connector.pk, member.pk, chat_id)
    if cache_key in batch.agents:
        return batch.agents[cache_key]
    if connector.pk not in batch.bindings:
        batch.bindings[connector.pk] = list(connector.bindings.all())
    agents = (
        Agent.objects.filter(
            member=member, status=Agent.Status.ACTIVE, organization_id=connector.organization_id
        )
        .exclude(deployment__status=Deployment.Status.STOPPED)
        .select_related("deployment")
    )
    bound = [
        b.deployment_id
        for b in batch.bindings[connector.pk]
        if b.deployment_id and (not b.chat_ids or chat_id in b.chat_ids)
    ]
    agent = None
    if bound:
        agent = agents.filter(deployment_id__in=bound).order_by("id").first()
    if agent is None:
        candidates = list(agents.order_by("id"))
        agent = next(
            (a for a in candidates if connector.platform in (a.deployment.channels or [])),
            candidates[0] if candidates else None,
        )
    batch.agents[cache_key] = agent
    return agent


def start_run(event: InboundEvent, member, message: ParsedEvent, batch: Batch | None = None):
    """Hand the message to the agents runtime: one run in the chat's session. None: no agent."""
    connector = event.connector
    agent = agent_for(connector, member, message.chat_id, batch)
    if agent is None:
        return None
    external_id = f"{connector.pk}:{message.chat_id or message.sender_id}"
    session = (
        Session.objects.filter(agent=agent, channel=connector.platform, external_id=external_id)
        .order_by("-last_activity_at")
        .first()
    )
    if session is None:
        session = Session.objects.create(
            organization_id=agent.organization_id,
            agent=agent,
            member=member,
            channel=connector.platform,
            external_id=external_id,
            title=message.text[:80],
        )
    actor = system_actor(connector.organization, label=f"connector {connector.name}")
    # Files arrive as lines of the text (the model sees them) and as references on the run
    # (`connectors.base.attachments.attachment_download(event, index)` fetches one on demand).
    attachments = [
        {**attachment, "inbound_event": event.pk, "index": index}
        for index, attachment in enumerate(message.attachments)
    ]
    return run_start(
        actor=actor,
        agent=agent,
        text=message.text,
        session=session,
        channel=connector.platform,
        attachments=attachments,
    )


def resolve_sender(connector: Connector, message: ParsedEvent, batch: Batch | None = None):
    batch = batch or Batch()
    cache_key = (
        connector.pk,
        message.sender_id,
        message.tenant_key,
        message.sender_email,
        message.sender_mobile,
    )
    if cache_key not in batch.identities:
        member = _resolve_sender_uncached(connector, message, batch)
        if member is not None and message.sender_locale:  # the event states it
            remember_platform_locale(member, message.sender_locale)
        elif member is not None:
            _learn_platform_locale(connector, member, message, batch)
        batch.identities[cache_key] = member
    return batch.identities[cache_key]


def _learn_platform_locale(connector: Connector, member, message: ParsedEvent, batch: Batch):
    """A member who chose no language is written to in the one their platform reports (Slack's
    `locale`), asked at most once a day per user; a failed lookup changes nothing."""
    if member.language or member.platform_language:
        return
    platform = registry().get(connector.platform)
    if platform is None or not platform.reports_locale:
        return
    locale = batch.locales.get((connector.pk, message.sender_id))
    if locale is None:
        key = f"connectors:locale-asked:{connector.pk}:{message.sender_id}"
        if not cache.add(key, 1, LOCALE_ASK_SECONDS):
            return
        try:
            profile = batch.transport(connector).lookup_user(message.sender_id)
            locale = str(profile.get("locale") or "")
        except (TransportError, NotImplementedError) as error:
            logger.info("connectors: locale lookup failed for %s: %s", message.sender_id, error)
            return
    remember_platform_locale(member, locale)


def _resolve_sender_uncached(connector: Connector, message: ParsedEvent, batch: Batch):
    member = identities.identity_resolve(
        connector,
        platform_user_id=message.sender_id,
        tenant_key=message.tenant_key,
        email=message.sender_email,
        mobile=message.sender_mobile,
        display_name=message.sender_name,
    )
    if member is not None or message.sender_email or message.sender_mobile:
        return member
    try:
        profile = batch.transport(connector).lookup_user(message.sender_id)
    except (TransportError, NotImplementedError) as error:
        logger.info("connectors: profile lookup failed for %s: %s", message.sender_id, error)
        return None
    if not profile:
        return None
    batch.locales[(connector.pk, message.sender_id)] = str(profile.get("locale") or "")
    message.sender_email = profile.get("email", "")
    message.sender_mobile = profile.get("mobile", "")
    message.sender_name = message.sender_name or profile.get("name", "")
    if not (message.sender_email or message.sender_mobile):
        return None
    return identities.identity_resolve(
        connector,
        platform_user_id=message.sender_id,
        tenant_key=message.tenant_key,
        email=message.sender_email,
        mobile=message.sender_mobile,
        display_name=message.sender_name,
    )
