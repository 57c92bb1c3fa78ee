"""Audit export at scale: 1M hash-chained audit events exported to a signed JSONL bundle.

    .venv/bin/python bench/audit_export.py                 # 1,000,000 events
    .venv/bin/python bench/audit_export.py --rows 100000 --formats jsonl,csv,ocsf

Target (issue #5): 1M events to signed JSONL in <= 90 s with peak RSS <= 300 MB.

Runs in its own database (default `cadre_bench_audit` on the embedded server, dropped unless
--keepdb). The events are generated with a valid chain (the same `event_hash` as
`audit.record`) and loaded with COPY; the export then runs in a fresh child process (so its
peak RSS is the export's alone) through the product path `export.audit_export_run` — keyset
paging, masking of free text (on by default; `--no-mask` to compare), block hashes, manifest,
Ed25519 signature — and the bundle is verified offline afterwards.

The data is shaped like an audit log: 300 actors, 20 actions, 50,000 targets, a reason on one
event in ten (from 500 distinct texts, some with phone numbers and e-mails) and a small
`changes` object (statuses and counters).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "platform")]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cadre.settings")
os.environ.setdefault("LOG_LEVEL", "WARNING")

ACTIONS = [
    "member.update",
    "member.create",
    "run.start",
    "run.resume",
    "tool.call",
    "tool.denied",
    "memory.write",
    "memory.update",
    "memory.delete",
    "policy.decision",
    "skill.publish",
    "confirmation.approve",
    "confirmation.reject",
    "apikey.create",
    "template.publish",
    "deployment.create",
    "connector.update",
    "audit.export_requested",
    "session.create",
    "agent.stop",
]


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def generate(organization_id: int, rows: int, seed: int = 20261130):
    """(row tuple for COPY, hash) for `rows` chained events."""
    from cadre.governance.audit import GENESIS_HASH, event_hash

    rng = random.Random(seed)
    actors = [(f"{i}", f"Employee {i} ({'Sales' if i % 3 else 'IT'})") for i in range(300)]
    reasons = [
        f"Customer asked by phone 1381234{i:04d} to update the order"
        if i % 5 == 0
        else f"Quarterly review {i}: contact ops{i}@example.com"
        if i % 7 == 0
        else f"Routine change #{i}"
        for i in range(500)
    ]
    statuses = ["active", "stopped", "pending", "approved", "rejected"]
    start = datetime(2026, 1, 1, tzinfo=UTC)
    previous = GENESIS_HASH
    for sequence in range(1, rows + 1):
        actor_id, actor_label = actors[rng.randrange(300)]
        target = rng.randrange(50_000)
        fields = {
            "sequence": sequence,
            "actor_type": "member",
            "actor_id": actor_id,
            "actor_label": actor_label,
            "action": ACTIONS[sequence % len(ACTIONS)],
            "target_type": "member",
            "target_id": str(target),
            "target_label": f"Target {target}",
            "changes": {
                "before": {"status": statuses[rng.randrange(5)]},
                "after": {"status": statuses[rng.randrange(5)], "count": sequence % 97},
            },
            "reason": reasons[rng.randrange(500)] if rng.random() < 0.1 else "",
            "request_id": f"{sequence:032x}",
            "trace_id": f"{sequence * 7919:032x}",
            "ip": "10.0.0.1",
            "user_agent": "cadre-bench/1.0",
            "prev_hash": previous,
        }
        created_at = start + timedelta(milliseconds=sequence * 25)
        digest = event_hash(organization_id, created_at, fields)
        yield (
            (
                organization_id,
                sequence,
                created_at,
                fields["actor_type"],
                fields["actor_id"],
                fields["actor_label"],
                fields["action"],
                fields["target_type"],
                fields["target_id"],
                fields["target_label"],
                json.dumps(fields["changes"]),
                fields["reason"],
                fields["request_id"],
                fields["trace_id"],
                fields["ip"],
                fields["user_agent"],
                previous,
                digest,
            ),
            digest,
        )
        previous = digest


def load(rows: int) -> int:
    """Create the organization and COPY `rows` events with a valid chain; return the org id."""
    from django.db import connection

    from cadre.governance.models import AuditChainHead
    from cadre.tenancy.models import Organization

    organization = Organization.objects.create(name="Bench", slug=f"bench-{int(time.time())}")
    columns = (
        "organization_id, sequence, created_at, actor_type, actor_id, actor_label, action, "
        "target_type, target_id, target_label, changes, reason, request_id, trace_id, ip, "
        "user_agent, prev_hash, hash"
    )
    started = time.perf_counter()
    last = None
    with connection.cursor() as cursor:
        raw = cursor.cursor  # psycopg 3
        with raw.copy(f"COPY governance_auditevent ({columns}) FROM STDIN") as copy:
            for values, digest in generate(organization.pk, rows):
                copy.write_row(values)
                last = digest
    AuditChainHead.objects.update_or_create(
        organization=organization, defaults={"sequence": rows, "hash": last}
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE governance_auditevent")
    print(f"load rows={rows} seconds={time.perf_counter() - started:.1f}", flush=True)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_size_pretty(pg_total_relation_size('governance_auditevent'))")
        print(f"table size={cursor.fetchone()[0]}", flush=True)
    return organization.pk


def export_phase(organization_id: int, formats: list[str], mask: bool) -> None:
    """In a fresh process: the product's export job, timed; then the offline verification."""
    import django

    django.setup()
    from cadre.governance import export
    from cadre.governance.models import AuditExport
    from cadre.tenancy.models import Organization

    organization = Organization.objects.get(pk=organization_id)
    job = AuditExport.objects.create(
        organization=organization, formats=formats, mask=mask, until=None
    )
    started, cpu_started = time.perf_counter(), cpu_seconds()
    job = export.audit_export_run(export_id=job.pk)
    seconds, cpu = time.perf_counter() - started, cpu_seconds() - cpu_started
    files = {f["name"]: f["bytes"] for f in job.manifest["files"]}
    print(
        f"export rows={job.rows_written} formats={','.join(formats)} masked={mask} "
        f"seconds={seconds:.1f} cpu_seconds={cpu:.1f} peak_rss_mb={peak_rss_mb():.0f} "
        f"bytes={sum(files.values())} status={job.status}",
        flush=True,
    )
    bundle = export.stored_bundle(job)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="cadre-bench-") as folder:
        # As an auditor verifies it: the downloaded tar (streamed from the "exports" storage).
        tar = export.tar_bundle(bundle, Path(folder) / export.tar_name(job.pk))
        report = export.verify_bundle(tar)
    print(
        f"verify ok={report.ok} seconds={time.perf_counter() - started:.1f} "
        f"problems={len(report.problems)}",
        flush=True,
    )
    export.remove_bundle(bundle)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--formats", default="jsonl")
    parser.add_argument("--no-mask", action="store_true")
    parser.add_argument("--database", default="cadre_bench_audit")
    parser.add_argument("--keepdb", action="store_true")
    parser.add_argument("--phase", default="all", choices=["all", "export"])
    parser.add_argument("--organization", type=int)
    args = parser.parse_args()
    formats = [fmt.strip() for fmt in args.formats.split(",") if fmt.strip()]

    if args.phase == "export":
        _use_database(args.database)
        export_phase(args.organization, formats, not args.no_mask)
        return

    import django

    django.setup()
    from django.db import connection
    from django.test.utils import setup_databases, teardown_databases

    connection.settings_dict["TEST"]["NAME"] = args.database
    old_config = setup_databases(verbosity=0, interactive=False, keepdb=args.keepdb)
    try:
        organization_id = load(args.rows)
        command = [
            sys.executable,
            __file__,
            "--phase",
            "export",
            "--database",
            connection.settings_dict["NAME"],
            "--organization",
            str(organization_id),
            "--formats",
            ",".join(formats),
        ] + (["--no-mask"] if args.no_mask else [])
        subprocess.run(command, check=True)  # noqa: S603 - our own script, our arguments
    finally:
        if not args.keepdb:
            teardown_databases(old_config, verbosity=0)


def _use_database(name: str) -> None:
    """Point the default connection at the bench database before Django connects."""
    from django.conf import settings

    settings.DATABASES["default"]["NAME"] = name


if __name__ == "__main__":
    main()
