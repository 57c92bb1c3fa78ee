"""Hub benchmark: search p95 over 10,000 skills, publish and install throughput.

Runs against its own database (`cadre_hub_bench` on the configured or embedded PostgreSQL),
dropped and re-created each run. Search is measured through `hub.selectors.search` as an
organization member who sees every skill; publish through `hub.services.package_publish`
(validate, scan, store, sign, audit); install through the Hub API download endpoint with an
API key (resolve, zip, Digest headers, counters) via Django's test client.

    .venv/bin/python bench/hub.py                       # 10,000 skills, 300 searches
    .venv/bin/python bench/hub.py --skills 2000 --searches 100 --publishes 20
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "platform")]

BENCH_DB = "cadre_hub_bench"
VERBS = [
    "build",
    "check",
    "draft",
    "merge",
    "parse",
    "plan",
    "review",
    "summarize",
    "track",
    "translate",
    "audit",
    "forecast",
    "format",
    "classify",
    "extract",
]
NOUNS = [
    "invoice",
    "contract",
    "report",
    "ticket",
    "lead",
    "budget",
    "release",
    "incident",
    "survey",
    "roadmap",
    "pdf",
    "spreadsheet",
    "email",
    "meeting",
    "policy",
    "expense",
]
TOOLS = ["pandas", "openpyxl", "pypdf", "jira", "salesforce", "slack", "feishu", "sql", "git"]


def prepare_database() -> None:
    from urllib.parse import urlsplit, urlunsplit

    data_dir = Path(os.environ.get("CADRE_DATA_DIR", ROOT / "var")).resolve()
    database_url = os.environ.get("DATABASE_URL")
    if not database_url:
        from cadre.runtime.embedded import start_postgres

        database_url = start_postgres(data_dir)
    import psycopg

    parts = urlsplit(database_url)
    admin_url = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin_url, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [BENCH_DB]).fetchone():
            conn.execute(f"DROP DATABASE {BENCH_DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {BENCH_DB}")
    os.environ.update(
        {
            "DATABASE_URL": urlunsplit(parts._replace(path=f"/{BENCH_DB}")),
            "CADRE_DATA_DIR": str(data_dir),
            "DJANGO_SETTINGS_MODULE": "cadre.settings",
            "LOG_LEVEL": "WARNING",
            "LOG_FORMAT": "text",
            "CADRE_CACHE_PREFIX": "cadre-hub-bench",
            "ALLOWED_HOSTS": "testserver",
        }
    )


def seed(count: int, rng: random.Random):
    """`count` published skills in one organization (bulk inserts: this is setup, not timed)."""
    from datetime import timedelta

    from django.utils import timezone

    from cadre.tenancy.models import Member, Organization, User
    from hub.models import DistTag, HubNamespace, SkillDailyStat, SkillPackage, SkillVersion
    from hub.services import refresh_search_vector

    organization = Organization.objects.create(name="Bench", slug="bench")
    user = User.objects.create_user("bench@example.test", "correct-horse-battery-9")
    owner = Member.objects.create(
        organization=organization,
        user=user,
        display_name="Bench",
        email="bench@example.test",
        roles=["owner"],
    )
    namespace = HubNamespace.objects.create(organization=organization, handle="bench")
    now = timezone.now()
    packages = []
    for index in range(count):
        verb, noun, tool = rng.choice(VERBS), rng.choice(NOUNS), rng.choice(TOOLS)
        name = f"{verb}-{noun}-{index}"
        description = (
            f"{verb.title()} {noun}s with {tool}; use when the user asks to {verb} a {noun}."
        )
        body = " ".join(rng.choice(VERBS + NOUNS + TOOLS) for _ in range(80))
        packages.append(
            SkillPackage(
                organization=organization,
                namespace=namespace,
                name=name,
                display_name=name,
                summary=description,
                owner=owner,
                search_text=body,
                created_at=now - timedelta(days=rng.randint(0, 400)),
                updated_at=now - timedelta(days=rng.randint(0, 200)),
            )
        )
    SkillPackage.objects.bulk_create(packages, batch_size=1000)
    refresh_search_vector(SkillPackage.objects.all())
    versions = [
        SkillVersion(
            package=package,
            version="1.0.0",
            major=1,
            minor=0,
            patch=0,
            status=SkillVersion.Status.PUBLISHED,
            fingerprint="0" * 64,
            frontmatter={"name": package.name, "description": package.summary},
            created_by=owner,
            published_at=now,
        )
        for package in packages
    ]
    SkillVersion.objects.bulk_create(versions, batch_size=1000)
    DistTag.objects.bulk_create(
        [DistTag(package=v.package, tag="latest", version=v) for v in versions], batch_size=1000
    )
    SkillDailyStat.objects.bulk_create(
        [
            SkillDailyStat(
                package=v.package,
                version=v,
                day=(now - timedelta(days=rng.randint(0, 90))).date(),
                installs=rng.randint(0, 50),
                downloads=rng.randint(0, 80),
                successes=rng.randint(0, 40),
                failures=rng.randint(0, 10),
            )
            for v in versions
            if rng.random() < 0.6
        ],
        batch_size=1000,
    )
    from django.db import connection

    with connection.cursor() as cursor:  # what autovacuum would do after a bulk load
        cursor.execute("ANALYZE")
    return owner


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def bench_search(owner, searches: int, rng: random.Random) -> None:
    from cadre.tenancy.actors import member_actor
    from hub.selectors import search

    actor = member_actor(owner)
    queries = (
        [f"{rng.choice(VERBS)} {rng.choice(NOUNS)}" for _ in range(searches // 3)]
        + [rng.choice(NOUNS) for _ in range(searches // 3)]
        + [rng.choice(TOOLS) for _ in range(searches - 2 * (searches // 3))]
    )
    search(actor, "warm up")
    timings = []
    for query in queries:
        started = time.perf_counter()
        search(actor, query, limit=20)
        timings.append((time.perf_counter() - started) * 1000)
    print(
        f"search: {len(timings)} queries, "
        f"p50 {statistics.median(timings):.1f} ms, p95 {percentile(timings, 0.95):.1f} ms, "
        f"max {max(timings):.1f} ms"
    )


def bench_publish(owner, publishes: int) -> list:
    from cadre.tenancy.actors import member_actor
    from hub.bundles import bundle_from_files
    from hub.services import package_publish

    actor = member_actor(owner)
    results = []
    started = time.perf_counter()
    for index in range(publishes):
        name = f"bench-publish-{index}"
        files = {
            "SKILL.md": f"---\nname: {name}\ndescription: Benchmark skill {index}.\n---\n"
            f"# {name}\n\nSteps to follow.\n".encode(),
            "scripts/run.py": b"import sys\nprint(sys.argv)\n" * 20,
            "references/guide.md": b"# Guide\n" + b"Some reference text.\n" * 200,
        }
        outcome = package_publish(
            actor=actor,
            bundle=bundle_from_files(files, folder_name=name),
            version="1.0.0",
            name=name,
        )
        results.append(outcome.version)
    elapsed = time.perf_counter() - started
    print(
        f"publish (validate + scan + store + sign + audit): {publishes} versions in "
        f"{elapsed:.2f} s = {publishes / elapsed:.1f} versions/s"
    )
    return results


def bench_install(owner, versions: list, installs: int) -> None:
    from django.test import Client

    from cadre.tenancy.actors import member_actor
    from cadre.tenancy.services import api_key_create

    _, secret = api_key_create(actor=member_actor(owner), name="bench", scopes=["hub:read"])
    client = Client(HTTP_AUTHORIZATION=f"Bearer {secret}")
    started = time.perf_counter()
    for index in range(installs):
        version = versions[index % len(versions)]
        response = client.get(f"/api/v1/hub/skills/@bench/{version.package.name}/download/")
        assert response.status_code == 200, response.content[:200]
    elapsed = time.perf_counter() - started
    print(
        f"install download (API, resolve + zip + digest + counters): {installs} in "
        f"{elapsed:.2f} s = {installs / elapsed:.1f} downloads/s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skills", type=int, default=10_000)
    parser.add_argument("--searches", type=int, default=300)
    parser.add_argument("--publishes", type=int, default=50)
    parser.add_argument("--installs", type=int, default=200)
    args = parser.parse_args()
    prepare_database()
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    rng = random.Random(7)
    started = time.perf_counter()
    owner = seed(args.skills, rng)
    print(f"seeded {args.skills} skills in {time.perf_counter() - started:.1f} s")
    bench_search(owner, args.searches, rng)
    versions = bench_publish(owner, args.publishes)
    bench_install(owner, versions, args.installs)


if __name__ == "__main__":
    main()
