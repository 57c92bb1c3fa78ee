"""The web process pools its database connections by default: uvicorn serving cadre.asgi holds
at most DATABASE_POOL_SIZE of them, and a request that waits DATABASE_POOL_TIMEOUT for one gets
503 `database_busy` with Retry-After; workers and commands keep one persistent connection."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg
import pytest
from django.conf import settings
from django.db import connection

from cadre.tenancy import services
from cadre.tenancy.actors import member_actor
from cadre.tenancy.models import ApiKey
from tests.runtime.test_embedded import free_port, wait_until

ROOT = Path(__file__).resolve().parents[2]
APPLICATION = "cadre-pool-test"
POOL_SIZE = 2

SHOW_DATABASE = """
import json, sys
{prelude}
from django.conf import settings
default = settings.DATABASES["default"]
print(json.dumps({{"pool": default["OPTIONS"].get("pool"), "age": default["CONN_MAX_AGE"]}}))
"""


def _settings_seen_by(prelude: str, **variables) -> subprocess.Popen:
    env = {**os.environ, "DATABASE_URL": settings.DATABASE_URL, **variables}
    return subprocess.Popen(
        [sys.executable, "-c", SHOW_DATABASE.format(prelude=prelude)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _result(process: subprocess.Popen) -> dict:
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def test_only_the_web_process_pools_its_connections_by_default():
    web = _settings_seen_by("import cadre.asgi")
    sized = _settings_seen_by(
        "import cadre.asgi", DATABASE_POOL_SIZE="4", DATABASE_POOL_TIMEOUT="3"
    )
    worker = _settings_seen_by("import django; django.setup()")
    forced_off = _settings_seen_by("import cadre.asgi", DATABASE_POOL="false")

    assert _result(web) == {"pool": {"min_size": 1, "max_size": 10, "timeout": 10}, "age": 0}
    assert _result(sized)["pool"] == {"min_size": 1, "max_size": 4, "timeout": 3}
    # A Celery worker or a command: one persistent connection per (single-threaded) process.
    assert _result(worker) == {"pool": None, "age": 60}
    assert _result(forced_off) == {"pool": None, "age": 60}


# --- against uvicorn ----------------------------------------------------------------------


def _server_connections() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            # this test database's only: the other test worker's server has the same name
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE application_name = %s AND datname = current_database()",
            [APPLICATION],
        )
        return cursor.fetchone()[0]


def _lock_waiters() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE application_name = %s AND wait_event_type = 'Lock' "
            "AND datname = current_database()",
            [APPLICATION],
        )
        return cursor.fetchone()[0]


@contextlib.contextmanager
def pooled_server(application: str = "cadre.asgi:application"):
    """uvicorn serving `application` on the test database with its default (pooled) settings,
    as `cadre up` starts it, the pool cut to POOL_SIZE connections waited for at most 1 s.
    Yields the port. The caller's test needs a transactional database."""
    db = connection.settings_dict
    url = (
        f"postgresql://{db['USER']}:@/{db['NAME']}?host={db['HOST']}&application_name={APPLICATION}"
    )
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "DATABASE_POOL_SIZE": str(POOL_SIZE),
        "DATABASE_POOL_TIMEOUT": "1",
        "CADRE_DATA_DIR": str(settings.DATA_DIR),
        "LOG_LEVEL": "WARNING",
    }
    env.pop("DATABASE_POOL", None)
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", application, "--host", "127.0.0.1",
         "--port", str(port), "--lifespan", "off", "--no-access-log"],
        cwd=ROOT, env=env, process_group=0,
    )  # fmt: skip

    def answers() -> bool:
        try:
            return _get(port, "/healthz", timeout=2)[0] == 200
        except OSError:
            return False

    try:
        assert wait_until(answers, timeout=90), "uvicorn did not start"
        yield port
    finally:
        server.terminate()
        server.wait(20)


@pytest.fixture
def web_server(transactional_db):
    with pooled_server() as port:
        yield port


def _get(port: int, path: str, token: str | None = None, timeout: float = 15):
    client = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        client.request("GET", path, headers=headers)
        response = client.getresponse()
        return response.status, response.getheader("Retry-After"), response.read()
    finally:
        client.close()


def test_the_web_process_holds_at_most_its_pool_and_answers_503_past_the_wait(web_server, alice):
    _, token = services.api_key_create(actor=member_actor(alice), name="pool", scopes=["org:read"])
    path = "/api/v1/departments/"

    # Three times the pool at once: requests queue for a connection and are all served. (At
    # ten times the pool, on a loaded 2-core machine a queued request can wait past the 1 s
    # timeout and rightly get 503: that is the second half of this test, made on purpose.)
    with ThreadPoolExecutor(max_workers=3 * POOL_SIZE) as threads:
        answers = list(threads.map(lambda _: _get(web_server, path, token)[0], range(60)))
    assert answers == [200] * 60
    assert 1 <= _server_connections() <= POOL_SIZE

    # Hold every pooled connection: two requests wait on a lock of the API key table.
    blocker = psycopg.connect(
        f"postgresql://{connection.settings_dict['USER']}:@/{connection.settings_dict['NAME']}"
        f"?host={connection.settings_dict['HOST']}"
    )
    try:
        blocker.execute(f"LOCK TABLE {ApiKey._meta.db_table} IN ACCESS EXCLUSIVE MODE")
        with ThreadPoolExecutor(max_workers=2) as threads:
            held = [threads.submit(_get, web_server, path, token) for _ in range(POOL_SIZE)]
            assert wait_until(lambda: _lock_waiters() == POOL_SIZE, timeout=15)

            started = time.monotonic()
            status, retry_after, body = _get(web_server, path, token, timeout=8)
            waited = time.monotonic() - started
            assert status == 503
            assert json.loads(body)["error"]["code"] == "database_busy"
            assert retry_after == "2"
            assert 0.9 <= waited < 5  # the pool's timeout, not the lock's end
            assert _server_connections() == POOL_SIZE

            # /readyz says so at once (it does not queue for a connection itself).
            status, _, body = _get(web_server, "/readyz", timeout=8)
            ready = json.loads(body)
            assert status == 503, ready
            assert ready["checks"]["database"].startswith("busy")
            assert ready["database_pool"]["exhausted"] is True
            assert ready["database_pool"]["held"] == POOL_SIZE
            assert ready["database_pool"]["available"] == 0

            blocker.rollback()
            assert [future.result()[0] for future in held] == [200] * POOL_SIZE
    finally:
        blocker.close()
    assert _server_connections() <= POOL_SIZE
    status, _, body = _get(web_server, "/readyz")
    ready = json.loads(body)
    assert status == 200, ready
    assert ready["database_pool"]["exhausted"] is False
    assert ready["database_pool"]["max"] == POOL_SIZE
    assert ready["database_pool"]["reclaimed"] == 0  # every request gave its connection back


def test_a_middleware_that_finds_the_pool_exhausted_answers_503_not_500(rf):
    from django.db import OperationalError
    from psycopg_pool import PoolTimeout

    from cadre.api.views import server_error

    try:
        try:
            raise PoolTimeout("couldn't get a connection after 1.00 sec")
        except PoolTimeout as timeout:
            raise OperationalError(str(timeout)) from timeout
    except OperationalError:
        busy = server_error(rf.get("/console/members/"))
    assert busy.status_code == 503
    assert busy["Retry-After"] == "2"
    assert json.loads(busy.content)["error"]["code"] == "database_busy"

    try:
        raise OperationalError("server closed the connection unexpectedly")
    except OperationalError:
        broken = server_error(rf.get("/api/v1/members/"))
    assert broken.status_code == 500  # a database that is down is not "busy"
