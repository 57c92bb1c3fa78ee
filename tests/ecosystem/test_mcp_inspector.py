# ruff: noqa: F811 - the live server fixture imported below is a parameter here
"""The MCP Inspector CLI (`@modelcontextprotocol/inspector-cli`, npm) against a live Cadre's
/mcp/, headless: it lists Cadre's tools and calls memory_search with a Cadre key (Bearer), and
is refused without one."""

from __future__ import annotations

import json
import subprocess

import pytest

from cadre.memory import services
from cadre.tenancy import services as tenancy_services
from cadre.tenancy.actors import member_actor
from tests.ecosystem.node import NODE_MODULES, node_env, require
from tests.live_server import live_server_url  # noqa: F401 - fixture: uvicorn on loopback

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

INSPECTOR = NODE_MODULES / "@modelcontextprotocol" / "inspector-cli" / "build" / "index.js"


def _inspect(node, url, tmp_path, *args, secret=None):
    headers = ["--header", f"Authorization: Bearer {secret}"] if secret else []
    return subprocess.run(
        [node, str(INSPECTOR), f"{url}/mcp/", "--transport", "http", *headers, *args],
        capture_output=True,
        text=True,
        timeout=180,
        env=node_env(tmp_path, node),
        cwd=INSPECTOR.parent,
    )


def test_the_inspector_lists_tools_and_searches_memory(alice, live_server_url, tmp_path):
    node = require("@modelcontextprotocol/inspector-cli")
    services.memory_add(
        actor=member_actor(alice),
        scope="user",
        kind="preference",
        content="Alice wants weekly reports in English",
        source_kind="user_statement",
    )
    _, secret = tenancy_services.api_key_create(
        actor=member_actor(alice), name="inspector", scopes=["memory:read", "hub:read"]
    )
    listed = _inspect(node, live_server_url, tmp_path, "--method", "tools/list", secret=secret)
    assert listed.returncode == 0, listed.stderr[-3000:]
    tools = {tool["name"]: tool for tool in json.loads(listed.stdout)["tools"]}
    assert {"memory_search", "memory_add", "skill_get", "confirmation_request"} <= set(tools)
    assert "query" in tools["memory_search"]["inputSchema"]["properties"]

    called = _inspect(
        node,
        live_server_url,
        tmp_path,
        "--method",
        "tools/call",
        "--tool-name",
        "memory_search",
        "--tool-arg",
        "query=weekly reports",
        secret=secret,
    )
    assert called.returncode == 0, called.stderr[-3000:]
    result = json.loads(called.stdout)
    assert result.get("isError") is not True, result
    text = json.dumps(result)
    assert "weekly reports in English" in text

    refused = _inspect(node, live_server_url, tmp_path, "--method", "tools/list")
    assert refused.returncode != 0
    # Cadre's 401 body, as the Inspector prints it.
    assert "not_authenticated" in refused.stderr + refused.stdout
