"""Memory-to-skill reads the newest experiences, looks at a cluster once (no model call for a
cluster already looked at) and quotes tasks masked in the draft people review."""

from __future__ import annotations

import json

import pytest

from cadre.agents import services as agent_services
from cadre.memory import services as memory_services
from cadre.memory.models import Memory
from cadre.skills.models import DistillationRecord
from cadre.skills.selectors import decode_files
from cadre.skills.tasks import memory_distill
from cadre.tenancy.actors import member_actor
from tests.agents.fake_models import FakeModelServer

pytestmark = pytest.mark.django_db

CITIES = ("Berlin", "Paris", "Milan", "Madrid", "Vienna", "Prague")
STEPS = ["Book the booth space", "Confirm the booth budget with finance"]


def _experience(member, task: str, steps: list[str] | None = None, outcome: str = "success"):
    attributes = {"task": task, "outcome": outcome}
    if steps is not None:
        attributes["steps"] = steps
    return memory_services.memory_add(
        actor=member_actor(member),
        scope="organization",
        kind="experience",
        content=f"Task: {task}",
        attributes=attributes,
        source_kind="system",
    )


def _old_experiences(member, count: int) -> None:
    """`count` verified experiences older than anything else, made in one insert (no steps:
    nothing to distill from them, but they fill the oldest part of the window)."""
    model = _experience(member, "Water the plants", outcome="unknown")
    rows = []
    for index in range(count):
        row = Memory.objects.get(pk=model.pk)
        row.pk = None
        row.content = f"Task: Water the plants, round {index}"
        row.content_hash = f"{index:064x}"
        rows.append(row)
    Memory.objects.bulk_create(rows)


def test_the_newest_experiences_are_distilled_after_more_than_the_window(alice):
    _old_experiences(alice, 2000)
    for city in CITIES:
        _experience(alice, f"Prepare the trade show booth in {city}", STEPS)
    assert Memory.objects.filter(kind="experience").count() > 2001

    assert memory_distill(alice.organization_id)["acme"] == {"kept": 1, "dropped": 0}
    record = DistillationRecord.objects.get()
    assert record.successes == len(CITIES)
    assert "Confirm the booth budget with finance" in record.draft


def _model(alice, server):
    config = agent_services.provider_config_create(
        actor=member_actor(alice),
        name="loopback model",
        kind="openai_compatible",
        base_url=server.base_url,
        api_key="sk-test",
        default_model="m",
    )
    alice.organization.settings = {"skills": {"provider_config": config.pk, "model": "m"}}
    alice.organization.save(update_fields=["settings"])


def test_a_second_nightly_pass_makes_no_model_call(alice):
    for city in CITIES:
        _experience(alice, f"Prepare the trade show booth in {city}", STEPS)
    judged = [
        {"text": "1. Book a booth"},
        {"text": "1. Book the booth 2. Confirm the budget"},
        {"text": json.dumps({"without": 0.3, "with": 0.9})},
    ] * 2
    rubric = [{"text": json.dumps({"score": 0.8, "reasons": "Clear, reusable steps."})}]
    with FakeModelServer(judged + rubric + judged) as server:
        _model(alice, server)
        assert memory_distill(alice.organization_id)["acme"] == {"kept": 1, "dropped": 0}
        calls = len(server.requests)
        assert calls > 0

        assert memory_distill(alice.organization_id)["acme"] == {"kept": 0, "dropped": 0}
        assert len(server.requests) == calls
    assert DistillationRecord.objects.count() == 1


def test_the_draft_quotes_tasks_masked(alice, bob):
    for city in CITIES:
        _experience(
            alice,
            f"Call Bob on 13812345678 or bob@acme.test about the trade show booth in {city}",
            STEPS,
        )
    assert memory_distill(alice.organization_id)["acme"] == {"kept": 1, "dropped": 0}
    record = DistillationRecord.objects.get()
    skill = record.draft
    assert "Task: Call" in skill  # the example is there, masked
    for raw in ("13812345678", "bob@acme.test", "Bob"):
        assert raw not in skill
    assert "bob" not in record.name and "13812345678" not in record.name
    assert "<PHONE_1>" in skill and "<EMAIL_1>" in skill and "<MEMBER_1>" in skill
    skill_md = decode_files(record.candidate.files)["SKILL.md"].decode()
    assert "13812345678" not in skill_md and "bob@acme.test" not in skill_md
