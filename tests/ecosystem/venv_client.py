"""Python clients whose pins Cadre's environment cannot share, each in a virtualenv of its own
(tests/ecosystem/<client>/.venv, made by `make test-tools`) and run through a driver script of
that folder: the steps go in as JSON on stdin, the results come back as JSON on its last line.
Tests skip cleanly when the virtualenv is missing."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from cadre.tenancy import services as tenancy_services
from cadre.tenancy.actors import member_actor

# Cadre's own settings stay out of a client's process: it talks to Cadre over HTTP only.
CADRE_VARIABLES = ("DATABASE", "DJANGO")


@dataclass(frozen=True)
class VenvClient:
    folder: Path
    title: str  # what the skip message names: "Hermes Agent"
    requirement: str  # what `make test-tools` installs: "hermes-agent==0.19.0"
    driver: str  # the script in `folder` that runs the steps
    own_variables: tuple[str, ...]  # prefixes of the client's settings, never inherited

    def python(self) -> str:
        """The virtualenv's interpreter, or skip."""
        venv = self.folder / ".venv"
        python = venv / "bin" / "python"
        # The stamp `make test-tools` leaves once the client installed whole.
        if not python.exists() or not any(venv.glob(".installed-*")):
            pytest.skip(
                f"{self.title} is not installed: `make test-tools` builds {venv} "
                f"with {self.requirement}"
            )
        return str(python)

    def run(self, steps: list, *, home: Path, args: tuple[str, ...] = (), **env: str):
        """The driver's results for `steps`, run with `home` as HOME and working directory,
        nothing but loopback reached directly, and `env` on top of this process's variables
        (less Cadre's and the client's own)."""
        environment = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith((*self.own_variables, *CADRE_VARIABLES))
        }
        environment.update(HOME=str(home), NO_PROXY="127.0.0.1,localhost", **env)
        done = subprocess.run(
            [self.python(), str(self.folder / self.driver), *args],
            input=json.dumps(steps),
            capture_output=True,
            text=True,
            timeout=300,
            env=environment,
            cwd=home,
        )
        assert done.returncode == 0, done.stderr[-4000:]
        return json.loads(done.stdout.strip().splitlines()[-1])


def memory_key(member, name: str) -> str:
    """The secret of a new API key of `member` that reads and writes memory."""
    _, secret = tenancy_services.api_key_create(
        actor=member_actor(member), name=name, scopes=["memory:read", "memory:write"]
    )
    return secret
