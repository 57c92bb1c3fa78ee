"""`cadre up` starts the same command lines as the containers (cadre.runtime.processes)."""

from __future__ import annotations

import argparse
import sys

from cadre.runtime import cli, processes


def test_cadre_up_runs_the_shared_command_lines_on_this_interpreter(settings):
    args = argparse.Namespace(host="127.0.0.1", port=8123, no_worker=False, no_beat=False)
    started = dict(cli._commands(args, settings))
    expected = processes.commands(settings)
    assert set(started) == set(processes.KINDS) - {processes.STREAMS}
    for kind, command in started.items():
        assert command[:2] == [sys.executable, "-m"], kind
    # Workers and beat: the containers' command, plus a host name of their own for the workers.
    for kind in (processes.WORKER_RUNS, processes.WORKER):
        local = processes.local_argv(expected[kind])
        assert started[kind][: len(local)] == local, kind
        assert started[kind][len(local)] == "--hostname", kind
    assert started[processes.BEAT] == processes.local_argv(expected[processes.BEAT])
    # Web: on the address asked for, with a short drain so that Ctrl-C is quick.
    assert started[processes.WEB] == processes.local_argv(
        processes.web_command(host="127.0.0.1", port=8123, graceful_shutdown=5)
    )


def test_local_argv_runs_each_console_script_as_a_module():
    assert processes.local_argv(["cadre", "streams"]) == [
        sys.executable,
        "-m",
        "cadre.runtime.cli",
        "streams",
    ]
    assert processes.local_argv(processes.beat_command())[:3] == [sys.executable, "-m", "celery"]
