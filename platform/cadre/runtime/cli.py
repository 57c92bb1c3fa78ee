"""The `cadre` command: `cadre up` runs everything on one machine, `cadre doctor` checks it.

`cadre up` is a small process supervisor. The parent process starts (or attaches to) the
embedded PostgreSQL and Redis when DATABASE_URL / REDIS_URL are unset, migrates, creates the
demo organization, then runs the ASGI server, two Celery workers (one pool for agent runs, one
for everything else: docs/operations.md) and Celery beat as children, each in its own process
group, with the services' URLs in their environment so that they attach to
the same servers instead of starting their own. Next to them it runs one long-connection worker
per connector in stream mode (Feishu long connection, DingTalk Stream), re-reading the list
every few seconds and restarting a worker that dies with a growing delay. Ctrl-C (SIGINT),
SIGTERM or the death of web, a worker or beat stops every child (SIGTERM, then SIGKILL after a
timeout) before the embedded services are released, so nothing is left running. A run file
under CADRE_DATA_DIR/run lets the next start refuse to run twice on one data folder and clean up
after a parent killed with SIGKILL.

What both commands print for a person is in the installer's language (CADRE_LANGUAGE, else the
locale: cadre.runtime.language), once Django is set up; `--help` and the lines before the setup
are English.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured
from django.utils.translation import gettext as _

from cadre.runtime import embedded
from cadre.runtime.language import installer_language

REPO_ROOT = Path(__file__).resolve().parents[3]  # platform/cadre/runtime/cli.py -> repository
HEALTH_TIMEOUT = 180.0  # seconds to wait for the web server's first answer (slow CI machines)

_added_paths: list[str] = []


def _setup_path() -> None:
    """Same as manage.py: the repository root and platform/ after the standard library."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cadre.settings")
    if not (REPO_ROOT / "manage.py").exists():
        return  # an installed (non-editable) package: everything is on sys.path already
    # Installed (editable or not), `cadre`, `hub` and `connectors` import without help, and the
    # children need nothing either; run from a bare checkout, they need the same paths.
    installed = all(importlib.util.find_spec(name) for name in ("cadre", "hub", "connectors"))
    for path in (str(REPO_ROOT), str(REPO_ROOT / "platform")):
        if path not in sys.path:
            sys.path.append(path)
            if not installed:
                _added_paths.append(path)


def _working_dir() -> Path:
    return REPO_ROOT if (REPO_ROOT / "manage.py").exists() else Path.cwd()


# --- cadre manage / cadre doctor ----------------------------------------------------------


def _manage(arguments: list[str]) -> int:
    _setup_path()
    from django.core.management import execute_from_command_line

    execute_from_command_line(["cadre manage", *arguments])
    return 0


def _doctor() -> int:
    _setup_path()
    # Settings themselves may be what is wrong (a malformed variable, a key that is not a
    # Fernet key, an embedded server that cannot start): report that as a FAIL too.
    try:
        import django

        django.setup()
    except Exception as error:
        # No translations without settings: this one finding is printed in English.
        print(f"FAIL  settings  {error}")
        print("      fix: correct the variable named above (see deploy/.env.example)")
        print("1 FAIL")
        return 1
    from django.utils import translation

    # lazy: settings — the checks read the models, once django.setup() above succeeded.
    from cadre.runtime.doctor import failed, render, run_checks

    try:
        language = installer_language()
    except ImproperlyConfigured as error:
        print(f"FAIL  settings  {error}")
        print("1 FAIL")
        return 1
    with translation.override(language):
        checks = run_checks()
        render(checks, print)
    return 1 if failed(checks) else 0


# --- cadre up -----------------------------------------------------------------------------


class _Stop(Exception):
    """Raised by the signal handlers to leave whatever `cadre up` is doing."""


@dataclass
class Child:
    name: str
    process: subprocess.Popen

    @property
    def pid(self) -> int:
        return self.process.pid


def _raise_stop(signum, _frame) -> None:
    raise _Stop(signal.Signals(signum).name)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def stop_children(children: list[Child], timeout: float) -> None:
    """SIGTERM every child's process group, wait, then SIGKILL whatever is left."""
    for child in children:
        if child.process.poll() is None:
            _signal_group(child.pid, signal.SIGTERM)
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
                _signal_group(child.pid, signal.SIGKILL)
        for child in children:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.process.wait(timeout=5)
    finally:
        signal.signal(signal.SIGINT, previous)


STREAM_REFRESH_SECONDS = 15.0  # how often the list of stream-mode connectors is re-read
RESTART_DELAY_MAX = 60.0  # the longest wait before restarting a stream worker that died
STABLE_AFTER = 60.0  # a worker that ran this long before dying starts again at the first delay


def restart_delay(failures: int) -> float:
    """1, 2, 4, … seconds up to RESTART_DELAY_MAX after the n-th death in a row."""
    return min(RESTART_DELAY_MAX, 2.0 ** max(0, failures - 1))


@dataclass
class StreamSlot:
    """One stream-mode connector's worker: its process (if running) and its restart state."""

    public_id: str
    label: str
    fingerprint: str
    child: Child | None = None
    started_at: float = 0.0
    failures: int = 0
    start_at: float = 0.0  # monotonic time of the next (re)start


class StreamSupervisor:
    """Starts, restarts (with backoff) and stops one child per stream-mode connector.

    `workers()` lists what should run (objects with public_id, name, fingerprint, problem,
    fix); `command(public_id)` is the child's command line; `spawn(name, command)` starts it.
    A connector removed, disabled or changed (settings, credentials) has its worker stopped
    (and, if changed, started again with the new configuration).
    """

    def __init__(
        self,
        *,
        workers: Callable[[], list],
        command: Callable[[str], list[str]],
        spawn: Callable[[str, list[str]], Child],
        stop_timeout: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        say: Callable[[str], object] = print,
    ):
        self.workers, self.command, self.spawn = workers, command, spawn
        self.stop_timeout = stop_timeout
        self.clock, self.say = clock, say
        self.slots: dict[str, StreamSlot] = {}
        self.reported: set[str] = set()  # connectors whose missing extra was reported

    def children(self) -> list[Child]:
        return [slot.child for slot in self.slots.values() if slot.child is not None]

    def refresh(self) -> bool:
        """Match the running workers to the connectors; True when a child was started or
        stopped."""
        wanted = {}
        for worker in self.workers():
            if worker.problem:
                if worker.public_id not in self.reported:
                    self.say(
                        _("cadre: connector %(name)s: %(problem)s (%(fix)s)")
                        % {"name": worker.name, "problem": worker.problem, "fix": worker.fix}
                    )
                    self.reported.add(worker.public_id)
                continue
            wanted[worker.public_id] = worker
        changed = False
        for public_id, slot in list(self.slots.items()):
            worker = wanted.get(public_id)
            if worker is not None and worker.fingerprint == slot.fingerprint:
                continue
            reason = _("its configuration changed") if worker is not None else _("it is off")
            changed |= self._stop(slot, reason)
            del self.slots[public_id]
        for public_id, worker in wanted.items():
            if public_id not in self.slots:
                self.slots[public_id] = StreamSlot(
                    public_id, f"stream {worker.name}", worker.fingerprint
                )
        return self.tick() or changed

    def tick(self) -> bool:
        """Notice dead workers and (re)start those whose time has come; True on a change."""
        now = self.clock()
        changed = False
        for slot in self.slots.values():
            if slot.child is not None and slot.child.process.poll() is not None:
                code = slot.child.process.returncode
                slot.failures = 1 if now - slot.started_at >= STABLE_AFTER else slot.failures + 1
                slot.start_at = now + restart_delay(slot.failures)
                self.say(
                    _("cadre: %(name)s exited with code %(code)s; restarting in %(seconds).0f s")
                    % {"name": slot.label, "code": code, "seconds": slot.start_at - now}
                )
                slot.child = None
                changed = True
            if slot.child is None and now >= slot.start_at:
                self.say(_("cadre: starting %(name)s") % {"name": slot.label})
                slot.child = self.spawn(slot.label, self.command(slot.public_id))
                slot.started_at = now
                changed = True
        return changed

    def _stop(self, slot: StreamSlot, reason: str) -> bool:
        if slot.child is None:
            return False
        self.say(_("cadre: stopping %(name)s: %(reason)s") % {"name": slot.label, "reason": reason})
        stop_children([slot.child], timeout=self.stop_timeout)
        slot.child = None
        return True


def _run_file(data_dir: Path) -> Path:
    return data_dir / "run" / "cadre-up.json"


def _process_matches(pid: int, create_time: float) -> bool:
    import psutil

    try:
        return abs(psutil.Process(pid).create_time() - create_time) < 1.0
    except psutil.Error:
        return False


def _check_previous_run(data_dir: Path) -> None:
    """Refuse a second `cadre up` on one data folder; clean up after a killed one."""
    import psutil

    path = _run_file(data_dir)
    if not path.exists():
        return
    try:
        record = json.loads(path.read_text())
    except ValueError:
        path.unlink(missing_ok=True)
        return
    if record.get("pid") != os.getpid() and _process_matches(
        record.get("pid", 0), record.get("create_time", 0)
    ):
        raise SystemExit(
            _(
                "cadre: Cadre is already running on %(path)s (pid %(pid)s, %(url)s); stop it "
                "first or use another CADRE_DATA_DIR"
            )
            % {"path": data_dir, "pid": record["pid"], "url": record.get("url", "")}
        )
    # The previous parent died without cleaning up (SIGKILL, power loss): stop its children.
    for child in record.get("children", []):
        if _process_matches(child["pid"], child["create_time"]):
            print(
                _("cadre: stopping %(name)s (pid %(pid)s) left by a previous run")
                % {"name": child["name"], "pid": child["pid"]}
            )
            _signal_group(child["pid"], signal.SIGTERM)
            try:
                psutil.Process(child["pid"]).wait(10)
            except psutil.TimeoutExpired:
                _signal_group(child["pid"], signal.SIGKILL)
            except psutil.Error:
                pass
    path.unlink(missing_ok=True)


def _write_run_file(data_dir: Path, children: list[Child], url: str) -> None:
    import psutil

    def created(pid: int) -> float:
        try:
            return psutil.Process(pid).create_time()
        except psutil.Error:
            return 0.0

    path = _run_file(data_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "pid": os.getpid(),
        "create_time": created(os.getpid()),
        "url": url,
        "children": [
            {"name": c.name, "pid": c.pid, "create_time": created(c.pid)} for c in children
        ],
    }
    path.write_text(json.dumps(record, indent=2))


def _port_free(host: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def _answers(host: str, port: int) -> bool:
    """Any HTTP answer on /healthz (even 400 for a host outside ALLOWED_HOSTS) means up."""
    connection = http.client.HTTPConnection(host, port, timeout=2)
    try:
        connection.request("GET", "/healthz")
        connection.getresponse().read()
        return True
    except OSError:
        return False
    finally:
        connection.close()


def _child_environment(settings) -> dict[str, str]:
    env = dict(os.environ)
    # The children attach to the servers this process started instead of starting their own.
    env["DATABASE_URL"] = settings.DATABASE_URL
    env["REDIS_URL"] = settings.REDIS_URL
    env["CADRE_DATA_DIR"] = str(settings.DATA_DIR)
    env["CADRE_BASE_URL"] = settings.CADRE_BASE_URL
    env.setdefault("DJANGO_SETTINGS_MODULE", "cadre.settings")
    env["PYTHONUNBUFFERED"] = "1"
    # The parent ran Django's system checks once; Celery's Django fix-up would run them again
    # in the worker and in beat, importing every URL module (seconds each) for nothing.
    env["CELERY_SKIP_CHECKS"] = "1"
    if _added_paths:  # not installed: give the children the same import path
        env["PYTHONPATH"] = os.pathsep.join(
            [p for p in (env.get("PYTHONPATH", ""),) if p] + _added_paths
        )
    return env


def worker_pools(settings) -> list[tuple[str, list[str], int]]:
    """(child name, queues, processes) of the Celery workers: agent runs get a pool of their
    own, so a connector retrying an unreachable platform or a burst of after-run learning never
    takes the worker slot a chat reply needs; the other pool serves every other queue."""
    runs = settings.CADRE_QUEUES["runs"]
    others = [settings.CELERY_TASK_DEFAULT_QUEUE, *settings.CADRE_QUEUES.values()]
    others = [queue for queue in dict.fromkeys(others) if queue != runs]
    return [("worker-runs", [runs], 2), ("worker", others, 2)]


def worker_command(queues: list[str], concurrency: int, hostname: str) -> list[str]:
    return [
        sys.executable, "-m", "celery", "-A", "cadre", "worker",
        "--concurrency", str(concurrency), "-Q", ",".join(queues), "--loglevel", "INFO",
        "--hostname", f"{hostname}@%h",
    ]  # fmt: skip


def _commands(args, settings) -> list[tuple[str, list[str]]]:
    python = sys.executable
    commands = [
        (
            "web",
            [
                python, "-m", "uvicorn", "cadre.asgi:application",
                "--host", args.host, "--port", str(args.port),
                "--lifespan", "off",  # Django's ASGI handler has no lifespan protocol
                "--timeout-graceful-shutdown", "5",  # open websockets must not hold Ctrl-C
            ],
        )
    ]  # fmt: skip
    if not args.no_worker:
        for name, queues, concurrency in worker_pools(settings):
            commands.append(
                (name, worker_command(queues, concurrency, f"cadre-{name}-{os.getpid()}"))
            )
    if not args.no_beat:
        commands.append(
            (
                "beat",
                [
                    python, "-m", "celery", "-A", "cadre", "beat", "--loglevel", "INFO",
                    "--schedule", str(settings.DATA_DIR / "celerybeat-schedule"),
                ],
            )
        )  # fmt: skip
    return commands


def _stream_command(public_id: str) -> list[str]:
    return [sys.executable, "-m", "cadre.runtime.cli", "manage", "connectors_stream", public_id]


def _stream_workers() -> list:
    """The stream-mode connectors; the parent keeps no database connection between looks."""
    from django.db import connections

    # lazy: settings — the connectors' models, in the parent once Django is set up.
    from connectors.inbound.streams import stream_workers

    try:
        return stream_workers()
    finally:
        connections.close_all()


# The workers run below the web server: on a small machine a burst of background work must
# not delay acknowledging the IM platforms or serving pages. The runs pool sits above the
# other (a CPU weight about six times as large), so learning and sending yield to answering.
NICENESS = {"worker-runs": 2, "worker": 10}


def _spawn(name: str, command: list[str], env: dict[str, str]) -> Child:
    niceness = NICENESS.get(name, 0)
    process = subprocess.Popen(  # noqa: S603 - our own interpreter and fixed arguments
        command,
        cwd=_working_dir(),
        env=env,
        stdin=subprocess.DEVNULL,  # children sit outside the terminal's foreground group
        process_group=0,  # own group: Ctrl-C reaches only us, and we stop them in order
        preexec_fn=(lambda: os.nice(niceness)) if niceness else None,
    )
    return Child(name, process)


def _console_host(host: str) -> str:
    return "127.0.0.1" if host in ("0.0.0.0", "::", "") else host  # noqa: S104


def _up(args) -> int:
    started = time.monotonic()
    _setup_path()
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _raise_stop)

    children: list[Child] = []
    streams: StreamSupervisor | None = None
    settings = None
    exit_code = 0
    language = contextlib.ExitStack()  # the installer's language, once Django is set up
    try:
        host = _console_host(args.host)
        if not os.environ.get("CADRE_BASE_URL"):
            os.environ["CADRE_BASE_URL"] = f"http://{host}:{args.port}"
        if not os.environ.get("LOG_FORMAT") and sys.stdout.isatty():
            os.environ["LOG_FORMAT"] = "text"  # people read this terminal, not a log shipper

        import django

        print("cadre: starting services...", flush=True)
        django.setup()  # starts or attaches to the embedded PostgreSQL and Redis if needed
        from django.conf import settings as django_settings
        from django.core.management import call_command
        from django.db import connections
        from django.utils import translation

        settings = django_settings
        language.enter_context(translation.override(installer_language()))
        _check_previous_run(settings.DATA_DIR)
        if not _port_free(args.host, args.port):
            print(
                _("cadre: port %(port)s on %(host)s is in use; pass --port")
                % {"port": args.port, "host": args.host},
                flush=True,
            )
            return 2

        # Static files are served from the finders (ServeStatic); an existing STATIC_ROOT keeps
        # ServeStatic from warning about it in every child.
        Path(settings.STATIC_ROOT).mkdir(parents=True, exist_ok=True)
        # System checks once here, so that a broken project fails with one clear error
        # instead of three children crashing on it.
        call_command("check")
        call_command("migrate", interactive=False, verbosity=1)
        # lazy: settings — the demo writes rows, once Django is set up and migrated.
        from cadre.runtime.demo import demo_setup, describe

        account = demo_setup()
        connections.close_all()  # the parent keeps no database connection while it waits

        env = _child_environment(settings)
        for name, command in _commands(args, settings):
            children.append(_spawn(name, command, env))
        console_url = f"http://{host}:{args.port}/"
        streams = StreamSupervisor(
            workers=_stream_workers if not args.no_streams else list,
            command=_stream_command,
            spawn=lambda name, command: _spawn(name, command, env),
            stop_timeout=args.stop_timeout,
            say=lambda line: print(line, flush=True),
        )
        streams.refresh()
        _write_run_file(settings.DATA_DIR, children + streams.children(), console_url)

        deadline = time.monotonic() + HEALTH_TIMEOUT
        while not _answers(host, args.port):
            dead = [c for c in children if c.process.poll() is not None]
            if dead:
                print(
                    _("cadre: %(name)s exited with code %(code)s")
                    % {"name": dead[0].name, "code": dead[0].process.returncode}
                )
                return 1
            if time.monotonic() > deadline:
                print(
                    _("cadre: the web server did not answer within %(seconds).0f s")
                    % {"seconds": HEALTH_TIMEOUT}
                )
                return 1
            time.sleep(0.2)

        if not settings.REDIS_EMBEDDED:
            redis_mode = _("external")
        elif settings.REDIS_URL.startswith("unix://"):
            redis_mode = _("embedded")
        else:
            redis_mode = _("local")
        services = _("PostgreSQL %(database)s, Redis %(redis)s") % {
            "database": _("embedded") if settings.DATABASE_EMBEDDED else _("external"),
            "redis": redis_mode,
        }
        running = {
            "seconds": time.monotonic() - started,
            "names": ", ".join(child.name for child in children + streams.children()),
        }
        lines = [
            "",
            _("Cadre is running (%(seconds).1f s): %(names)s") % running,
            "  " + _("Console:  %(url)s") % {"url": console_url},
            "  " + _("API docs: %(url)s") % {"url": f"{console_url}api/docs/"},
            "  "
            + _("Data:     %(path)s (%(services)s)")
            % {"path": settings.DATA_DIR, "services": services},
            *("  " + line for line in describe(account, console_url)),
            _("Ctrl-C to stop."),
            "",
        ]
        print("\n".join(lines), flush=True)

        next_refresh = time.monotonic() + STREAM_REFRESH_SECONDS
        while True:
            for child in children:
                if child.process.poll() is not None:
                    print(
                        _("cadre: %(name)s exited with code %(code)s; stopping everything")
                        % {"name": child.name, "code": child.process.returncode},
                        flush=True,
                    )
                    exit_code = 1
                    raise _Stop(child.name)
            # Stream workers are restarted on their own: a connector's bad credentials or an
            # unreachable platform must not take the console down.
            if time.monotonic() >= next_refresh:
                next_refresh = time.monotonic() + STREAM_REFRESH_SECONDS
                try:
                    changed = streams.refresh()
                except Exception as error:  # the database may be briefly unreachable
                    print(
                        _("cadre: cannot read the stream connectors: %(error)s") % {"error": error},
                        flush=True,
                    )
                    changed = streams.tick()
            else:
                changed = streams.tick()
            if changed:
                _write_run_file(settings.DATA_DIR, children + streams.children(), console_url)
            time.sleep(0.3)
    except (_Stop, KeyboardInterrupt):
        pass
    except ImproperlyConfigured as error:  # a bad variable: its message names it, no traceback
        print(f"cadre: {error}", file=sys.stderr, flush=True)
        exit_code = 1
    finally:
        # From here on, signals must not interrupt the clean-up itself.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if streams is not None:
            children = children + streams.children()
        if children:
            print(
                _("cadre: stopping %(names)s...") % {"names": ", ".join(c.name for c in children)},
                flush=True,
            )
            stop_children(children, timeout=args.stop_timeout)
        if settings is not None:
            _release_services(settings)
            if children:
                _run_file(settings.DATA_DIR).unlink(missing_ok=True)
        if children:
            print(_("cadre: stopped."), flush=True)
        language.close()
    return exit_code


def _release_services(settings) -> None:
    from django.db import connections

    connections.close_all()
    if settings.REDIS_EMBEDDED:
        embedded.stop_redis(settings.DATA_DIR)
    if settings.DATABASE_EMBEDDED:
        embedded.stop_postgres(settings.DATA_DIR)


# --- entry point --------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cadre", description="Run and check Cadre, the control plane for AI agent fleets."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    up = commands.add_parser(
        "up",
        help="migrate, create the demo organization, run web + worker + beat (+ streams)",
        description="Run Cadre on this machine: the ASGI server (HTTP and websockets), a Celery "
        "worker, Celery beat and one long-connection worker per stream-mode connector, on the "
        "embedded PostgreSQL and Redis unless DATABASE_URL and REDIS_URL are set. Ctrl-C stops "
        "everything.",
    )
    up.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    up.add_argument("--port", type=int, default=8000, help="HTTP port (8000)")
    up.add_argument("--no-worker", action="store_true", help="do not run the Celery workers")
    up.add_argument("--no-beat", action="store_true", help="do not run Celery beat")
    up.add_argument(
        "--no-streams",
        action="store_true",
        help="do not run long-connection workers for stream-mode connectors",
    )
    up.add_argument(
        "--stop-timeout",
        type=float,
        default=10.0,
        help="seconds a child gets to stop after SIGTERM before SIGKILL (10)",
    )
    commands.add_parser("doctor", help="check the installation and say how to fix problems")
    commands.add_parser("manage", help="run a Django management command: cadre manage migrate")
    commands.add_parser("skill", help="validate, publish, install, search, tag and yank Hub skills")
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "manage":
        # Everything after `manage` belongs to Django, including its own --help.
        return _manage(argv[1:])
    if argv and argv[0] == "skill":
        # lazy: heavy — the skill client takes about a second to import; `cadre up` does not
        # pay it.
        from hub.cli import main as skill_main

        return skill_main(argv[1:])
    args = _parser().parse_args(argv)
    if args.command == "doctor":
        return _doctor()
    return _up(args)


if __name__ == "__main__":
    sys.exit(main())
