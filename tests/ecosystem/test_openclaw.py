# ruff: noqa: F811 - the live server fixture imported below is a parameter here
"""OpenClaw agents on Cadre's memory, for real: an `openclaw gateway` process (npm `openclaw`)
with the `@mem0/openclaw-mem0` plugin in platform mode pointed at a live Cadre's /mem0/ (a
Cadre API key) and its model a loopback OpenAI-compatible fake that records every prompt.
`openclaw agent` runs two turns through the gateway: after the first, the plugin's auto-capture
stores the stated preference in Cadre (alice's scope, provenance naming the client); the second,
in a new session, gets it back from Cadre as `<relevant-memories>` in the prompt the model
receives.

Why the gateway and not `openclaw agent exec` (or `agent --local`): those embedded paths load
plugins into a scoped registry (`loadPluginRegistryHandle`, `activate: false`) and never
activate it, so the process-wide hook runner the agent loop asks for (`getGlobalHookRunner()`)
is never created and no typed plugin hook fires; only the gateway activates its registry
(docs/integrations.md)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from cadre.memory.models import Memory
from cadre.tenancy import services as tenancy_services
from cadre.tenancy.actors import member_actor
from tests.agents.fake_models import FakeModelServer
from tests.ecosystem.node import NODE_MODULES, node_env, require
from tests.live_server import live_server_url  # noqa: F401 - fixture: uvicorn on loopback

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.django_db(transaction=True),
    # A cold gateway loads its plugins for a minute or more on a busy two-core machine.
    pytest.mark.timeout(900),
]

OPENCLAW = NODE_MODULES / "openclaw" / "openclaw.mjs"
PLUGIN = NODE_MODULES / "@mem0" / "openclaw-mem0"
PREFERENCE = "From now on, always write my weekly reports in English."
REPLY = "Noted: your weekly reports will be in English."
RECALL_PROMPT = "Draft my weekly report for this week."
GATEWAY_TOKEN = "cadre-test-gateway-token"
STARTUP_DEADLINE = 420.0
CAPTURE_DEADLINE = 120.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _config(home: Path, *, model_url: str, cadre_url: str, secret: str, user_id: str) -> dict:
    """openclaw.json as docs/integrations.md gives it, plus a loopback model and gateway."""
    return {
        "gateway": {
            "mode": "local",
            "port": _free_port(),
            "bind": "loopback",
            "auth": {"mode": "token", "token": GATEWAY_TOKEN},
        },
        "logging": {"file": str(home / "openclaw.log")},
        "agents": {
            "defaults": {
                "model": {"primary": "loopback/fake-chat"},
                "heartbeat": {"every": "0m"},
            }
        },
        "models": {
            "mode": "merge",
            "providers": {
                "loopback": {
                    "baseUrl": model_url,
                    "apiKey": "sk-loopback",
                    "api": "openai-completions",
                    "models": [
                        {
                            "id": "fake-chat",
                            "name": "Loopback fake",
                            "reasoning": False,
                            "input": ["text"],
                            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                            "contextWindow": 120000,
                            "maxTokens": 4096,
                        }
                    ],
                }
            },
        },
        "plugins": {
            # The npm package as installed by `make test-tools` (no `openclaw plugins install`:
            # nothing downloads while the tests run).
            "load": {"paths": [str(PLUGIN)]},
            "allow": ["openclaw-mem0"],
            "slots": {"memory": "openclaw-mem0"},
            "entries": {
                "openclaw-mem0": {
                    "enabled": True,
                    "hooks": {"allowConversationAccess": True, "timeoutMs": 30000},
                    "config": {
                        "mode": "platform",
                        "baseUrl": f"{cadre_url}/mem0",
                        "apiKey": secret,
                        "userId": user_id,
                        "autoRecall": True,
                        "autoCapture": True,
                        "searchThreshold": 0,
                    },
                }
            },
        },
    }


class Gateway:
    """`openclaw gateway run` in its own process group, its output in a file."""

    def __init__(self, node: str, home: Path):
        self.node, self.home = node, home
        self.env = {**node_env(home, node), "OPENCLAW_GATEWAY_TOKEN": GATEWAY_TOKEN}
        self.output = home / "gateway.out"
        self.workspace = home / "work"
        self.workspace.mkdir()

    def __enter__(self):
        with open(self.output, "wb") as out:
            self.process = subprocess.Popen(
                [self.node, str(OPENCLAW), "gateway", "run"],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self.env,
                cwd=self.workspace,
                start_new_session=True,
            )
        deadline = time.monotonic() + STARTUP_DEADLINE
        while "[gateway] ready" not in self.log():
            assert self.process.poll() is None, f"the gateway exited:\n{self.log()[-4000:]}"
            assert time.monotonic() < deadline, (
                f"the gateway never got ready:\n{self.log()[-4000:]}"
            )
            time.sleep(0.5)
        return self

    def __exit__(self, *exc):
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=30)

    def log(self) -> str:
        return self.output.read_text(errors="replace") if self.output.exists() else ""

    def turn(self, session: str, message: str) -> dict:
        """One `openclaw agent` turn through the gateway; its JSON answer."""
        command = ["agent", "--agent", "main", "--session-key", session, "--message", message]
        done = subprocess.run(
            [self.node, str(OPENCLAW), *command, "--json", "--timeout", "300"],
            capture_output=True,
            text=True,
            timeout=420,
            env=self.env,
            cwd=self.workspace,
        )
        assert done.returncode == 0, (
            f"{done.stdout[-2000:]}\n{done.stderr[-3000:]}\n{self.log()[-3000:]}"
        )
        return json.loads(done.stdout)


def _texts(request: dict, role: str | None = None) -> list[str]:
    """The text of each message of a chat-completions request (of one role)."""
    texts = []
    for message in (request.get("body") or {}).get("messages", []):
        if role and message.get("role") != role:
            continue
        content = message.get("content") or ""
        if isinstance(content, list):
            content = "\n".join(part.get("text", "") for part in content if isinstance(part, dict))
        texts.append(content)
    return texts


def _request_with(model: FakeModelServer, text: str) -> tuple[dict, str]:
    """The latest model request whose user messages carry `text`, and that message."""
    with model.lock:
        requests = [r for r in model.requests if r["path"].endswith("/chat/completions")]
    for request in reversed(requests):
        for content in reversed(_texts(request, "user")):
            if text in content:
                return request, content
    raise AssertionError(f"no model request carried {text!r}: {len(requests)} requests")


def test_an_openclaw_gateway_captures_into_cadre_and_recalls_into_the_next_prompt(
    alice, live_server_url, tmp_path
):
    node = require("openclaw", "@mem0/openclaw-mem0")
    _, secret = tenancy_services.api_key_create(
        actor=member_actor(alice), name="openclaw", scopes=["memory:read", "memory:write"]
    )
    home = tmp_path / "home"
    (home / ".openclaw").mkdir(parents=True)
    with FakeModelServer([{"text": REPLY}] * 50) as model:
        config = _config(
            home,
            model_url=model.base_url,
            cadre_url=live_server_url,
            secret=secret,
            user_id=alice.email,
        )
        (home / ".openclaw" / "openclaw.json").write_text(json.dumps(config, indent=2))
        with Gateway(node, home) as gateway:
            assert "openclaw-mem0: registered (mode: platform" in gateway.log()

            first = gateway.turn("capture", PREFERENCE)
            assert REPLY in json.dumps(first)
            # Nothing was stored yet: the first prompt reached the model without recalled memories.
            _, prompt = _request_with(model, PREFERENCE)
            assert "<relevant-memories>" not in prompt

            # agent_end's capture is not awaited by the turn: wait for it to land in Cadre.
            deadline = time.monotonic() + CAPTURE_DEADLINE
            captured = Memory.objects.filter(
                scope_key=f"user:{alice.pk}", content__icontains="weekly reports in English"
            )
            while not (memory := captured.first()):
                assert time.monotonic() < deadline, f"nothing captured:\n{gateway.log()[-4000:]}"
                time.sleep(0.5)
            assert memory.status == "active"
            assert memory.source_ref["client"] == "mem0"
            assert memory.source_ref["source"] == "OPENCLAW"

            # A new session: the preference can reach its prompt only from Cadre.
            gateway.turn("recall", RECALL_PROMPT)
            request, prompt = _request_with(model, RECALL_PROMPT)
            assert "<relevant-memories>" in prompt, prompt
            recalled = prompt[prompt.index("<relevant-memories>") : prompt.index(RECALL_PROMPT)]
            assert "</relevant-memories>" in recalled and memory.content in recalled
            elsewhere = [text.replace(recalled, "") for text in _texts(request)]
            assert not [text for text in elsewhere if "weekly reports" in text]
