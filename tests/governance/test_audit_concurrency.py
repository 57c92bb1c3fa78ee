"""Audit appends under concurrency: writers never wait on the chain, sealers never fork it."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import pytest
from django.db import connection, connections, transaction

from cadre.governance import audit
from cadre.governance.models import AuditChainHead, AuditEvent
from cadre.tenancy.actors import system_actor
from tests.factories import OrganizationFactory


def _in_thread(target, *args) -> tuple[threading.Thread, list[BaseException]]:
    """Run `target` in a thread with its own database connection; errors are collected."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            target(*args)
        except BaseException as error:  # surfaced by the caller
            errors.append(error)
        finally:
            connections.close_all()  # this thread's connection

    thread = threading.Thread(target=run)
    thread.start()
    return thread, errors


@pytest.mark.django_db(transaction=True)
def test_eight_writers_and_concurrent_sealers_make_one_gapless_chain():
    organization = OrganizationFactory(slug="busy")
    writers, per_writer = 8, 15
    total = writers * per_writer
    barrier = threading.Barrier(writers + 2)
    writing_done = threading.Event()

    def write(index: int) -> None:
        barrier.wait(timeout=60)
        actor = system_actor(organization, label=f"writer {index}")
        for number in range(per_writer):
            with transaction.atomic():  # one transaction per event, as a service does
                audit.record(
                    actor=actor, action="test.concurrent", target=("thing", f"{index}-{number}")
                )

    def seal_meanwhile() -> None:
        barrier.wait(timeout=60)
        while not writing_done.wait(timeout=0.01):
            audit.seal(organization=organization, batch_size=7)

    sealers = [_in_thread(seal_meanwhile) for _ in range(2)]
    threads = [_in_thread(write, index) for index in range(writers)]
    for thread, _ in threads:
        thread.join(timeout=300)
    writing_done.set()
    for thread, _ in sealers:
        thread.join(timeout=300)
    errors = [error for _, found in threads + sealers for error in found]
    assert not errors, errors

    audit.seal(organization=organization)  # whatever committed after the sealers' last pass
    rows = list(
        AuditEvent.objects.filter(organization=organization)
        .order_by("sequence")
        .values_list("sequence", "target_id")
    )
    sequences = [sequence for sequence, _ in rows]
    assert sequences == list(range(1, total + 1))  # no gap, no duplicate, nothing unsealed
    targets = {target for _, target in rows}
    assert targets == {f"{i}-{n}" for i in range(writers) for n in range(per_writer)}
    assert (
        audit.verify_chain(organization).items()
        >= {
            "ok": True,
            "checked": total,
            "unsealed": 0,
            "broken": None,
        }.items()
    )
    head = AuditChainHead.objects.get(organization=organization)
    assert head.sequence == total


@pytest.mark.django_db(transaction=True)
def test_an_event_committed_after_later_ones_were_sealed_joins_the_chain_after_them():
    organization = OrganizationFactory(slug="late")
    actor = system_actor(organization)
    inserted, commit_now = threading.Event(), threading.Event()
    late: dict[str, int] = {}

    def slow_transaction() -> None:
        with transaction.atomic():
            late["id"] = audit.record(actor=actor, action="test.late").pk
            inserted.set()
            assert commit_now.wait(timeout=60)

    thread, errors = _in_thread(slow_transaction)
    assert inserted.wait(timeout=60)
    early = audit.record(actor=actor, action="test.early")
    assert early.pk > late["id"]  # the open transaction holds the lower id
    assert audit.seal(organization=organization) == 1  # the open one is not visible yet
    sealed_chain = AuditEvent.objects.get(pk=early.pk)
    assert sealed_chain.sequence == 1

    commit_now.set()
    thread.join(timeout=60)
    assert not errors, errors
    assert audit.seal(organization=organization) == 1
    late_event = AuditEvent.objects.get(pk=late["id"])
    assert late_event.sequence == 2
    assert late_event.prev_hash == sealed_chain.hash
    assert AuditEvent.objects.get(pk=early.pk).hash == sealed_chain.hash  # not rewritten
    assert audit.verify_chain(organization)["ok"]


@pytest.mark.django_db(transaction=True)
def test_writers_do_not_wait_while_a_sealer_holds_the_chain_lock():
    organization = OrganizationFactory(slug="locked")
    actor = system_actor(organization)
    audit.record(actor=actor, action="test.first")
    locked, release = threading.Event(), threading.Event()

    def hold_chain_lock() -> None:
        with transaction.atomic():
            audit._lock_head(organization.pk)
            locked.set()
            assert release.wait(timeout=60)

    thread, errors = _in_thread(hold_chain_lock)
    try:
        assert locked.wait(timeout=60)
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL lock_timeout = '3s'")  # a wait would fail here
            event = audit.record(actor=actor, action="test.while_locked")
        assert AuditEvent.objects.filter(pk=event.pk).exists()
    finally:
        release.set()
        thread.join(timeout=60)
    assert not errors, errors
    assert audit.seal(organization=organization) == 2
    assert audit.verify_chain(organization)["checked"] == 2


@pytest.mark.django_db(transaction=True)
def test_a_commit_seals_its_event_through_the_task():
    from cadre.celery import app

    previous = (app.conf.task_always_eager, app.conf.task_eager_propagates)
    app.conf.task_always_eager = app.conf.task_eager_propagates = True
    try:
        organization = OrganizationFactory(slug="eager")
        with transaction.atomic():
            event = audit.record(actor=system_actor(organization), action="test.committed")
            assert AuditEvent.objects.get(pk=event.pk).sequence is None  # not before the commit
        assert AuditEvent.objects.get(pk=event.pk).sequence == 1
    finally:
        app.conf.task_always_eager, app.conf.task_eager_propagates = previous


class _Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def time(self) -> float:
        return self.now


def test_one_seal_task_per_window_is_enqueued_after_commits(monkeypatch, org_a):
    """Many commits in one window enqueue one task, due after the window: it sees them all."""
    from django.core.cache import cache

    from cadre.governance.audit_tasks import audit_seal

    enqueued: list[datetime] = []
    monkeypatch.setattr(audit_seal, "apply_async", lambda args, eta: enqueued.append(eta))
    start = int(datetime.now(UTC).timestamp() // audit.SEAL_WINDOW) * audit.SEAL_WINDOW
    clock = _Clock(start + 0.05)
    monkeypatch.setattr(audit, "time", clock)
    monkeypatch.setattr(audit, "_due_window", {})
    for window in range(3):
        cache.delete(f"audit:seal:{org_a.pk}:{int(start // audit.SEAL_WINDOW) + window}")

    for _ in range(5):
        audit._seal_soon(org_a.pk)
        clock.now += 0.05
    assert len(enqueued) == 1
    assert enqueued[0].timestamp() >= start + audit.SEAL_WINDOW  # after every commit above

    monkeypatch.setattr(audit, "_due_window", {})  # another process, same window
    audit._seal_soon(org_a.pk)
    assert len(enqueued) == 1

    clock.now = start + audit.SEAL_WINDOW + 0.01  # the next window gets its own task
    audit._seal_soon(org_a.pk)
    assert len(enqueued) == 2
    assert enqueued[1].timestamp() >= start + 2 * audit.SEAL_WINDOW


def test_beat_seals_every_organization_with_unsealed_events(settings, org_a, org_b):
    from cadre.governance.audit_tasks import audit_seal

    entry = settings.CELERY_BEAT_SCHEDULE["governance-audit-seal"]
    assert entry["task"] == audit_seal.name
    for organization in (org_a, org_b):
        audit.record(actor=system_actor(organization), action="test.missed")
    assert audit_seal() == 2
    assert not AuditEvent.objects.unsealed().filter(organization__in=[org_a, org_b]).exists()
