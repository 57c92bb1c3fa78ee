"""With a model configured (a loopback OpenAI-compatible server standing in for it): backflow
drafts come from the model, memory-to-skill's counterfactual check asks the model to judge
held-out cases with and without the skill, and the score gains the model rubric."""

from __future__ import annotations

import json

import pytest

from cadre.agents import services as agent_services
from cadre.agents.models import Run
from cadre.agents.runtime.lifecycle import execution as engine
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.agents.runtime.lifecycle.after import run_after_hooks
from cadre.governance.models import UsageRecord
from cadre.llm import provider_for
from cadre.llm.metering import Account, charged_to
from cadre.memory import services as memory_services
from cadre.skills import distill
from cadre.skills.models import DistillationRecord, SkillProposal
from cadre.skills.tasks import memory_distill
from cadre.tenancy.actors import member_actor
from tests.agents.conftest import publish
from tests.agents.fake_models import FakeModelServer

pytestmark = pytest.mark.django_db


def _config(alice, server):
    return agent_services.provider_config_create(
        actor=member_actor(alice),
        name="loopback model",
        kind="openai_compatible",
        base_url=server.base_url,
        api_key="sk-test",
        default_model="m",
    )


def test_backflow_drafts_with_the_templates_model(alice, bob):
    draft = {
        "is_skill": True,
        "name": "expo-plan",
        "description": "Plan a trade show with budget and follow-up.",
        "steps": ["Draft the plan", "Add the booth budget", "Add the follow-up list"],
        "summary": "Expo plans will include the booth budget and the follow-up list.",
    }
    script = [
        {"text": "Here is the Berlin expo plan."},
        {"text": "Noted."},
        {"text": json.dumps(draft)},
    ]
    with FakeModelServer(script) as server:
        config = _config(alice, server)
        template = agent_services.template_create(
            actor=member_actor(alice),
            name="Expo",
            code="expo",
            model_settings={
                "provider": "openai_compatible",
                "provider_config": config.pk,
                "model": "m",
            },
            hooks={"assemble_context": [{"name": "memory_retrieval", "enabled": False}]},
        )
        publish(member_actor(alice), template.versions.get())
        agent = agent_services.deployment_create(
            actor=member_actor(alice), name="Expo", template=template, members=[bob]
        ).agents.get()
        first = runtime.run_start(actor=member_actor(bob), agent=agent, text="Plan the expo.")
        assert engine.run_execute(first.pk) == Run.Status.COMPLETED
        second = runtime.run_start(
            actor=member_actor(bob),
            agent=agent,
            text="Next time, also include the booth budget and the follow-up list.",
            session=first.session,
        )
        assert engine.run_execute(second.pk) == Run.Status.COMPLETED
        run_after_hooks(second.pk)
        asked = server.requests[2]["body"]["messages"][1]["content"]
    proposal = SkillProposal.objects.get(run=second)
    assert proposal.drafted_by == "model openai_compatible:m"
    assert proposal.name == "expo-plan"
    assert "3. Add the follow-up list" in proposal.files["SKILL.md"]
    assert "Drafted by rules" not in proposal.files["SKILL.md"]
    assert proposal.summary == draft["summary"]
    assert "IMPROVEMENT: Next time, also include the booth budget" in asked


def _trajectories(alice):
    for city in ("Berlin", "Paris", "Milan", "Madrid", "Vienna", "Prague"):
        memory_services.memory_add(
            actor=member_actor(alice),
            scope="organization",
            kind="experience",
            content=f"Task: Prepare the trade show booth in {city}",
            attributes={
                "task": f"Prepare the trade show booth in {city}",
                "steps": ["Book the booth space", "Confirm the booth budget with finance"],
                "outcome": "success",
            },
            source_kind="system",
        )


def test_the_model_judges_held_out_cases_with_and_without_the_skill(
    alice, django_capture_on_commit_callbacks
):
    held_out = 2  # every third of six successes
    judged = [
        {"text": "1. Book a booth"},
        {"text": "1. Book the booth 2. Confirm the budget"},
        {"text": json.dumps({"without": 0.3, "with": 0.9})},
    ] * held_out
    rubric = [{"text": json.dumps({"score": 0.8, "reasons": "Clear, reusable steps."})}]
    _trajectories(alice)
    with FakeModelServer(judged + rubric) as server:
        config = _config(alice, server)
        alice.organization.settings = {"skills": {"provider_config": config.pk, "model": "m"}}
        alice.organization.save(update_fields=["settings"])
        # The rubric is asked once the candidate's transaction commits.
        with django_capture_on_commit_callbacks(execute=True):
            assert memory_distill(alice.organization_id)["acme"] == {"kept": 1, "dropped": 0}
        with_skill = server.requests[1]["body"]["messages"][0]["content"]
    record = DistillationRecord.objects.get()
    assert record.check_method == "model openai_compatible:m"
    assert record.figures["model_cases"] == held_out
    assert record.figures["model_gain"] == pytest.approx(0.6)
    assert "Confirm the booth budget with finance" in with_skill  # the skill was in the prompt
    rubric_part = next(c for c in record.candidate.score_components if c["key"] == "model_rubric")
    assert rubric_part["value"] == 0.8 and rubric_part["detail"] == "Clear, reusable steps."
    # Every call metered: the counterfactual check and the rubric, the organization's.
    purposes = [r.purpose for r in UsageRecord.objects.order_by("pk")]
    assert purposes == ["skills.distill"] * len(judged) + ["skills.scoring"]


def test_a_skill_the_model_finds_unhelpful_is_dropped(alice):
    members = [
        distill.Trajectory(
            i, "File the expenses", ["Collect the receipts", "Submit the form"], True
        )
        for i in range(1, 7)
    ]
    no_gain = [
        {"text": "plan"},
        {"text": "plan with skill"},
        {"text": json.dumps({"without": 0.7, "with": 0.6})},
    ] * 2
    with FakeModelServer(no_gain) as server:
        provider = provider_for({"model": "m"}, _config(alice, server))
        with charged_to(Account(organization_id=alice.organization_id, purpose="skills.distill")):
            result = distill.distill_cluster(members, provider)
    assert not result.kept
    assert "did not help" in result.reason
