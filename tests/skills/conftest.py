"""Fixtures for the skill lifecycle suite: a throw-away signing key, a published agent for bob,
reviewers, and helpers that build skill files."""

from __future__ import annotations

import pytest

from cadre import signing
from cadre.agents import services as agent_services
from cadre.tenancy.actors import member_actor
from tests.agents.conftest import publish
from tests.console.conftest import browser  # noqa: F401 - the console's signed-in client


@pytest.fixture(autouse=True)
def _instance_signing_key(settings, tmp_path_factory, monkeypatch):
    """Each test signs Hub versions with a fresh key under its own DATA_DIR."""
    monkeypatch.delenv("CADRE_SIGNING_KEY", raising=False)
    monkeypatch.delenv("CADRE_SIGNING_KEY_FILE", raising=False)
    settings.DATA_DIR = tmp_path_factory.mktemp("data")
    signing.forget_key()
    yield
    signing.forget_key()


def skill_md(name: str, description: str, steps: list[str], example: str = "") -> bytes:
    lines = ["---", f"name: {name}", f'description: "{description}"', "---", "", f"# {name}", ""]
    lines += ["## Steps", ""] + [f"{i}. {step}" for i, step in enumerate(steps, start=1)]
    if example:
        lines += ["", "## Example", "", example]
    return ("\n".join(lines) + "\n").encode()


def make_agent(owner_member, member, *, skills=None, code="events-assistant"):
    """A published offline agent for `member` (memory retrieval off: no embedding load)."""
    owner = member_actor(owner_member)
    template = agent_services.template_create(
        actor=owner,
        name="Events assistant",
        code=code,
        agent_md="# Persona\nYou help {{member.display_name}} run trade shows.",
        model_settings={"provider": "offline", "model": "offline-1"},
        memory_policy={"read_scopes": ["agent", "user"], "write_scopes": ["agent"]},
        hooks={"assemble_context": [{"name": "memory_retrieval", "enabled": False}]},
        skills=skills or [],
    )
    publish(owner, template.versions.get())
    deployment = agent_services.deployment_create(
        actor=owner, name=f"{code} deployment", template=template, members=[member]
    )
    return deployment.agents.get()
