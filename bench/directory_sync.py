"""IM directory sync: a 5,000-user / 300-department directory, read from each platform's
loopback contact API and written by the batched sync, beside a naive per-row baseline.

For each platform (Feishu/Lark, WeCom, DingTalk) a fresh organization is synced from the
loopback fake (connectors/tests/fake_directory.py: the platforms' documented shapes, their page
sizes, token endpoints) through `directory_sync_execute`, exactly as the Celery task runs it:
read time, write time and total. The baseline writes the same Feishu snapshot into another
fresh organization row by row through the services an admin's clicks use (`department_create`,
`member_create`, `im_identity_create`, `member_update` for the manager). Every row is checked
afterwards (members, identities, departments, managers).

Own database (`cadre_bench_directory`, created afresh and dropped at the end), Redis db 5.

    .venv/bin/python bench/directory_sync.py [--users 5000] [--departments 300]

Last line exactly: `directory_sync users=N departments=M batched_s=… naive_s=…` (Feishu).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "platform")]
DATABASE = "cadre_bench_directory"


def prepare_environment(redis_db: int = 5) -> None:
    from bench.environment import prepare

    admin_url = prepare(
        DATABASE,
        redis_db=redis_db,
        cache_prefix="cadre-bench-directory",
        embedded_redis=False,
        extra={"LOG_FORMAT": "text"},
    )
    os.environ["ADMIN_DATABASE_URL"] = admin_url


def drop_database() -> None:
    import psycopg
    from django.db import connections

    connections.close_all()
    admin_url = os.environ["ADMIN_DATABASE_URL"].replace("postgresql://", "postgres://", 1)
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)')


def owner_of(slug: str):
    from cadre.tenancy.models import Member, Organization

    org = Organization.objects.create(name=slug, slug=slug)
    return Member.objects.create(
        organization=org, display_name="Owner", email=f"owner@{slug}.test", roles=["owner"]
    )


def batched(platform: str, org_data, server) -> dict:
    from cadre.tenancy.actors import member_actor
    from cadre.tenancy.models import Department, IMIdentity, Member
    from connectors.base import services
    from connectors.directory.contacts import directory_client
    from connectors.directory.sync import directory_sync_execute, directory_sync_start
    from connectors.tests.fake_directory import CREDENTIALS, FakeDirectory

    fake = FakeDirectory(server, platform, org_data)
    owner = owner_of(f"bench-{platform}")
    actor = member_actor(owner)
    connector = services.connector_create(
        actor=actor,
        platform=platform,
        name=f"{platform} directory",
        credentials=CREDENTIALS[platform],
        settings=fake.connector_settings(),
    )
    sync = directory_sync_start(actor=actor, connector=connector)
    client = directory_client(connector)
    started = time.perf_counter()
    read_seconds = []
    original = client.read_directory

    def timed_read(progress=None):
        begin = time.perf_counter()
        snapshot = original(progress)
        read_seconds.append(time.perf_counter() - begin)
        return snapshot

    client.read_directory = timed_read
    sync = directory_sync_execute(sync, client=client)
    total = time.perf_counter() - started
    assert sync.status == "succeeded", sync.error
    org = owner.organization
    members = Member.objects.filter(organization=org).exclude(pk=owner.pk)
    assert members.count() == len(org_data.users)
    assert IMIdentity.objects.filter(organization=org).count() == len(org_data.users)
    assert Department.objects.filter(organization=org).count() == len(org_data.departments)
    with_manager = sum(1 for u in org_data.users if u.leader)
    assert members.exclude(manager=None).count() == with_manager
    return {
        "read": read_seconds[0],
        "write": total - read_seconds[0],
        "total": total,
        "requests": len(server.requests),
    }


def naive(platform: str, org_data, server) -> dict:
    """The same snapshot written row by row through the services (one transaction per row)."""
    from cadre.tenancy.actors import member_actor
    from cadre.tenancy.models import Member
    from cadre.tenancy.services import (
        department_create,
        im_identity_create,
        member_create,
        member_update,
    )
    from connectors.base import services
    from connectors.directory.contacts import directory_client
    from connectors.tests.fake_directory import CREDENTIALS, FakeDirectory

    fake = FakeDirectory(server, platform, org_data)
    owner = owner_of(f"naive-{platform}")
    actor = member_actor(owner)
    connector = services.connector_create(
        actor=actor,
        platform=platform,
        name=f"{platform} naive",
        credentials=CREDENTIALS[platform],
        settings=fake.connector_settings(),
    )
    started = time.perf_counter()
    snapshot = directory_client(connector).read_directory()
    read = time.perf_counter() - started
    department_of = {}
    by_id = {d.id: d for d in snapshot.departments}
    pending = list(snapshot.departments)
    while pending:  # parents first
        rest = []
        for record in pending:
            if record.parent_id and record.parent_id not in department_of:
                rest.append(record) if record.parent_id in by_id else None
                continue
            department_of[record.id] = department_create(
                actor=actor, name=record.name, parent=department_of.get(record.parent_id)
            )
        pending = rest
    member_of = {}
    for user in snapshot.users:
        department = next(
            (department_of[d] for d in user.department_ids if d in department_of), None
        )
        member = member_create(
            actor=actor, display_name=user.name, email=user.email, mobile=user.mobile,
            employee_no=user.employee_no, title=user.title, department=department,
        )  # fmt: skip
        im_identity_create(
            actor=actor, member=member, platform=platform, platform_user_id=user.id,
            display_name=user.name,
        )  # fmt: skip
        member_of[user.id] = member
    for user in snapshot.users:
        leader = member_of.get(user.leader_user_id)
        if leader is not None and leader.pk != member_of[user.id].pk:
            member_update(actor=actor, member=member_of[user.id], manager=leader)
    total = time.perf_counter() - started
    assert Member.objects.filter(organization=owner.organization).count() == len(snapshot.users) + 1
    return {"read": read, "write": total - read, "total": total, "requests": 0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--users", type=int, default=5000)
    parser.add_argument("--departments", type=int, default=300)
    parser.add_argument("--platforms", default="feishu,wecom,dingtalk")
    parser.add_argument("--no-baseline", action="store_true")
    args = parser.parse_args()
    prepare_environment()
    import django

    django.setup()
    from django.core.management import call_command

    started = time.perf_counter()
    call_command("migrate", verbosity=0)
    print(f"migrated the bench database in {time.perf_counter() - started:.1f}s", flush=True)
    from connectors.tests.fake_directory import generate
    from connectors.tests.fakes import FakePlatformServer

    rows = []
    for platform in args.platforms.split(","):
        server = FakePlatformServer().start()
        try:
            figures = batched(platform, generate(args.users, args.departments), server)
        finally:
            server.stop()
        rows.append((f"batched sync ({platform})", figures))
        print(f"{rows[-1][0]}: {figures['total']:.1f}s", flush=True)
    if not args.no_baseline:
        server = FakePlatformServer().start()
        try:
            figures = naive("feishu", generate(args.users, args.departments), server)
        finally:
            server.stop()
        rows.append(("naive per-row services (feishu)", figures))
    print()
    print(f"directory: {args.users} users, {args.departments} departments")
    print(f"{'path':36} {'read s':>8} {'write s':>8} {'total s':>8} {'API calls':>10}")
    for name, figures in rows:
        print(
            f"{name:36} {figures['read']:8.2f} {figures['write']:8.2f} {figures['total']:8.2f} "
            f"{figures['requests'] or '':>10}"
        )
    batched_feishu = next((f for n, f in rows if n == "batched sync (feishu)"), None)
    naive_feishu = next((f for n, f in rows if n.startswith("naive")), None)
    drop_database()
    print(
        f"directory_sync users={args.users} departments={args.departments} "
        f"batched_s={batched_feishu['total']:.2f} "
        f"naive_s={naive_feishu['total']:.2f}"
        if batched_feishu and naive_feishu
        else ""
    )


if __name__ == "__main__":
    main()
