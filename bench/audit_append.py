"""Audit append throughput: 8 concurrent writers calling `audit.record` on one organization.

    .venv/bin/python bench/audit_append.py                    # 8 writers x 1,500 events
    .venv/bin/python bench/audit_append.py --writers 8 --events 3000 --orgs 4

Target (issue #5): >= 1,000 events/s with the hash chain under 8 concurrent writers.

Each writer is a process with its own database connection; each event is one transaction
(`transaction.atomic()` around `audit.record`, as a service does), so every append takes the
organization's chain-head row lock — the contended case. `--orgs N` spreads the writers over N
organizations (chains are per organization, so they do not contend). The chain is verified
afterwards with `audit.verify_chain`. Runs in its own database (`cadre_bench_append`).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "platform")]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cadre.settings")
os.environ.setdefault("LOG_LEVEL", "WARNING")


def writer(
    database: str,
    organization_id: int,
    events: int,
    start,
    results,
    synchronous_commit: str,
    mode: str,
    index: int,
) -> None:
    import django
    from django.conf import settings

    settings.DATABASES["default"]["NAME"] = database
    django.setup()
    from django.db import connection, transaction

    from cadre.governance import audit
    from cadre.tenancy.actors import system_actor
    from cadre.tenancy.models import Organization

    organization = Organization.objects.get(pk=organization_id)
    actor = system_actor(organization, label="bench writer")
    connection.ensure_connection()
    if synchronous_commit:
        with connection.cursor() as cursor:  # evidence for the change proposed in the report
            cursor.execute(
                "SELECT set_config('synchronous_commit', %s, false)", [synchronous_commit]
            )
    start.wait()
    began = time.perf_counter()
    if mode == "record":
        for number in range(events):
            with transaction.atomic():
                audit.record(
                    actor=actor,
                    action="bench.append",
                    target=("member", number, f"Member {number}"),
                    changes={"after": {"status": "active", "n": number}},
                )
    else:
        _unchained(organization, events, index)
    results.put((began, time.perf_counter()))


def _unchained(organization, events: int, index: int) -> None:
    """The proposed design's write path: insert the event unsealed (no chain-head lock); a
    sequencer seals events in batches afterwards (see `seal`). Negative placeholder sequences
    stand in for "not sealed yet" so the existing unique constraint holds."""
    from django.db import transaction
    from django.utils import timezone

    from cadre.governance.models import AuditEvent

    for number in range(events):
        with transaction.atomic():
            AuditEvent(
                organization=organization,
                sequence=-(index * 10_000_000 + number + 1),
                created_at=timezone.now(),
                actor_type="system",
                actor_label="bench writer",
                action="bench.append",
                target_type="member",
                target_id=str(number),
                target_label=f"Member {number}",
                changes={"after": {"status": "active", "n": number}},
                prev_hash="",
                hash="",
            ).save(force_insert=True)


def seal(organization, batch: int = 5000) -> tuple[int, float]:
    """Assign sequence, prev_hash and hash to unsealed events in id order, in batches (one
    chain-head lock and one commit per batch). Returns (sealed, seconds)."""
    from django.db import connection, transaction

    from cadre.governance.audit import _HASHED_FIELDS, _lock_head, event_hash
    from cadre.governance.models import AuditChainHead, AuditEvent

    sealed, began = 0, time.perf_counter()
    while True:
        with transaction.atomic():
            with connection.cursor() as cursor:
                # Today's trigger refuses every UPDATE; the proposed design lets the sealing
                # update through (unsealed row, only sequence/prev_hash/hash set). The bench
                # stands in for that by skipping triggers in this transaction.
                cursor.execute("SET LOCAL session_replication_role = replica")
            head = _lock_head(organization.pk)
            rows = list(
                AuditEvent.objects.filter(organization=organization, sequence__lt=0).order_by("id")[
                    :batch
                ]
            )
            if not rows:
                break
            sequence, previous, values = head.sequence, head.hash, []
            for event in rows:
                sequence += 1
                event.sequence, event.prev_hash = sequence, previous
                fields = {name: getattr(event, name) for name in _HASHED_FIELDS}
                previous = event_hash(organization.pk, event.created_at, fields)
                values.append((event.pk, sequence, event.prev_hash, previous))
            with connection.cursor() as cursor:
                cursor.executemany(
                    "UPDATE governance_auditevent SET sequence = %s, prev_hash = %s, hash = %s "
                    "WHERE id = %s",
                    [(seq, prev, digest, pk) for pk, seq, prev, digest in values],
                )
            AuditChainHead.objects.filter(organization_id=organization.pk).update(
                sequence=sequence, hash=previous
            )
            sealed += len(rows)
    return sealed, time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--events", type=int, default=1500, help="events per writer")
    parser.add_argument("--orgs", type=int, default=1)
    parser.add_argument("--database", default="cadre_bench_append")
    parser.add_argument(
        "--mode",
        default="record",
        choices=["record", "unchained"],
        help="record: audit.record as today; unchained: the proposed insert + batch seal",
    )
    parser.add_argument(
        "--synchronous-commit",
        default="",
        choices=["", "on", "off", "local"],
        help="set on each writer's connection (default: the server's setting)",
    )
    args = parser.parse_args()

    import django

    django.setup()
    from django.db import connection, connections
    from django.test.utils import setup_databases, teardown_databases

    from cadre.governance import audit
    from cadre.tenancy.models import Organization

    connection.settings_dict["TEST"]["NAME"] = args.database
    old_config = setup_databases(verbosity=0, interactive=False, keepdb=False)
    try:
        database = connection.settings_dict["NAME"]
        organizations = [
            Organization.objects.create(name=f"Bench {i}", slug=f"bench-append-{i}")
            for i in range(args.orgs)
        ]
        connections.close_all()
        context = multiprocessing.get_context("spawn")
        start, results = context.Event(), context.Queue()
        processes = [
            context.Process(
                target=writer,
                args=(
                    database,
                    organizations[i % args.orgs].pk,
                    args.events,
                    start,
                    results,
                    args.synchronous_commit,
                    args.mode,
                    i,
                ),
            )
            for i in range(args.writers)
        ]
        for process in processes:
            process.start()
        time.sleep(8)  # let every writer import Django and connect
        start.set()
        spans = [results.get(timeout=1800) for _ in processes]
        for process in processes:
            process.join()
        total = args.writers * args.events
        seconds = max(end for _, end in spans) - min(begin for begin, _ in spans)
        seal_note = ""
        print(
            f"writes events={total} seconds={seconds:.2f} events_per_s={total / seconds:.0f}",
            flush=True,
        )
        if args.mode == "unchained":
            sealed = [seal(org) for org in organizations]
            seal_seconds = sum(s for _, s in sealed)
            seal_note = (
                f"sealed={sum(n for n, _ in sealed)} seal_seconds={seal_seconds:.2f} "
                f"seal_per_s={sum(n for n, _ in sealed) / max(seal_seconds, 1e-9):.0f} "
            )
        verified = [audit.verify_chain(org) for org in organizations]
        print(
            f"append mode={args.mode} writers={args.writers} orgs={args.orgs} events={total} "
            f"synchronous_commit={args.synchronous_commit or 'server'} "
            f"seconds={seconds:.2f} events_per_s={total / seconds:.0f} "
            f"{seal_note}chain_ok={all(v['ok'] for v in verified)} "
            f"checked={sum(v['checked'] for v in verified)}",
            flush=True,
        )
    finally:
        connections.close_all()
        teardown_databases(old_config, verbosity=0)


if __name__ == "__main__":
    main()
