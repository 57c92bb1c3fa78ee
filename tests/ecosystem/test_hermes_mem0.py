# ruff: noqa: F811 - the live server fixture imported below is a parameter here
"""Hermes Agent's own mem0 memory provider (`plugins/memory/mem0/` of PyPI `hermes-agent`
0.19.0, github.com/NousResearch/hermes-agent) pointed at a live Cadre: MEM0_HOST set to
<cadre>/mem0/oss (the provider's self-hosted mode, Mem0's self-hosted server contract) and a
Cadre API key as MEM0_API_KEY (sent as `X-API-Key`).

hermes-agent pins exact versions Cadre's environment cannot share, so the provider runs from a
virtualenv of its own (tests/ecosystem/hermes/.venv, made by `make test-tools`) through
tests/ecosystem/hermes/drive_provider.py. Its lazy `mem0ai` install is switched off
(config.yaml `security.allow_lazy_installs: false`, HERMES_DISABLE_LAZY_INSTALLS=1) and the
version it would install is in that virtualenv already: nothing downloads at test time."""

from __future__ import annotations

from pathlib import Path

import pytest

from cadre.memory import services
from cadre.memory.models import Memory
from cadre.tenancy.actors import member_actor
from tests.ecosystem.venv_client import VenvClient, memory_key
from tests.live_server import live_server_url  # noqa: F401 - fixture: uvicorn on loopback

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

HERMES = VenvClient(
    folder=Path(__file__).parent / "hermes",
    title="Hermes Agent",
    requirement="hermes-agent==0.19.0",
    driver="drive_provider.py",
    own_variables=("MEM0_", "HERMES_", "PYTHON"),
)


def _drive(base_url: str, secret: str, steps: list, home: Path) -> dict:
    return HERMES.run(
        steps,
        home=home,
        HERMES_HOME=str(home / ".hermes"),
        HERMES_DISABLE_LAZY_INSTALLS="1",
        MEM0_HOST=f"{base_url}/mem0/oss",
        MEM0_API_KEY=secret,
        MEM0_TELEMETRY="False",
    )


@pytest.fixture
def secret(alice):
    return memory_key(alice, "hermes")


def test_hermes_stores_a_turn_recalls_it_and_manages_it_in_the_key_owners_memory(
    alice, bob, secret, live_server_url, tmp_path
):
    # Another member's personal memory and a shared one, both about the same thing: Hermes
    # with alice's key (an owner's) must never see them.
    services.memory_add(
        actor=member_actor(bob),
        scope="user",
        kind="fact",
        content="Bob wants his weekly reports in French.",
        source_kind="user_statement",
    )
    services.memory_add(
        actor=member_actor(alice),
        scope="organization",
        kind="fact",
        content="Weekly reports are due on Fridays.",
        source_kind="user_statement",
    )
    first = _drive(
        live_server_url,
        secret,
        [
            [
                "sync_turn",
                {
                    "user": "I prefer my weekly reports in English.",
                    "assistant": "Noted, English it is.",
                },
            ],
            ["prefetch", {"query": "Which language for my weekly reports?"}],
            ["tool", {"name": "mem0_search", "args": {"query": "weekly report language"}}],
            ["tool", {"name": "mem0_add", "args": {"content": "My desk is on floor 7."}}],
        ],
        tmp_path,
    )
    assert first["backend"] == "SelfHostedBackend"
    assert "self-hosted (HTTP API)" in first["system_prompt"]
    synced, recalled, found, added = first["results"]
    assert synced == {"ok": True, "log": []}

    # Stored in Cadre, in alice's own personal memory, labelled as Hermes labels it.
    memory = Memory.objects.get(scope_key=f"user:{alice.pk}", content__contains="English")
    assert "weekly reports in English" in memory.content
    assert memory.source_ref["client"] == "mem0" and memory.source_ref["api"] == "oss"
    assert memory.source_ref["user_id"] == "hermes-user"
    assert memory.source_ref["agent_id"] == "hermes"
    assert memory.source_ref["metadata"] == {"channel": "cli"}

    # Recalled into the next turn's prompt, and found by its search tool, with nothing of
    # bob's or the organization's.
    assert recalled["text"].startswith("## Mem0 Memory")
    assert "weekly reports in English" in recalled["text"]
    assert "French" not in recalled["text"] and "Fridays" not in recalled["text"]
    assert [hit["id"] for hit in found["results"]] == [str(memory.pk)]
    assert found["results"][0]["memory"] == memory.content
    assert added["result"] == "Fact stored."
    desk = Memory.objects.get(scope_key=f"user:{alice.pk}", content="My desk is on floor 7.")
    assert desk.source_ref["agent_id"] == "hermes" and desk.source_kind == "import"

    second = _drive(
        live_server_url,
        secret,
        [
            [
                "tool",
                {
                    "name": "mem0_update",
                    "args": {"memory_id": str(desk.pk), "text": "My desk is on floor 8."},
                },
            ],
            ["tool", {"name": "mem0_delete", "args": {"memory_id": str(memory.pk)}}],
            ["tool", {"name": "mem0_search", "args": {"query": "desk floor"}}],
            # Bob's memory by its id: not found for alice's Hermes (never another member's).
            [
                "tool",
                {
                    "name": "mem0_delete",
                    "args": {"memory_id": str(Memory.objects.get(content__contains="French").pk)},
                },
            ],
        ],
        tmp_path,
    )
    updated, deleted, after, refused = second["results"]
    assert updated == {"result": "Memory updated.", "memory_id": str(desk.pk)}
    assert deleted == {"result": "Memory deleted.", "memory_id": str(memory.pk)}
    memory.refresh_from_db()
    assert memory.status != Memory.Status.ACTIVE
    current = Memory.objects.get(scope_key=f"user:{alice.pk}", status=Memory.Status.ACTIVE)
    assert current.content == "My desk is on floor 8."
    assert [hit["memory"] for hit in after["results"]] == ["My desk is on floor 8."]
    assert "Memory not found" in refused["error"]
    assert Memory.objects.get(content__contains="French").status == Memory.Status.ACTIVE


def test_a_wrong_key_stores_nothing(alice, live_server_url, tmp_path):
    before = Memory.objects.count()
    run = _drive(
        live_server_url,
        "cadre_00000000_not-a-key",
        [
            ["sync_turn", {"user": "I prefer tea.", "assistant": "Noted."}],
            ["tool", {"name": "mem0_add", "args": {"content": "I prefer tea."}}],
        ],
        tmp_path,
    )
    synced, added = run["results"]
    assert synced["ok"] is False and "401" in " ".join(synced["log"])
    assert "401" in added["error"]
    assert Memory.objects.count() == before
