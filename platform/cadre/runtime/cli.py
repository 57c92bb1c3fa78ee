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

`cadre streams` runs only the stream workers, for installations on several machines: the same
supervisor (cadre.runtime.streams), whose per-connector leases in Redis keep one live connection
per connector across any number of replicas; `cadre up` takes the same leases.

What the commands print for a person is in the installer's language (CADRE_LANGUAGE, else the
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
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured
from django.utils.translation import gettext as _

from cadre.runtime import embedded, processes
from cadre.runtime.language import installer_language
from cadre.runtime.processes import (
    Child,
    die_with_parent,
    signal_group,
    stop_children,
    worker_pools,
)
from cadre.runtime.streams import STREAM_REFRESH_SECONDS, StreamLeases, StreamSupervisor

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


def _raise_stop(signum, _frame) -> None:
    raise _Stop(signal.Signals(signum).name)


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
            signal_group(child["pid"], signal.SIGTERM)
            try:
                psutil.Process(child["pid"]).wait(10)
            except psutil.TimeoutExpired:
                signal_group(child["pid"], signal.SIGKILL)
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


def worker_command(queues: list[str], concurrency: int, hostname: str) -> list[str]:
    return processes.local_argv(processes.worker_command(queues, concurrency, hostname))


def _commands(args, settings) -> list[tuple[str, list[str]]]:
    commands = [
        (
            "web",
            processes.local_argv(
                # Open websockets must not hold Ctrl-C for long.
                processes.web_command(host=args.host, port=args.port, graceful_shutdown=5)
            ),
        )
    ]
    if not args.no_worker:
        for name, queues, concurrency in worker_pools(settings):
            commands.append(
                (name, worker_command(queues, concurrency, f"cadre-{name}-{os.getpid()}"))
            )
    if not args.no_beat:
        # The schedule and its lock are in Redis (settings.CELERY_BEAT_SCHEDULER).
        commands.append(("beat", processes.local_argv(processes.beat_command())))
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


def _spawn(
    name: str,
    command: list[str],
    env: dict[str, str],
    *,
    with_parent: bool = False,
    standby: bool = False,
) -> Child:
    """Start a child in its own process group; `with_parent`: it gets SIGTERM if this process
    dies (a stream worker must not outlive the supervisor holding its lease); `standby`: its
    stdin is a pipe, on which a stream standby waits for "go" (cadre.runtime.streams)."""
    niceness = NICENESS.get(name, 0)
    parent_pid = os.getpid()

    def before_exec() -> None:
        if niceness:
            os.nice(niceness)
        if with_parent:
            die_with_parent(parent_pid)

    process = subprocess.Popen(  # noqa: S603 - our own interpreter and fixed arguments
        command,
        cwd=_working_dir(),
        env=env,
        # Children sit outside the terminal's foreground group: never the terminal's stdin.
        stdin=subprocess.PIPE if standby else subprocess.DEVNULL,
        process_group=0,  # own group: Ctrl-C reaches only us, and we stop them in order
        preexec_fn=before_exec if niceness or with_parent else None,
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
            spawn=lambda name, command, standby=False: _spawn(
                name, command, env, with_parent=True, standby=standby
            ),
            # The same leases as `cadre streams`: alone on its Redis, this process holds them
            # (so it never starts a standby).
            leases=StreamLeases.from_settings(settings),
            standby=settings.CADRE_STREAM_STANDBY,
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
            changed, next_refresh = _streams_turn(streams, next_refresh)
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
        if streams is not None:
            streams.close()  # gives the leases back
        if settings is not None:
            _release_services(settings)
            if children:
                _run_file(settings.DATA_DIR).unlink(missing_ok=True)
        if children:
            print(_("cadre: stopped."), flush=True)
        language.close()
    return exit_code


def _streams_turn(streams: StreamSupervisor, next_refresh: float) -> tuple[bool, float]:
    """One turn of a stream supervisor's loop: re-read the connectors when it is time, else
    keep the leases and the children; (anything started or stopped, the next re-read)."""
    if time.monotonic() < next_refresh:
        return streams.tick(), next_refresh
    next_refresh = time.monotonic() + STREAM_REFRESH_SECONDS
    try:
        return streams.refresh(), next_refresh
    except Exception as error:  # the database may be briefly unreachable
        print(
            _("cadre: cannot read the stream connectors: %(error)s") % {"error": error}, flush=True
        )
        return streams.tick(), next_refresh


# --- cadre streams ------------------------------------------------------------------------


def _streams(args) -> int:
    """Hold the stream-mode connectors' connections on this machine, as many replicas as
    wanted: each connector's child runs under whichever replica holds its lease."""
    missing = [name for name in ("DATABASE_URL", "REDIS_URL") if not os.environ.get(name)]
    if missing:  # embedded servers are one machine's: several replicas cannot share them
        print(f"cadre streams: set {' and '.join(missing)} (see deploy/.env.example)", flush=True)
        return 2
    _setup_path()
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _raise_stop)
    streams: StreamSupervisor | None = None
    exit_code = 0
    language = contextlib.ExitStack()
    try:
        import django

        django.setup()
        from django.conf import settings
        from django.utils import translation

        language.enter_context(translation.override(installer_language()))
        env = _child_environment(settings)
        streams = StreamSupervisor(
            workers=_stream_workers,
            command=_stream_command,
            spawn=lambda name, command, standby=False: _spawn(
                name, command, env, with_parent=True, standby=standby
            ),
            leases=StreamLeases.from_settings(settings),
            standby=settings.CADRE_STREAM_STANDBY,
            stop_timeout=args.stop_timeout,
            say=lambda line: print(line, flush=True),
        )
        print(
            _("cadre: holding stream connections as %(holder)s")
            % {"holder": streams.leases.holder},
            flush=True,
        )
        next_refresh = 0.0
        while True:
            _changed, next_refresh = _streams_turn(streams, next_refresh)
            time.sleep(0.3)
    except (_Stop, KeyboardInterrupt):
        pass
    except ImproperlyConfigured as error:
        print(f"cadre: {error}", file=sys.stderr, flush=True)
        exit_code = 1
    finally:
        for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(signum, signal.SIG_IGN)
        if streams is not None:
            streams.close()  # children first, then the leases, for a takeover at once
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
    streams = commands.add_parser(
        "streams",
        help="hold the stream-mode connectors' connections (any number of replicas)",
        description="Run one long-connection worker per stream-mode connector whose lease this "
        "process holds in Redis; replicas on other machines take a connector over within "
        "seconds when its holder dies. Needs DATABASE_URL and REDIS_URL. SIGTERM or Ctrl-C "
        "stops the workers and gives the leases back.",
    )
    streams.add_argument(
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
    if args.command == "streams":
        return _streams(args)
    return _up(args)


if __name__ == "__main__":
    sys.exit(main())
