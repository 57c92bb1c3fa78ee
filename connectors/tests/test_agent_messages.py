"""Delivery of agents' `im_send` messages: the right connector per recipient, once, with retries
that skip what was already sent, and the outcome recorded on the message."""

from __future__ import annotations

import pytest
from django.core.cache import cache

from cadre.agents import services as agent_services
from cadre.agents.models import AgentMessage, Session
from cadre.agents.runtime.lifecycle.services import run_start
from cadre.tenancy.actors import member_actor, system_actor
from connectors.base import services
from connectors.base.transport import TransportError
from connectors.feishu.tests.fake_api import APP_ID, APP_SECRET, FakeFeishu
from connectors.models import Delivery
from connectors.outbound import agent_messages
from connectors.tasks import agent_message_deliver, agent_messages_deliver_queued
from connectors.tests.helpers import make_connector
from tests.factories import IMIdentityFactory, PositionFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def feishu(fake_api):
    return FakeFeishu(fake_api)


@pytest.fixture
def agent(alice, bob):
    owner = member_actor(alice)
    position = PositionFactory(organization=alice.organization, name="Ops", code="ops")
    alice.positions.add(position)
    template = agent_services.template_create(
        actor=owner,
        name="Ops assistant",
        code="ops-assistant",
        agent_md="# Persona",
        sop="# SOP",
        user_md_template="# About",
        tool_permissions={"im_send": {"risk": "low", "confirmation": "never"}},
        model_settings={"provider": "offline", "model": "offline-1"},
    )
    version = template.versions.get()
    agent_services.version_submit(actor=owner, version=version)
    agent_services.version_publish(actor=owner, version=version, reason="ready")
    deployment = agent_services.deployment_create(
        actor=owner, name="Ops agents", template=template, positions=[position], channels=["feishu"]
    )
    return deployment.agents.get(member=alice)


def feishu_connector(owner, fake_api, name="Feishu"):
    return make_connector(
        owner,
        "feishu",
        {"app_id": APP_ID, "app_secret": APP_SECRET},
        {"api_base_url": fake_api.url, "max_attempts": 1},
        name=name,
    )


def agent_message(agent, recipients, *, text="The report is ready.", run=None, key="k-1"):
    return AgentMessage.objects.create(
        organization_id=agent.organization_id,
        agent=agent,
        run=run,
        recipients=recipients,
        text=text,
        channel=run.session.channel if run else "console",
        idempotency_key=key,
    )


def sent_to(feishu) -> list[tuple[str, str, str]]:
    import json

    return [
        (
            request.query.get("receive_id_type"),
            request.json()["receive_id"],
            json.loads(request.json()["content"])["text"],
        )
        for request in feishu.sent()
    ]


def test_member_gets_the_message_through_their_im_identity_once(agent, bob, fake_api, feishu):
    connector = feishu_connector(agent.member, fake_api)
    IMIdentityFactory(member=bob, platform="feishu", platform_user_id="ou_bob")
    message = agent_message(agent, [{"member": bob.pk, "name": "Bob"}])

    assert agent_message_deliver.apply(args=[message.pk]).get() == "sent"
    assert agent_message_deliver.apply(args=[message.pk]).get() == "sent"  # a redelivered task

    assert sent_to(feishu) == [("open_id", "ou_bob", "The report is ready.")]
    message.refresh_from_db()
    assert message.status == AgentMessage.Status.SENT
    row = Delivery.objects.get(idempotency_key=f"agent-message:{message.pk}:0")
    assert (row.connector_id, row.recipient, row.status) == (connector.pk, "ou_bob", "sent")
    assert row.platform_message_id.startswith("om_")


def test_retry_after_a_transient_failure_sends_only_the_recipients_not_yet_sent(
    agent, bob, fake_api, feishu
):
    feishu_connector(agent.member, fake_api)
    IMIdentityFactory(member=bob, platform="feishu", platform_user_id="ou_bob")
    failures = {"oc_team": 1}
    original = fake_api.routes[("POST", "/open-apis/im/v1/messages")]

    def flaky(request):
        receiver = request.json()["receive_id"]
        if failures.get(receiver):
            failures[receiver] -= 1
            return 503, {"code": 1, "msg": "busy"}
        return original(request)

    fake_api.route("POST", "/open-apis/im/v1/messages", flaky)
    message = agent_message(agent, [{"member": bob.pk}, {"group": "feishu:oc_team"}])

    with pytest.raises(TransportError) as raised:
        agent_messages.deliver(message.pk)
    assert raised.value.retryable
    message.refresh_from_db()
    assert message.status == AgentMessage.Status.QUEUED
    group_row = Delivery.objects.get(idempotency_key=f"agent-message:{message.pk}:1")
    assert group_row.status == "failed" and group_row.attempts == 1

    assert agent_messages.deliver(message.pk) == AgentMessage.Status.SENT

    # What reached the platform: bob once; the group's failed attempt, then its retry.
    delivered = [(kind, to) for kind, to, _ in sent_to(feishu)]
    assert delivered == [("open_id", "ou_bob"), ("chat_id", "oc_team"), ("chat_id", "oc_team")]
    group_row.refresh_from_db()
    assert group_row.status == "sent" and group_row.attempts == 2


def test_task_gives_up_after_its_last_retry_and_records_failed(agent, bob, fake_api, feishu):
    feishu_connector(agent.member, fake_api)
    IMIdentityFactory(member=bob, platform="feishu", platform_user_id="ou_bob")
    fake_api.fail_next("/open-apis/im/v1/messages", 503, times=5)
    message = agent_message(agent, [{"member": bob.pk}])

    result = agent_message_deliver.apply(args=[message.pk], retries=8).get()

    assert result == AgentMessage.Status.FAILED
    message.refresh_from_db()
    assert message.status == AgentMessage.Status.FAILED


def test_member_without_an_im_account_fails_the_message_and_nothing_is_sent(
    agent, bob, fake_api, feishu
):
    feishu_connector(agent.member, fake_api)
    message = agent_message(agent, [{"member": bob.pk, "name": "Bob"}])

    assert agent_messages.deliver(message.pk) == AgentMessage.Status.FAILED
    assert feishu.sent() == []
    assert not Delivery.objects.exists()


def test_run_from_an_im_chat_sends_through_that_chats_connector(agent, bob, fake_api, feishu):
    feishu_connector(agent.member, fake_api, name="Feishu main")
    second = feishu_connector(agent.member, fake_api, name="Feishu subsidiary")
    IMIdentityFactory(member=bob, platform="feishu", platform_user_id="ou_bob")
    session = Session.objects.create(
        organization_id=agent.organization_id,
        agent=agent,
        member=agent.member,
        channel="feishu",
        external_id=f"{second.pk}:oc_alice",
    )
    run = run_start(
        actor=system_actor(agent.organization),
        agent=agent,
        text="tell bob",
        session=session,
        channel="feishu",
    )
    message = agent_message(agent, [{"member": bob.pk}, {"group": "oc_here"}], run=run)

    assert agent_messages.deliver(message.pk) == AgentMessage.Status.SENT

    rows = Delivery.objects.filter(idempotency_key__startswith="agent-message:")
    assert {(row.connector_id, row.recipient, row.recipient_type) for row in rows} == {
        (second.pk, "ou_bob", "user"),
        (second.pk, "oc_here", "chat"),
    }


def test_group_listed_in_a_binding_goes_through_that_connector(agent, alice, fake_api, feishu):
    feishu_connector(agent.member, fake_api, name="Feishu main")
    bound = feishu_connector(agent.member, fake_api, name="Feishu sales")
    services.binding_create(actor=member_actor(alice), connector=bound, chat_ids=["oc_sales"])
    message = agent_message(agent, [{"group": "oc_sales"}])

    assert agent_messages.deliver(message.pk) == AgentMessage.Status.SENT
    assert Delivery.objects.get().connector_id == bound.pk


def test_unknown_group_with_several_connectors_fails_with_a_reason(agent, fake_api, feishu):
    feishu_connector(agent.member, fake_api, name="one")
    feishu_connector(agent.member, fake_api, name="two")
    message = agent_message(agent, [{"group": "somewhere"}])

    assert agent_messages.deliver(message.pk) == AgentMessage.Status.FAILED
    assert feishu.sent() == []


def test_a_delivery_in_progress_elsewhere_is_not_repeated(agent, bob, fake_api, feishu):
    feishu_connector(agent.member, fake_api)
    IMIdentityFactory(member=bob, platform="feishu", platform_user_id="ou_bob")
    message = agent_message(agent, [{"member": bob.pk}])
    lock = f"connectors:agent-message-lock:{message.pk}"
    cache.add(lock, "other-worker", 60)
    try:
        assert agent_message_deliver.apply(args=[message.pk]).get() == "busy"
    finally:
        cache.delete(lock)
    assert feishu.sent() == []
    message.refresh_from_db()
    assert message.status == AgentMessage.Status.QUEUED


def test_beat_sweep_delivers_queued_messages(agent, bob, fake_api, feishu, celery_eager):
    feishu_connector(agent.member, fake_api)
    IMIdentityFactory(member=bob, platform="feishu", platform_user_id="ou_bob")
    first = agent_message(agent, [{"member": bob.pk}], key="k-1")
    done = agent_message(agent, [{"member": bob.pk}], key="k-2")
    AgentMessage.objects.filter(pk=done.pk).update(status=AgentMessage.Status.SENT)

    assert agent_messages_deliver_queued() == 1

    first.refresh_from_db()
    assert first.status == AgentMessage.Status.SENT
    assert len(feishu.sent()) == 1
