"""Subscriptions: an agent follows another's publications (tracker → analyst → manager).

The publisher's model decides what to share by calling the `notify_subscribers` tool with a
structured message ({topic, summary, data}) and the ids of memories it shares. Each active
subscription whose topics match starts a run of the subscriber (channel and trigger
`subscription`) with that message and only the shared memories the publisher can read — never
its member's personal (user-scope) memories. Deliveries happen inside the tool call's recorded
effect, so a replayed step delivers nothing twice; runs are queued once the effect commits.

Every hop is audited (`agent.subscription.deliver`) and every run of a pipeline carries the
first run's trace id. A hop counter travels with the message: a chain (or a cycle A → B → A)
stops after `CADRE_SUBSCRIPTION_MAX_HOPS` hops, and one publish starts at most
`CADRE_SUBSCRIPTION_MAX_FANOUT` runs.

Who may subscribe: someone with `deployment.manage` wires any two agents of the organization;
a member subscribes their own agent, and following a colleague's agent waits for the
colleague's (or an admin's) approval.

The `notify_subscribers` tool calls `publish` inside a step, so this module sits below the
runtime's steps: it uses only the runtime's records (runs are queued by task name).
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext

from cadre.agents.models import Agent, AgentSubscription, Deployment, Run, Session
from cadre.agents.runtime.records.bookkeeping import emit
from cadre.agents.runtime.records.grants import grants_for_version, shared_memories
from cadre.agents.runtime.records.runs import execution_enqueue
from cadre.agents.tools.registry import ToolFailed
from cadre.errors import Conflict, InvalidInput, NotPermitted
from cadre.governance import audit
from cadre.tenancy.actors import Actor
from cadre.tenancy.models import Member

DEFAULT_MAX_FANOUT = 10
DEFAULT_MAX_HOPS = 4
MAX_DATA_CHARS = 16_000
MAX_TOPICS = 50


def max_fanout() -> int:
    return int(getattr(settings, "CADRE_SUBSCRIPTION_MAX_FANOUT", DEFAULT_MAX_FANOUT))


def max_hops() -> int:
    return int(getattr(settings, "CADRE_SUBSCRIPTION_MAX_HOPS", DEFAULT_MAX_HOPS))


# --- who may do what --------------------------------------------------------------------------


def _is_admin(actor: Actor) -> bool:
    return actor.kind == "system" or actor.has("deployment.manage")


def _member_pk(actor: Actor) -> int | None:
    if actor.member is None or not actor.has("chat.use"):
        return None
    return actor.member.pk


def _check_organization(actor: Actor, *agents: Agent) -> None:
    organization_id = getattr(actor.organization, "pk", None)
    if any(agent.organization_id != organization_id for agent in agents):
        raise NotPermitted(gettext("That agent does not exist."))


def _snapshot(subscription: AgentSubscription) -> dict:
    return {
        "subscriber": subscription.subscriber_id,
        "publisher": subscription.publisher_id,
        "topics": subscription.topics,
        "status": subscription.status,
        "max_per_hour": subscription.max_per_hour,
    }


def _clean_topics(topics: list[str] | None) -> list[str]:
    cleaned = []
    for topic in topics or []:
        if not isinstance(topic, str) or not topic.strip() or len(topic) > 100:
            raise InvalidInput(
                gettext("Each topic is a non-empty text of at most 100 characters."),
                details={"topics": ["Invalid topic."]},
            )
        cleaned.append(topic.strip().lower())
    if len(cleaned) > MAX_TOPICS:
        raise InvalidInput(
            gettext("A subscription follows at most %(max_topics)s topics.")
            % {"max_topics": MAX_TOPICS}
        )
    return sorted(set(cleaned))


# --- services ---------------------------------------------------------------------------------


@transaction.atomic
def subscription_create(
    *,
    actor: Actor,
    subscriber: Agent,
    publisher: Agent,
    topics: list[str] | None = None,
    max_per_hour: int | None = None,
) -> AgentSubscription:
    """Subscribe `subscriber` to `publisher`'s publications.

    Admins (`deployment.manage`) wire any two agents: active at once. A member subscribes
    their own agent: active when the publisher is also theirs, otherwise pending until the
    publisher's member approves (`subscription_approve`)."""
    _check_organization(actor, subscriber, publisher)
    if subscriber.pk == publisher.pk:
        raise InvalidInput(
            gettext("An agent cannot subscribe to itself."), code="self_subscription"
        )
    me = _member_pk(actor)
    if _is_admin(actor):
        status = AgentSubscription.Status.ACTIVE
    elif me is not None and subscriber.member_id == me:
        own = publisher.member_id == me
        status = AgentSubscription.Status.ACTIVE if own else AgentSubscription.Status.PENDING
    else:
        raise NotPermitted(gettext("You can only subscribe your own agents."))
    if max_per_hour is not None and not 1 <= max_per_hour <= 1000:
        raise InvalidInput(gettext("max_per_hour must be between 1 and 1000."))
    try:
        with transaction.atomic():
            subscription = AgentSubscription.objects.create(
                organization_id=subscriber.organization_id,
                subscriber=subscriber,
                publisher=publisher,
                topics=_clean_topics(topics),
                status=status,
                created_by=actor.member,
                approved_by=actor.member if status == AgentSubscription.Status.ACTIVE else None,
                **({"max_per_hour": max_per_hour} if max_per_hour is not None else {}),
            )
    except IntegrityError:
        raise Conflict(
            gettext("That agent already subscribes to this publisher."), code="already_subscribed"
        ) from None
    audit.record(
        actor=actor,
        action="agent.subscription.create",
        target=subscription,
        after=_snapshot(subscription),
    )
    return subscription


def _locked(subscription: AgentSubscription) -> AgentSubscription:
    return (
        AgentSubscription.objects.select_for_update()
        .select_related("subscriber", "publisher")
        .get(pk=subscription.pk)
    )


def _side(actor: Actor, subscription: AgentSubscription) -> str | None:
    """The actor's part in a subscription: admin, publisher, subscriber (or none)."""
    if _is_admin(actor):
        return "admin"
    me = _member_pk(actor)
    if me is not None and subscription.publisher.member_id == me:
        return "publisher"
    if me is not None and subscription.subscriber.member_id == me:
        return "subscriber"
    return None


def _change_status(
    actor: Actor, subscription: AgentSubscription, status: str, action: str, **fields
) -> AgentSubscription:
    before = {"status": subscription.status}
    subscription.status = status
    subscription.updated_at = timezone.now()
    for name, value in fields.items():
        setattr(subscription, name, value)
    subscription.save(update_fields=["status", "updated_at", *fields])
    audit.record(
        actor=actor,
        action=action,
        target=subscription,
        before=before,
        after={"status": status},
    )
    return subscription


@transaction.atomic
def subscription_approve(*, actor: Actor, subscription: AgentSubscription) -> AgentSubscription:
    """The publisher's member (or an admin) consents: a pending subscription delivers."""
    subscription = _locked(subscription)
    if _side(actor, subscription) not in ("admin", "publisher"):
        raise NotPermitted(gettext("Only the publishing agent's member or an admin can approve."))
    if subscription.status != AgentSubscription.Status.PENDING:
        raise Conflict(gettext("The subscription is not awaiting approval."), code="not_pending")
    return _change_status(
        actor,
        subscription,
        AgentSubscription.Status.ACTIVE,
        "agent.subscription.approve",
        approved_by=actor.member,
    )


@transaction.atomic
def subscription_pause(*, actor: Actor, subscription: AgentSubscription) -> AgentSubscription:
    """Either side (or an admin) stops deliveries for now."""
    subscription = _locked(subscription)
    if _side(actor, subscription) is None:
        raise NotPermitted(gettext("You cannot change this subscription."))
    if subscription.status != AgentSubscription.Status.ACTIVE:
        raise Conflict(gettext("Only an active subscription can be paused."), code="not_active")
    return _change_status(
        actor,
        subscription,
        AgentSubscription.Status.PAUSED,
        "agent.subscription.pause",
        paused_by=actor.member,
    )


@transaction.atomic
def subscription_resume(*, actor: Actor, subscription: AgentSubscription) -> AgentSubscription:
    """Deliveries start again. A member lifts only their own pause: a publisher's member who
    paused (withdrew consent) is not overruled by the subscriber's."""
    subscription = _locked(subscription)
    side = _side(actor, subscription)
    if side is None:
        raise NotPermitted(gettext("You cannot change this subscription."))
    if subscription.status != AgentSubscription.Status.PAUSED:
        raise Conflict(gettext("Only a paused subscription can be resumed."), code="not_paused")
    paused_by = subscription.paused_by_id
    if side != "admin" and paused_by is not None and paused_by != actor.member.pk:
        raise NotPermitted(gettext("Someone else paused this subscription; ask them or an admin."))
    return _change_status(
        actor,
        subscription,
        AgentSubscription.Status.ACTIVE,
        "agent.subscription.resume",
        paused_by=None,
    )


@transaction.atomic
def subscription_delete(*, actor: Actor, subscription: AgentSubscription) -> None:
    """Either side (or an admin) ends the subscription."""
    subscription = _locked(subscription)
    if _side(actor, subscription) is None:
        raise NotPermitted(gettext("You cannot change this subscription."))
    audit.record(
        actor=actor,
        action="agent.subscription.delete",
        target=subscription,
        before=_snapshot(subscription),
    )
    subscription.delete()


# --- delivery (inside the publish tool's recorded effect) -------------------------------------


def _shareable(ctx, ids: list[int]) -> list[dict]:
    """The listed memories the publisher can read, without its member's personal ones."""
    return [m for m in shared_memories(ctx, ids) if not m["scope"].startswith("user:")]


def _runnable(agent: Agent) -> bool:
    return (
        agent.status == Agent.Status.ACTIVE
        and agent.member.status == Member.Status.ACTIVE
        and agent.deployment.status != Deployment.Status.STOPPED
    )


def _render(message: dict, sender: dict) -> str:
    """The subscriber's input: the summary first (what to act on), then where it came from."""
    lines = [
        message["summary"],
        "",
        f"Published by {sender['agent_name']} ({sender['member']}) on topic {message['topic']!r}.",
    ]
    if message["data"]:
        lines.append("Data: " + json.dumps(message["data"], ensure_ascii=False, sort_keys=True))
    return "\n".join(lines)


def _recent_deliveries(subscriptions: list[AgentSubscription]) -> Counter:
    """Deliveries per subscription in the last hour (one query)."""
    since = timezone.now() - timedelta(hours=1)
    ids = Run.objects.filter(
        agent_id__in={s.subscriber_id for s in subscriptions},
        trigger="subscription",
        created_at__gte=since,
    ).values_list("input__subscription__id", flat=True)
    return Counter(ids)


def _deliver(
    ctx,
    subscription: AgentSubscription,
    *,
    message: dict,
    shared: list[dict],
    sender: dict,
    hop: int,
    chain: list[int],
) -> Run:
    """Start the subscriber's run for one publication (inside the tool's effect)."""
    publisher_run = ctx.run
    target = subscription.subscriber
    session, _ = Session.objects.get_or_create(
        organization_id=publisher_run.organization_id,
        agent=target,
        member=target.member,
        channel="subscription",
        external_id=f"subscription:{subscription.pk}",
        defaults={"title": f"Publications of {sender['agent_name']}"[:200]},
    )
    run = Run.objects.create(
        organization_id=publisher_run.organization_id,
        session=session,
        agent=target,
        member=target.member,
        version=target.version,
        trace_id=publisher_run.trace_id,
        trigger="subscription",
        input={
            "text": _render(message, sender),
            "publication": message,
            "shared_memories": shared,
            "from": sender,
            "subscription": {
                "id": subscription.pk,
                "hop": hop,
                "chain": chain,
                "publish_key": ctx.key,
            },
        },
        # The subscriber works for its own member, under its own template's grants.
        grants=grants_for_version(target.version),
    )
    Run.objects.filter(pk=run.pk).update(root_id=run.pk)
    emit(run.pk, "status", {"status": Run.Status.QUEUED})
    audit.record(
        actor=ctx.actor,
        action="agent.subscription.deliver",
        target=run,
        organization=publisher_run.organization,
        changes={
            "subscription": subscription.pk,
            "from_agent": publisher_run.agent_id,
            "to_agent": target.pk,
            "publisher_run": publisher_run.pk,
            "hop": hop,
            "topic": message["topic"],
            "shared_memories": [m["id"] for m in shared],
        },
    )
    execution_enqueue(run.pk)
    return run


def publish(ctx, args: dict) -> dict:
    """The `notify_subscribers` tool: deliver a structured message to the subscribers.

    Runs inside the executor's effect transaction (recorded under the step's idempotency
    key), so a replayed step returns the recorded deliveries instead of delivering again."""
    data = args.get("data") or {}
    if len(json.dumps(data, ensure_ascii=False, default=str)) > MAX_DATA_CHARS:
        raise ToolFailed("too_large", f"data is limited to {MAX_DATA_CHARS} characters of JSON")
    run = ctx.run
    message = {
        "topic": args["topic"].strip().lower(),
        "summary": args["summary"].strip(),
        "data": data,
    }
    requested = list(dict.fromkeys(args.get("share_memories") or []))
    shared = _shareable(ctx, requested)
    upstream = run.input.get("subscription") or {}
    hop = int(upstream.get("hop", 0)) + 1
    chain = [*upstream.get("chain", []), run.agent_id]
    sender = {
        "agent": run.agent_id,
        "agent_name": run.agent.name,
        "run": run.pk,
        "member": run.member.display_name,
    }
    subscriptions = [
        subscription
        for subscription in AgentSubscription.objects.filter(
            publisher_id=run.agent_id, status=AgentSubscription.Status.ACTIVE
        )
        .select_related("subscriber__member", "subscriber__deployment", "subscriber__version")
        .order_by("id")
        if not subscription.topics or message["topic"] in subscription.topics
    ]
    delivered, skipped = [], []
    recent = _recent_deliveries(subscriptions) if subscriptions else Counter()
    for subscription in subscriptions:
        reason = None
        if hop > max_hops():
            reason = "too_many_hops"
        elif len(delivered) >= max_fanout():
            reason = "fan_out"
        elif not _runnable(subscription.subscriber):
            reason = "subscriber_inactive"
        elif recent[subscription.pk] >= subscription.max_per_hour:
            reason = "rate_limited"
        if reason:
            skipped.append(
                {
                    "subscription": subscription.pk,
                    "agent": subscription.subscriber_id,
                    "reason": reason,
                }
            )
            continue
        delivered_run = _deliver(
            ctx, subscription, message=message, shared=shared, sender=sender, hop=hop, chain=chain
        )
        delivered.append(
            {
                "subscription": subscription.pk,
                "agent": subscription.subscriber_id,
                "run": delivered_run.pk,
            }
        )
    audit.record(
        actor=ctx.actor,
        action="agent.publish",
        target=run,
        organization=run.organization,
        changes={
            "topic": message["topic"],
            "hop": hop,
            "delivered": [d["run"] for d in delivered],
            "skipped": skipped,
            "shared_memories": [m["id"] for m in shared],
        },
    )
    result = {
        "topic": message["topic"],
        "hop": hop,
        "delivered": delivered,
        "skipped": skipped,
        "shared_memories": [m["id"] for m in shared],
    }
    withheld = [pk for pk in requested if pk not in result["shared_memories"]]
    if withheld:
        result["withheld_memories"] = withheld
    return result
