# ruff: noqa: F811 - the live server fixture imported below is a parameter here
"""OpenClaw agents on Cadre's memory: the real `@mem0/openclaw-mem0` plugin (npm), in platform
mode pointed at a live Cadre's /mem0/ with a Cadre API key, driven through its own hooks as
OpenClaw's gateway fires them (drive_plugin.mjs): agent_end's auto-capture stores a stated
preference in Cadre (alice's scope, provenance naming the client) and before_prompt_build's
auto-recall returns it as the context OpenClaw prepends to the prompt.

A one-shot `openclaw agent exec` turn (openclaw 2026.9.6) did not fire the memory plugin's
prompt hook in our runs, so the CLI itself is not driven here (docs/integrations.md)."""

from __future__ import annotations

import json
import subprocess

import pytest

from cadre.memory.models import Memory
from cadre.tenancy import services as tenancy_services
from cadre.tenancy.actors import member_actor
from tests.ecosystem.node import NODE_MODULES, node_env, require
from tests.live_server import live_server_url  # noqa: F401 - fixture: uvicorn on loopback

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.django_db(transaction=True),
]

PLUGIN = NODE_MODULES / "@mem0" / "openclaw-mem0"
PREFERENCE = "From now on, always write my weekly reports in English."


DRIVER = NODE_MODULES.parent / "drive_plugin.mjs"


def _drive(node, home, step: str, cadre_url: str, secret: str, user_id: str, text: str) -> dict:
    done = subprocess.run(
        [node, str(DRIVER), step, f"{cadre_url}/mem0", secret, user_id, text],
        capture_output=True,
        text=True,
        timeout=180,
        env=node_env(home, node),
        cwd=DRIVER.parent,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_plugins_own_capture_and_recall_hooks_against_cadre(alice, live_server_url, tmp_path):
    """The plugin's hooks, driven from node as OpenClaw's gateway fires them (without the
    gateway): capture stores the preference in Cadre, recall returns it as the context
    OpenClaw prepends to the next prompt."""
    node = require("openclaw", "@mem0/openclaw-mem0")
    _, secret = tenancy_services.api_key_create(
        actor=member_actor(alice), name="openclaw", scopes=["memory:read", "memory:write"]
    )
    captured = _drive(node, tmp_path, "capture", live_server_url, secret, alice.email, PREFERENCE)
    assert {"agent_end", "before_prompt_build"} <= set(captured["hooks"])
    memory = Memory.objects.get(scope_key=f"user:{alice.pk}", status="active")
    assert "weekly reports in English" in memory.content
    assert memory.source_ref["client"] == "mem0" and memory.source_ref["source"] == "OPENCLAW"

    recalled = _drive(
        node, tmp_path, "recall", live_server_url, secret, alice.email, "Draft my weekly report"
    )
    context = recalled["result"]["prependContext"]
    assert "<relevant-memories>" in context and memory.content in context
