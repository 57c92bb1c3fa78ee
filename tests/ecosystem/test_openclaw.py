# ruff: noqa: F811 - the live server fixture imported below is a parameter here
"""OpenClaw agents on Cadre's memory: the real `openclaw` CLI (npm) runs headless agent turns
(`openclaw agent exec`) with the real `@mem0/openclaw-mem0` plugin in platform mode pointed at
a live Cadre's /mem0/ with a Cadre API key, and its model pointed at a loopback fake
OpenAI-compatible server. Turn one states a preference: the plugin's auto-capture stores it
in Cadre (alice's scope, provenance naming the client). Turn two, a new isolated run: the
plugin's auto-recall finds it in Cadre and it is in the prompt the model receives."""

from __future__ import annotations

import json
import subprocess

import pytest

from cadre.governance.audit_models import AuditEvent
from cadre.memory.models import Memory
from cadre.tenancy import services as tenancy_services
from cadre.tenancy.actors import member_actor
from tests.agents.fake_models import FakeModelServer
from tests.ecosystem.node import NODE_MODULES, node_env, require
from tests.live_server import live_server_url  # noqa: F401 - fixture: uvicorn on loopback

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(1500),  # two OpenClaw runs start the whole agent runtime each
]

PLUGIN = NODE_MODULES / "@mem0" / "openclaw-mem0"
OPENCLAW = NODE_MODULES / "openclaw" / "openclaw.mjs"
PREFERENCE = "From now on, always write my weekly reports in English."


def _config(model: FakeModelServer, cadre_url: str, secret: str, user_id: str) -> dict:
    return {
        "models": {
            "mode": "replace",
            "providers": {
                "fake": {
                    "baseUrl": model.base_url,
                    "apiKey": "fake-model-key",
                    "api": "openai-completions",
                    "models": [
                        {
                            "id": "fake-chat",
                            "name": "Fake chat",
                            "reasoning": False,
                            "input": ["text"],
                            "contextWindow": 128000,
                            "maxTokens": 4096,
                        }
                    ],
                }
            },
        },
        "agents": {"defaults": {"model": {"primary": "fake/fake-chat"}}},
        "plugins": {
            # Only the memory plugin: loading OpenClaw's bundled provider plugins as well makes
            # the model runtime build miss its fixed 120 s deadline on a loaded machine.
            "allow": ["openclaw-mem0"],
            "load": {"paths": [str(PLUGIN)]},
            "slots": {"memory": "openclaw-mem0"},
            "entries": {
                "openclaw-mem0": {
                    "enabled": True,
                    "config": {
                        "mode": "platform",
                        "apiKey": secret,
                        "baseUrl": f"{cadre_url}/mem0",
                        "userId": user_id,
                        "autoRecall": True,
                        "autoCapture": True,
                        "searchThreshold": 0.0,
                    },
                }
            },
        },
    }


def _turn(node: str, config_path, workspace, home, message: str) -> dict:
    done = subprocess.run(
        [
            node,
            str(OPENCLAW),
            "agent",
            "exec",
            "--config",
            str(config_path),
            "--cwd",
            str(workspace),
            "--json",
            message,
        ],
        capture_output=True,
        text=True,
        timeout=660,
        env=node_env(home, node),
    )
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-4000:])
    return json.loads(done.stdout)


def _prompt_text(request: dict) -> str:
    parts = []
    for message in request["body"].get("messages", []):
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts += [block.get("text", "") for block in content if isinstance(block, dict)]
    return "\n".join(parts)


def test_an_openclaw_agent_remembers_through_cadre(alice, live_server_url, tmp_path):
    node = require("openclaw", "@mem0/openclaw-mem0")
    _, secret = tenancy_services.api_key_create(
        actor=member_actor(alice), name="openclaw", scopes=["memory:read", "memory:write"]
    )
    script = [{"text": "Noted: your weekly reports will be in English."}]
    script += [{"text": "Here is this week's report, in English."}] * 4
    home, workspace = tmp_path / "home", tmp_path / "workspace"
    home.mkdir()
    workspace.mkdir()
    with FakeModelServer(script) as model:
        config_path = tmp_path / "openclaw.json"
        config_path.write_text(json.dumps(_config(model, live_server_url, secret, alice.email)))

        first = _turn(node, config_path, workspace, home, PREFERENCE)
        assert first["ok"] is True and "English" in first["final"]
        stored = Memory.objects.filter(scope_key=f"user:{alice.pk}", status="active")
        assert stored.exists(), "the plugin's auto-capture stored nothing in Cadre"
        memory = next(m for m in stored if "weekly reports in English" in m.content)
        assert memory.source_ref["client"] == "mem0"
        assert memory.source_ref["source"] == "OPENCLAW"
        assert AuditEvent.objects.filter(action="memory.add", target_id=str(memory.pk)).exists()
        asked_before = len(model.requests)

        second = _turn(node, config_path, workspace, home, "Please draft my weekly report.")
        assert second["ok"] is True
        prompts = [
            _prompt_text(request)
            for request in model.requests[asked_before:]
            if request["path"] == "/v1/chat/completions"
        ]
        assert prompts, "the second turn never reached the model"
        assert any(
            "<relevant-memories>" in prompt and memory.content in prompt for prompt in prompts
        ), prompts[-1][-3000:]


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
