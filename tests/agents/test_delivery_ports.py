"""The runtime's ports up to the connectors: delivery channels for replies and agent messages,
and governance's confirmation listeners. The runtime works with nothing registered; what is
registered is handed its value once, after commit."""

from __future__ import annotations

import pytest

from cadre.agents import tasks
from cadre.agents.models import AgentMessage, Run, Session, Step
from cadre.agents.runtime.lifecycle import execution as engine
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.agents.runtime.records import delivery
from cadre.governance import confirmations
from cadre.governance.models import Confirmation
from cadre.tenancy.actors import member_actor
from tests.factories import MemberFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_after_run(monkeypatch):
    # The after-run hooks (memory, compaction) are queued on commit too: not what is tested.
    monkeypatch.setattr(tasks.run_after, "apply_async", lambda *args, **kwargs: None)


@pytest.fixture
def eager_celery():
    from cadre.celery import app

    saved = (app.conf.task_always_eager, app.conf.task_eager_propagates)
    app.conf.task_always_eager, app.conf.task_eager_propagates = True, True
    yield
    app.conf.task_always_eager, app.conf.task_eager_propagates = saved


def _im_run(bob, agent, text):
    session = Session.objects.create(
        organization_id=agent.organization_id,
        agent=agent,
        member=agent.member,
        channel="feishu",
        external_id="7:chat-1",
    )
    return runtime.run_start(actor=member_actor(bob), agent=agent, text=text, session=session)


class FakeChannel:
    def __init__(self):
        self.replies: list[delivery.Reply] = []
        self.messages: list[int] = []
        self.channel = delivery.Channel(reply=self.replies.append, message=self.messages.append)


def test_a_run_finishes_with_no_delivery_channel_registered(
    bob, bob_agent, django_capture_on_commit_callbacks
):
    run = _im_run(bob, bob_agent, "hello there")
    with delivery.channels.overridden(), django_capture_on_commit_callbacks(execute=True):
        assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED and run.output["text"].startswith("Offline model: ")


def test_the_reply_is_handed_to_its_channel_once_after_commit(
    bob, bob_agent, django_capture_on_commit_callbacks
):
    fake = FakeChannel()
    run = _im_run(bob, bob_agent, "hello there")
    with delivery.channels.overridden({"feishu": fake.channel}):
        with django_capture_on_commit_callbacks() as callbacks:
            assert engine.run_execute(run.pk) == Run.Status.COMPLETED
        assert fake.replies == []  # nothing before the commit
        for callback in callbacks:
            callback()
    run.refresh_from_db()
    assert fake.replies == [
        delivery.Reply(
            run_id=run.pk,
            session_id=run.session_id,
            channel="feishu",
            conversation="7:chat-1",
            status=Run.Status.COMPLETED,
            text=run.output["text"],
        )
    ]
    assert delivery.Reply.from_dict(fake.replies[0].to_dict()) == fake.replies[0]
    assert fake.messages == []


def test_a_console_run_hands_no_reply_to_the_im_channels(
    bob, bob_agent, django_capture_on_commit_callbacks
):
    fake = FakeChannel()
    run = runtime.run_start(actor=member_actor(bob), agent=bob_agent, text="hello")
    channels = delivery.channels.overridden({"feishu": fake.channel})
    with channels, django_capture_on_commit_callbacks(execute=True):
        assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    assert fake.replies == []


def test_an_agent_message_is_handed_to_a_channel_once_after_commit(
    bob, bob_agent, org_a, django_capture_on_commit_callbacks
):
    MemberFactory(organization=org_a, display_name="Carol")
    fake = FakeChannel()
    run = runtime.run_start(actor=member_actor(bob), agent=bob_agent, text="send hello to Carol")
    with delivery.channels.overridden({"feishu": fake.channel}):
        with django_capture_on_commit_callbacks() as callbacks:
            assert engine.run_execute(run.pk) == Run.Status.COMPLETED
        assert fake.messages == []
        for callback in callbacks:
            callback()
    message = AgentMessage.objects.get(run=run)
    # From the console: the message still goes out, through an IM channel.
    assert fake.messages == [message.pk]


def test_an_agent_message_with_no_channel_fails_at_once_with_the_reason(bob, bob_agent, org_a):
    MemberFactory(organization=org_a, display_name="Carol")
    run = runtime.run_start(actor=member_actor(bob), agent=bob_agent, text="send hello to Carol")
    with delivery.channels.overridden():
        assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    assert not AgentMessage.objects.filter(run=run).exists()  # nothing stored, nothing sent
    step = run.steps.get(name="im_send")
    assert step.status == Step.Status.FAILED
    assert step.error == "no connector for channel 'console'"
    assert step.output == {"error": "undeliverable", "message": step.error}
    run.refresh_from_db()
    assert "done" not in run.output["text"]


def test_a_channel_that_cannot_reach_anyone_fails_the_message_without_sending(
    bob, bob_agent, org_a, django_capture_on_commit_callbacks
):
    MemberFactory(organization=org_a, display_name="Carol")
    fake = FakeChannel()
    channel = delivery.Channel(
        reply=fake.replies.append, message=fake.messages.append, check=lambda m: "nobody home"
    )
    run = runtime.run_start(actor=member_actor(bob), agent=bob_agent, text="send hello to Carol")
    overridden = delivery.channels.overridden({"feishu": channel})
    with overridden, django_capture_on_commit_callbacks(execute=True):
        assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    assert fake.messages == [] and not AgentMessage.objects.filter(run=run).exists()
    assert run.steps.get(name="im_send").error == "nobody home"


def test_a_confirmation_raised_by_a_run_sends_its_cards_once(
    bob, bob_agent, org_a, eager_celery, django_capture_on_commit_callbacks
):
    names = [
        MemberFactory(organization=org_a, display_name=f"Rep {i}").display_name for i in range(6)
    ]
    told: list[Confirmation] = []

    def cards(confirmation):
        told.append(confirmation)
        return 1

    run = runtime.run_start(
        actor=member_actor(bob), agent=bob_agent, text=f"send price list to {', '.join(names)}"
    )
    with confirmations.on_created.overridden([cards]):
        with django_capture_on_commit_callbacks(execute=True):
            assert engine.run_execute(run.pk) == Run.Status.WAITING
        confirmation = Confirmation.objects.get(run_id=run.pk)
        assert [c.pk for c in told] == [confirmation.pk]
        with django_capture_on_commit_callbacks(execute=True):
            confirmations.confirmation_decide(
                confirmation=confirmation, decider=bob, decision="approve", via="console"
            )
    assert len(told) == 1  # deciding sends no card
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED  # resumed by the agents' decision listener


def test_the_decision_listener_is_registered_once():
    assert list(confirmations.on_decided).count(runtime.confirmation_decided) == 1


def test_a_run_stopped_by_its_limit_hands_its_channel_a_notice_not_the_error(
    bob, bob_agent, django_capture_on_commit_callbacks
):
    fake = FakeChannel()
    run = _im_run(bob, bob_agent, "hello there")
    Run.objects.filter(pk=run.pk).update(grants={**run.grants, "budget": {"max_steps": 0}})
    channels = delivery.channels.overridden({"feishu": fake.channel})
    with channels, django_capture_on_commit_callbacks(execute=True):
        assert engine.run_execute(run.pk) == Run.Status.FAILED
    run.refresh_from_db()
    assert run.error == "budget exceeded: too many model calls"
    assert fake.replies == [
        delivery.Reply(
            run_id=run.pk,
            session_id=run.session_id,
            channel="feishu",
            conversation="7:chat-1",
            status=Run.Status.FAILED,
            text=delivery.NOTICES["limit"],
            notice="limit",
        )
    ]
    # The chat is told the same line.
    notice = run.events.get(kind="notice")
    assert notice.data == {"notice": "limit", "text": delivery.NOTICES["limit"]}


def test_a_run_of_a_stopped_agent_hands_its_channel_the_unavailable_notice(
    bob, bob_agent, django_capture_on_commit_callbacks
):
    fake = FakeChannel()
    run = _im_run(bob, bob_agent, "hello there")
    type(bob_agent).objects.filter(pk=bob_agent.pk).update(status="stopped")
    channels = delivery.channels.overridden({"feishu": fake.channel})
    with channels, django_capture_on_commit_callbacks(execute=True):
        assert engine.run_execute(run.pk) == Run.Status.CANCELLED
    assert [(reply.notice, reply.text) for reply in fake.replies] == [
        ("unavailable", delivery.NOTICES["unavailable"])
    ]
