"""The worker's drain: stored events claimed in batches, each processed exactly once."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from datetime import timedelta

import pytest
from celery.signals import before_task_publish
from django.db import OperationalError, connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from cadre.agents.models import Run
from connectors.base import ParsedEvent
from connectors.inbound import dispatch, drain
from connectors.inbound import store as inbound
from connectors.inbound.sessions import Batch
from connectors.models import Delivery, InboundEvent
from connectors.tests.helpers import make_connector, sales_agent
from tests.factories import IMIdentityFactory
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db


@pytest.fixture
def hook(alice, fake_api):
    fake_api.route("POST", "/callback", lambda request: (200, {"ok": True}))
    return make_connector(
        alice,
        "webhook",
        {"signing_secret": "whsec-drain"},
        # One attempt per send: a retryable failure goes back to the drain at once.
        {"callback_url": f"{fake_api.url}/callback", "max_attempts": 1},
    )


def store(connector, count: int, *, sender: str = "u-bob", prefix: str = "evt") -> list[int]:
    ids = []
    for number in range(count):
        event = ParsedEvent(
            event_key=f"{prefix}-{number}", sender_id=sender, chat_id="c-1", text=f"hello {number}"
        )
        ids += [item.event_id for item in inbound.inbound_store(connector, [event])]
    return ids


def test_drain_processes_every_stored_event_once_across_batches(
    hook, bob, fake_api, django_capture_on_commit_callbacks
):
    IMIdentityFactory(member=bob, platform="webhook", platform_user_id="u-bob")
    with django_capture_on_commit_callbacks(execute=False):
        ids = store(hook, 7)
    assert drain.inbound_drain(batch_size=3) == 7
    events = InboundEvent.objects.filter(pk__in=ids)
    assert {(e.status, e.attempts, e.member_id) for e in events} == {("processed", 1, bob.pk)}
    assert len(fake_api.calls("/callback")) == 7  # bob has no agent: told so, once per message
    assert drain.inbound_drain() == 0  # nothing left to claim


def test_event_drained_is_skipped_by_the_single_event_task(
    hook, fake_api, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False):
        [event_id] = store(hook, 1, sender="u-stranger")
    drain.inbound_drain()
    assert drain.process_inbound_event(event_id) == "skipped"
    assert InboundEvent.objects.get(pk=event_id).attempts == 1
    assert len(fake_api.calls("/callback")) == 1


def test_a_batch_resolves_one_sender_once(hook, bob, django_capture_on_commit_callbacks):
    IMIdentityFactory(member=bob, platform="webhook", platform_user_id="u-bob")
    with django_capture_on_commit_callbacks(execute=False):
        store(hook, 6)
    with CaptureQueriesContext(connection) as queries:
        drain.inbound_drain()
    identity_lookups = [q for q in queries if 'FROM "tenancy_imidentity"' in q["sql"]]
    agent_lookups = [q for q in queries if 'FROM "agents_agent"' in q["sql"]]
    assert len(identity_lookups) == 1
    assert len(agent_lookups) == 1


def test_retryable_failure_waits_for_its_backoff_then_is_answered_once(
    hook, fake_api, django_capture_on_commit_callbacks
):
    fake_api.fail_next("/callback", 503)
    with django_capture_on_commit_callbacks(execute=False):
        [event_id] = store(hook, 1, sender="u-stranger")
        drain.inbound_drain()
    event = InboundEvent.objects.get(pk=event_id)
    assert event.status == "processing" and "503" in event.error
    assert drain.inbound_drain() == 0  # still inside its backoff
    # The backoff is over (the claim's date is when it turns stale).
    InboundEvent.objects.filter(pk=event_id).update(
        claimed_at=timezone.now() - drain.CLAIM_STALE_AFTER - timedelta(seconds=1)
    )
    assert drain.inbound_drain() == 1
    event.refresh_from_db()
    assert (event.status, event.attempts) == ("unmapped", 2)
    assert Delivery.objects.get(inbound_event_id=event_id).status == "sent"
    assert len(fake_api.calls("/callback")) == 2  # the failed attempt and the one that worked


def test_event_failing_every_attempt_ends_failed(
    hook, fake_api, django_capture_on_commit_callbacks
):
    fake_api.fail_next("/callback", 503, times=drain.MAX_ATTEMPTS)
    with django_capture_on_commit_callbacks(execute=False):
        [event_id] = store(hook, 1, sender="u-stranger")
        for _ in range(drain.MAX_ATTEMPTS):
            InboundEvent.objects.filter(pk=event_id).update(
                claimed_at=timezone.now() - drain.CLAIM_STALE_AFTER - timedelta(seconds=1)
            )
            drain.inbound_drain()
    event = InboundEvent.objects.get(pk=event_id)
    assert (event.status, event.attempts) == ("failed", drain.MAX_ATTEMPTS)
    assert drain.inbound_drain() == 0


def test_drain_requests_are_coalesced_while_one_drain_waits(hook):
    published: list[str] = []

    def count(sender=None, **kwargs):
        if sender == "connectors.tasks.inbound_events_drain":
            published.append(sender)

    before_task_publish.connect(count, weak=False)
    try:
        drain._drain_flag_clear()
        drain.drain_request()
        drain.drain_request()  # the first drain has not started: it will see this too
        assert len(published) == 1
        drain._drain_flag_clear()  # what a drain does when it starts
        drain.drain_request()
        assert len(published) == 2
    finally:
        before_task_publish.disconnect(count)
        drain._drain_flag_clear()


@pytest.mark.django_db(transaction=True)
def test_concurrent_drains_never_share_an_event(alice, bob, fake_api):
    fake_api.route("POST", "/callback", lambda request: (200, {"ok": True}))
    hook = make_connector(
        alice, "webhook", {"signing_secret": "s"}, {"callback_url": f"{fake_api.url}/callback"}
    )
    IMIdentityFactory(member=bob, platform="webhook", platform_user_id="u-bob")
    drain._drain_flag_clear()
    ids = store(hook, 40)
    barrier = threading.Barrier(4)
    counts: list[int] = []

    def drain_in_thread():
        barrier.wait()
        try:
            counts.append(drain.inbound_drain(batch_size=4))
        finally:
            connection.close()

    threads = [threading.Thread(target=drain_in_thread) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(counts) == 40
    events = InboundEvent.objects.filter(pk__in=ids)
    assert {(e.status, e.attempts) for e in events} == {("processed", 1)}
    assert Delivery.objects.filter(inbound_event_id__in=ids).count() == 40
    assert len(fake_api.calls("/callback")) == 40
    drain._drain_flag_clear()


# --- claims held by renewal: a dead holder's are taken again, a live one's never ------------


def wait_until_quick(condition, seconds: float, what: str):
    return wait_until(condition, seconds, what, interval=0.05)


@pytest.fixture
def quick_claims(monkeypatch):
    """Claims renewed every 0.1 s and stale after 1 s (40 s and 10 s in production)."""
    monkeypatch.setattr(drain, "CLAIM_STALE_AFTER", timedelta(seconds=1))
    monkeypatch.setattr(drain, "CLAIM_RENEW_SECONDS", 0.1)
    drain._drain_flag_clear()
    yield
    # The renewing thread stops, closing its connection, once nothing is held.
    wait_until_quick(drain.claim_keeper.idle, 10, "the claim keeper stops")
    drain._drain_flag_clear()


@pytest.fixture
def slow_callback(fake_api):
    """The platform answers a reply only when the test says so: a drain busy on one event."""
    answer = threading.Event()

    def callback(request):
        answer.wait(30)
        return 200, {"ok": True}

    fake_api.route("POST", "/callback", callback)
    yield answer
    answer.set()


def renewed(event_id: int, first) -> bool:
    """The claim has been renewed for three stale intervals since `first`, by renewals alone:
    within the platform client's 10 s timeout, whose retry would date the claim too."""
    event = InboundEvent.objects.get(pk=event_id)
    assert (event.status, event.error) == ("processing", "")
    return event.claimed_at - first > 3 * drain.CLAIM_STALE_AFTER


def drain_in_background() -> threading.Thread:
    def run():
        try:
            drain.inbound_drain()
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


@pytest.mark.django_db(transaction=True)
def test_a_claim_no_longer_renewed_is_taken_again_after_the_stale_interval(
    hook, fake_api, quick_claims
):
    [event_id] = store(hook, 1, sender="u-stranger")
    claimed_at = timezone.now()
    assert drain._claim_batch(8, claimed_at) == [event_id]  # and its holder dies: no renewals
    assert drain.inbound_drain() == 0  # a fresh claim is its holder's
    wait_until_quick(lambda: drain.inbound_drain() == 1, 10, "the stale claim is taken again")
    assert timezone.now() - claimed_at >= drain.CLAIM_STALE_AFTER
    event = InboundEvent.objects.get(pk=event_id)
    assert (event.status, event.attempts) == ("unmapped", 2)
    assert len(fake_api.calls("/callback")) == 1


@pytest.mark.django_db(transaction=True)
def test_a_live_drains_claim_is_renewed_and_never_taken(
    hook, fake_api, quick_claims, slow_callback
):
    [event_id] = store(hook, 1, sender="u-stranger")
    busy = drain_in_background()
    try:
        wait_until_quick(
            lambda: fake_api.calls("/callback"), 10, "the drain is answering the event"
        )
        first = InboundEvent.objects.get(pk=event_id).claimed_at
        taken: list[int] = []

        def renewed_past_three_stale_intervals() -> bool:
            taken.append(drain.inbound_drain())  # another drain tries meanwhile
            return renewed(event_id, first)

        wait_until_quick(renewed_past_three_stale_intervals, 8, "three stale intervals of renewals")
        assert set(taken) == {0}
    finally:
        slow_callback.set()
        busy.join(30)
    event = InboundEvent.objects.get(pk=event_id)
    assert (event.status, event.attempts) == ("unmapped", 1)
    assert len(fake_api.calls("/callback")) == 1
    assert Delivery.objects.filter(inbound_event_id=event_id).count() == 1


@pytest.mark.django_db(transaction=True)
def test_renewals_leave_a_retry_waiting_for_its_backoff(
    hook, fake_api, quick_claims, slow_callback
):
    # One batch: the first event meets a 503 (Retry-After 120 s), the second a slow platform.
    fake_api.fail_next("/callback", 503, headers={"Retry-After": "120"})
    retried, slow = store(hook, 2, sender="u-stranger")
    busy = drain_in_background()
    try:
        wait_until_quick(
            lambda: len(fake_api.calls("/callback")) == 2, 10, "the second is answered"
        )
        dated = InboundEvent.objects.get(pk=retried).claimed_at
        first = InboundEvent.objects.get(pk=slow).claimed_at
        wait_until_quick(lambda: renewed(slow, first), 8, "the slow one's claim is renewed")
        assert InboundEvent.objects.get(pk=retried).claimed_at == dated  # never renewed
        # Dated to turn stale when its 120 s are over, not at the next renewal.
        assert dated - timezone.now() > timedelta(seconds=100)
        assert drain.inbound_drain() == 0
    finally:
        slow_callback.set()
        busy.join(30)
    event = InboundEvent.objects.get(pk=retried)
    assert (event.status, event.attempts) == ("processing", 1) and "503" in event.error


@pytest.mark.django_db(transaction=True)
def test_a_stuck_holder_stops_renewing_and_another_drain_answers_its_event(
    hook, fake_api, quick_claims, monkeypatch, caplog
):
    # The first answer hangs (a stuck holder, alive and renewing); any later one is answered.
    monkeypatch.setattr(drain, "CLAIM_MAX_HOLD", timedelta(seconds=2))
    release, calls = threading.Event(), []

    def callback(request):
        calls.append(request)
        if len(calls) == 1:
            release.wait(30)
        return 200, {"ok": True}

    fake_api.route("POST", "/callback", callback)
    [event_id] = store(hook, 1, sender="u-stranger")
    stuck = drain_in_background()
    try:
        wait_until_quick(lambda: calls, 10, "the drain is answering the event")
        since = InboundEvent.objects.get(pk=event_id).claimed_at
        wait_until_quick(lambda: drain.inbound_drain() == 1, 20, "another drain takes it")
        event = InboundEvent.objects.get(pk=event_id)
        assert (event.status, event.attempts) == ("unmapped", 2)
        assert event.processed_at - since > drain.CLAIM_STALE_AFTER  # not before it was stale
        assert len(calls) == 2 and not release.is_set()  # while the first holder still hangs
        assert "their holder looks stuck" in caplog.text
    finally:
        release.set()
        stuck.join(30)
    event = InboundEvent.objects.get(pk=event_id)
    assert event.status == "unmapped"
    assert Delivery.objects.filter(inbound_event_id=event_id).count() == 1


def test_a_holder_that_lost_its_claim_does_not_start_a_second_run(hook, alice, bob):
    IMIdentityFactory(member=bob, platform="webhook", platform_user_id="u-bob")
    sales_agent(alice, bob)
    [event_id] = store(hook, 1)
    assert drain._claim_batch(8, timezone.now()) == [event_id]
    stuck = InboundEvent.objects.select_related("connector").get(pk=event_id)
    # The holder hangs past its claim; another drain takes the event and starts its run.
    InboundEvent.objects.filter(pk=event_id).update(
        claimed_at=timezone.now() - drain.CLAIM_STALE_AFTER - timedelta(seconds=1)
    )
    assert drain.inbound_drain() == 1
    event = InboundEvent.objects.get(pk=event_id)
    assert event.status == "processed" and event.run_ref
    # The first holder wakes up with the event as it read it.
    assert dispatch.process_claimed(stuck, Batch()) == "processed"
    assert Run.objects.count() == 1
    assert InboundEvent.objects.get(pk=event_id).run_ref == event.run_ref


class _AnswerLost:
    """The database connection as the claim keeper sees it: each renewal is written (in
    autocommit) but its answer is lost, as when the connection breaks right after."""

    def __init__(self, real):
        self.real = real

    @contextmanager
    def cursor(self):
        with self.real.cursor() as cursor:
            yield self._Cursor(cursor)

    class _Cursor:
        def __init__(self, cursor):
            self.execute = cursor.execute

        def fetchall(self):
            raise OperationalError("server closed the connection unexpectedly")

    def close(self):
        self.real.close()


@pytest.mark.django_db(transaction=True)
def test_a_renewal_whose_answer_was_lost_still_lets_its_holder_renew(hook, monkeypatch):
    [event_id] = store(hook, 1, sender="u-stranger")
    claimed_at = timezone.now()
    assert drain._claim_batch(8, claimed_at) == [event_id]
    held = drain._Held([event_id], [claimed_at], claimed_at)
    monkeypatch.setattr(drain, "connection", _AnswerLost(connection))
    drain.claim_keeper._renew([held])  # written, then the connection broke
    written = InboundEvent.objects.get(pk=event_id).claimed_at
    assert written > claimed_at
    monkeypatch.setattr(drain, "connection", connection)
    drain.claim_keeper._renew([held])  # the next renewal recognises its own date
    assert held.ids == [event_id]
    assert InboundEvent.objects.get(pk=event_id).claimed_at > written
