"""The process kinds of an installation and the command line each runs, in one place.

`cadre up` starts them as children, deploy/compose.yaml and the Kubernetes manifests under
deploy/kubernetes/ run them as containers, and the cluster bench starts them in network
namespaces; tests/deploy/ checks that each of those uses exactly these command lines. The
commands are written as the image runs them (console scripts on PATH); `local_argv` turns one
into a command for the interpreter running this code.

| kind         | replicas | what it does |
|--------------|----------|--------------|
| web          | any      | HTTP, websockets, IM webhooks, API, console (uvicorn on WEB_PORT) |
| worker-runs  | any      | Celery worker on the runs queue: agent runs, inbound IM drains |
| worker       | any      | Celery worker on every other queue |
| beat         | one      | Celery beat: the periodic jobs |
| streams      | any      | stream-mode IM connectors, one live connection per connector (a lease) |

plus the one-shot `migrate`, run as the schema owner before a new version starts.

Below them, what a supervisor (`cadre up`, `cadre streams`) needs to stop its children: each
child leads a process group of its own, stopped with SIGTERM, then SIGKILL after a timeout.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

from django.utils.translation import gettext as _

WEB = "web"
WORKER_RUNS = "worker-runs"
WORKER = "worker"
BEAT = "beat"
STREAMS = "streams"
KINDS = (WEB, WORKER_RUNS, WORKER, BEAT, STREAMS)
# Kinds of which exactly one process may run in an installation.
SINGLETONS = frozenset({BEAT})

WEB_PORT = 8000
WORKER_CONCURRENCY = 2
# Seconds uvicorn gives open connections (websockets) to close on SIGTERM: below the grace
# period web gets before SIGKILL (compose's stop_grace_period 30 s, Kubernetes' 35 s).
WEB_GRACEFUL_SHUTDOWN = 20

MIGRATE = ["cadre", "manage", "migrate", "--noinput"]

_MODULES = {"celery": "celery", "uvicorn": "uvicorn", "cadre": "cadre.runtime.cli"}


def worker_pools(settings) -> list[tuple[str, list[str], int]]:
    """(kind, queues, processes) of the Celery workers: agent runs get a pool of their own, so
    a connector retrying an unreachable platform or a burst of after-run learning never takes
    the worker slot a chat reply needs; the other pool serves every other queue."""
    runs = settings.CADRE_QUEUES["runs"]
    others = [settings.CELERY_TASK_DEFAULT_QUEUE, *settings.CADRE_QUEUES.values()]
    others = [queue for queue in dict.fromkeys(others) if queue != runs]
    return [(WORKER_RUNS, [runs], WORKER_CONCURRENCY), (WORKER, others, WORKER_CONCURRENCY)]


def web_command(
    *,
    host: str = "0.0.0.0",  # noqa: S104 - a container listens on its own interface
    port: int = WEB_PORT,
    graceful_shutdown: int = WEB_GRACEFUL_SHUTDOWN,
) -> list[str]:
    return [
        "uvicorn", "cadre.asgi:application", "--host", host, "--port", str(port),
        "--lifespan", "off",  # Django's ASGI handler has no lifespan protocol
        "--timeout-graceful-shutdown", str(graceful_shutdown),
    ]  # fmt: skip


def worker_command(
    queues: list[str], concurrency: int = WORKER_CONCURRENCY, hostname: str | None = None
) -> list[str]:
    command = [
        "celery", "-A", "cadre", "worker", "--loglevel", "INFO",
        "--concurrency", str(concurrency), "-Q", ",".join(queues),
    ]  # fmt: skip
    if hostname:
        command += ["--hostname", f"{hostname}@%h"]
    return command


def beat_command() -> list[str]:
    # The schedule and beat's lock live in Redis: no schedule file, no per-machine state.
    return ["celery", "-A", "cadre", "beat", "--loglevel", "INFO"]


def streams_command() -> list[str]:
    return ["cadre", "streams"]


def commands(settings) -> dict[str, list[str]]:
    """Every long-running kind's command line as a container runs it."""
    pools = {kind: (queues, processes) for kind, queues, processes in worker_pools(settings)}
    return {
        WEB: web_command(),
        WORKER_RUNS: worker_command(*pools[WORKER_RUNS]),
        WORKER: worker_command(*pools[WORKER]),
        BEAT: beat_command(),
        STREAMS: streams_command(),
    }


def local_argv(command: list[str]) -> list[str]:
    """The same command run by this interpreter (`python -m ...`): for a checkout whose
    console scripts are not on PATH, as `cadre up` and the benches start their children."""
    program, *arguments = command
    return [sys.executable, "-m", _MODULES[program], *arguments]


# --- stopping children ----------------------------------------------------------------------


@dataclass
class Child:
    name: str
    process: subprocess.Popen

    @property
    def pid(self) -> int:
        return self.process.pid


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def stop_children(children: list[Child], timeout: float) -> None:
    """SIGTERM every child's process group, wait, then SIGKILL whatever is left."""
    for child in children:
        if child.process.poll() is None:
            signal_group(child.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    # A second Ctrl-C while waiting means "now": skip to SIGKILL.
    hurry = {"now": False}
    previous = signal.signal(signal.SIGINT, lambda *_: hurry.update(now=True))
    try:
        while time.monotonic() < deadline and not hurry["now"]:
            for child in children:
                child.process.poll()  # reap the leader so its group can empty
            if not any(_group_alive(child.pid) for child in children):
                return
            time.sleep(0.1)
        for child in children:
            if _group_alive(child.pid):
                print(
                    _("cadre: %(name)s did not stop in time, killing it") % {"name": child.name},
                    flush=True,
                )
                signal_group(child.pid, signal.SIGKILL)
        for child in children:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.process.wait(timeout=5)
    finally:
        signal.signal(signal.SIGINT, previous)


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent(parent_pid: int) -> None:
    """In a child between fork and exec (`preexec_fn`): get SIGTERM when the parent
    (`parent_pid`, taken before the fork) dies.

    A stream worker whose supervisor was killed (SIGKILL, the OOM killer) would otherwise keep
    its connection while another supervisor, seeing the lease expire, opens a second one.
    Linux only; elsewhere a no-op (the supervisor's own stop still covers clean exits).
    """
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent_pid:  # it died before prctl: nobody will send the signal
        os._exit(1)
