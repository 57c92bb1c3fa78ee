"""Hostile input on every operation, with many examples each: operations, examples sent, 5xx.

The generator of tests/api/hostile.py (NUL bytes, lone surrogates, `²`, `١٢`, 300-character
names, `1e309`, huge and negative integers, 10,000-deep JSON, wrong types; one path parameter,
query parameter or body field at a time, and the whole body) against every operation of /api/,
/mem0/, /memos/, /scim/v2/ and the MCP tools, served by uvicorn on loopback as
deploy/Dockerfile runs it, on this script's own database. The suite's test sends a few examples
per operation; this sends `--examples N` (default: every example the generator has).

    .venv/bin/python bench/hostile_fuzz.py                     # every example of every operation
    .venv/bin/python bench/hostile_fuzz.py --examples 20 --surface scim mcp

Prints one row per surface — operations, examples sent, 5xx — and a total row, then each 5xx:
method and path, the field, the value kind, the answer and the last line of the server's
traceback. Exits 1 if any answer was a server error.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "platform")]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cadre.settings")
# As the test suite runs: the schema owner's connection (it may create this database), fast
# password hashing. Keys of this run (throttles) apart from anyone else's on this Redis.
os.environ.setdefault("CADRE_TESTING", "1")
os.environ.setdefault("CADRE_CACHE_PREFIX", "cadre-hostile-fuzz")
os.environ.setdefault("LOG_LEVEL", "ERROR")

FUZZ_DB = "cadre_hostile_fuzz"
SURFACES = ("api", "mem0", "memos", "scim", "mcp")
# Far above what the run sends: 429s are documented, but would hide the operations.
UNTHROTTLED = {
    "api_key": "1000000/minute",
    "user": "1000000/minute",
    "anon": "1000000/minute",
    "auth_failure": "1000000/minute",
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--examples", type=int, default=None, help="examples per operation (default: all)"
    )
    parser.add_argument("--surface", nargs="+", choices=SURFACES, default=list(SURFACES))
    parser.add_argument("--timeout", type=float, default=30, help="seconds per request")
    parser.add_argument("--keepdb", action="store_true", help="keep the database afterwards")
    parser.add_argument("--verbose", action="store_true", help="each request on stderr")
    args = parser.parse_args()

    import faulthandler
    import signal

    import django

    faulthandler.register(signal.SIGUSR1)  # `kill -USR1 <pid>`: where every thread is
    django.setup()
    from django.conf import settings
    from django.db import connection, connections
    from django.test.utils import setup_databases, teardown_databases

    connection.settings_dict["TEST"]["NAME"] = FUZZ_DB
    # Each request's sync code runs in a thread of its own: close its connection after use.
    connection.settings_dict["CONN_MAX_AGE"] = 0
    settings.CADRE_API_THROTTLE_RATES = UNTHROTTLED
    old_config = setup_databases(verbosity=0, interactive=False, keepdb=args.keepdb)
    try:
        return _run(args)
    finally:
        # The server's request threads kept connections of their own: end them, or dropping
        # the database waits for them forever.
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        connections.close_all()
        if not args.keepdb:
            teardown_databases(old_config, verbosity=0)


def _run(args) -> int:
    from tests.api import hostile
    from tests.factories import MemberFactory, OrganizationFactory
    from tests.live_asgi import serve_asgi

    organization = OrganizationFactory(name="Fuzz Co", slug=f"fuzz-{os.getpid()}")
    owner = MemberFactory(organization=organization, email="owner@fuzz.example", roles=["owner"])
    _warm_up_embeddings()
    with serve_asgi() as (host, port):
        base_url = f"http://{host}:{port}"
        # The table is the output: the server's log lines are not printed (the sweep keeps
        # the last line of each traceback for the 5xx list). After the server's import of
        # cadre.asgi, which configures logging again.
        for handler in logging.getLogger().handlers:
            handler.setLevel(logging.CRITICAL)
        print("arranging the target", file=sys.stderr, flush=True)
        target = hostile.arrange(owner, base_url, args.surface)
        print(f"{len(target.operations)} operations", file=sys.stderr, flush=True)
        started = time.monotonic()

        def progress(number, example, response):
            if args.verbose:
                print(f"{response.status_code} {example.describe()}", file=sys.stderr, flush=True)
            elif number % 500 == 0:
                print(f"... {number} sent ({time.monotonic() - started:.0f} s)", file=sys.stderr)

        outcome = hostile.sweep(
            base_url, target.operations, args.examples, timeout=args.timeout, progress=progress
        )
        elapsed = time.monotonic() - started
        held = hostile.credentials_hold(target)
    _print(outcome, elapsed)
    print("credentials after the sweep " + " ".join(f"{k}={v}" for k, v in held.items()))
    return 1 if outcome.failures else 0


def _warm_up_embeddings() -> None:
    """The local embedding model's first load takes ~30 s: not inside a request's timeout."""
    from cadre.memory import embeddings

    model = embeddings.active_model()
    embeddings.provider_for(model).embed(["warm up"])


def _print(outcome, elapsed: float) -> None:
    rows = outcome.by_surface()
    print(f"{'surface':<8} {'operations':>10} {'examples':>9} {'5xx':>5}")
    totals = [0, 0, 0]
    for surface in SURFACES:
        if surface not in rows:
            continue
        operations, sent, errors = rows[surface]
        totals = [totals[0] + operations, totals[1] + sent, totals[2] + errors]
        print(f"{surface:<8} {operations:>10} {sent:>9} {errors:>5}")
    print(f"{'total':<8} {totals[0]:>10} {totals[1]:>9} {totals[2]:>5}")
    statuses = " ".join(f"{code}={count}" for code, count in sorted(outcome.statuses.items()))
    print(f"answers {statuses} timeouts={len(outcome.timeouts)} seconds={elapsed:.0f}")
    failing = sorted(outcome.failing_keys())
    print(f"operations with a 5xx: {len(failing)}")
    for failure in outcome.failures:
        print(f"5xx {failure.describe()}")
    for example in outcome.timeouts:
        print(f"timeout {example.describe()}")


if __name__ == "__main__":
    sys.exit(main())
