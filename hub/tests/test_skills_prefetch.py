"""Prefetch of the next turn's skill relevance (hub/skill_prefetch.py), through real runs with
the offline model provider, the local embedding model and the real Redis cache: after a topic
shift the next turn on that topic scores its skills against the prefetched description vectors
(the descriptions are not embedded again) and loads the same bodies as a turn without prefetch;
a version removed in between is not loaded; a turn on another topic embeds them as usual."""

from __future__ import annotations

import pytest
from django.core.cache import cache

from cadre.agents.runtime.lifecycle import prefetch
from cadre.memory import embeddings
from cadre.tenancy.actors import member_actor
from hub import services as hub_services
from hub import skill_prefetch
from hub.models import SkillUsage
from hub.tests.agent_setup import completed_run, deploy, template_with_skills
from hub.tests.embedding_model import local_embedding_model
from hub.tests.factories import publish
from hub.tests.skill_samples import skill_files
from hub.tests.test_skills_semantic import SKILLS

pytestmark = pytest.mark.django_db

# Memory retrieval on (the topic-shift prefetch rides on it), the skills hook semantic.
HOOKS = {
    "assemble_context": [
        {"name": "memory_retrieval", "config": {"top_k": 3}},
        {"name": "skills", "config": {"semantic": True}},
    ]
}
UNRELATED = "Who won the football game yesterday?"
PDF = "Combine these two Acrobat documents into one file"
PDF_AGAIN = "Combine the two Acrobat documents into a single file"


@pytest.fixture(autouse=True)
def local_model(monkeypatch):
    # The model the skills hook's SEMANTIC_THRESHOLD was measured on (see test_skills_semantic).
    with local_embedding_model(monkeypatch, "all-MiniLM-L6-v2"):
        yield


@pytest.fixture
def versions(alice):
    return {
        name: publish(
            alice,
            name=name,
            files=skill_files(name, description=description, body=f"# {name}\n\n{body}\n"),
        )
        for name, (description, body) in SKILLS.items()
    }


@pytest.fixture
def agent(alice, bob, versions):
    template = template_with_skills(
        alice,
        [{"package": f"@acme/{name}", "range": "^1"} for name in SKILLS],
        hooks=HOOKS,
        memory_policy={"read_scopes": ["user"], "write_scopes": ["user"]},
    )
    _, by_member = deploy(alice, template, bob)
    return by_member[bob.pk]


def _bodies(run) -> dict[str, tuple[bool, bool, str]]:
    return {
        usage.package.name: (usage.loaded, usage.body_loaded, usage.relevance)
        for usage in SkillUsage.objects.filter(run=run).select_related("package")
    }


@pytest.fixture
def embedded(monkeypatch):
    """Every batch of texts the embedding provider is asked for, in order (a spy: the real
    local model still answers)."""
    batches: list[list[str]] = []
    provider = embeddings.provider_for(embeddings.active_model())
    real = provider.embed

    def counted(texts, **kwargs):
        batches.append(list(texts))
        return real(texts, **kwargs)

    monkeypatch.setattr(provider, "embed", counted)
    return batches


def _described(batches: list[list[str]]) -> list[str]:
    descriptions = {f"@acme/{name}: {description}" for name, (description, _) in SKILLS.items()}
    return [text for batch in batches for text in batch if text in descriptions]


def _shifted_session(bob, agent, embedded=None):
    first = completed_run(bob, agent, UNRELATED)
    shifted = completed_run(bob, agent, PDF, first.session)
    if embedded is not None:
        embedded.clear()
    assert prefetch.prefetch_next_turn(shifted.pk) == "prefetched"
    return shifted


def test_the_next_turn_on_the_topic_reuses_the_prefetched_skill_vectors(
    bob, agent, embedded, alice
):
    shifted = _shifted_session(bob, agent, embedded)
    model = embeddings.active_model()
    entry = cache.get(skill_prefetch.cache_key(shifted.session_id, agent.pk, model.pk))
    assert entry["run_id"] == shifted.pk and len(entry["skills"]) == len(SKILLS)
    assert len(_described(embedded)) == len(SKILLS)  # embedded once, by the prefetch

    embedded.clear()
    nxt = completed_run(bob, agent, PDF_AGAIN, shifted.session)
    assert _described(embedded) == [], "the descriptions must not be embedded again"
    assert [PDF_AGAIN] in embedded  # the input alone, to match it with the prefetch
    hook = nxt.steps.get(name="assemble_context:skills")
    assert hook.output["prefetched"] is True
    assert hook.output["bodies"] == ["@acme/pdf-tools@1.0.0"]

    # The same input in a session without a prefetch: the descriptions embedded, the same
    # bodies loaded.
    embedded.clear()
    fresh = completed_run(bob, agent, PDF_AGAIN)
    assert len(_described(embedded)) == len(SKILLS)
    assert "prefetched" not in fresh.steps.get(name="assemble_context:skills").output
    assert _bodies(nxt) == _bodies(fresh)
    assert _bodies(nxt)["pdf-tools"] == (True, True, "semantic")


def test_a_turn_on_another_topic_embeds_the_descriptions_again(bob, agent, embedded):
    shifted = _shifted_session(bob, agent)
    embedded.clear()
    other = completed_run(bob, agent, "How do I get reimbursed for my taxi fare", shifted.session)
    assert len(_described(embedded)) == len(SKILLS)
    hook = other.steps.get(name="assemble_context:skills")
    assert "prefetched" not in hook.output
    assert hook.output["bodies"] == ["@acme/expense-report@1.0.0"]


def test_a_version_removed_after_the_prefetch_is_not_loaded(alice, bob, agent, versions):
    shifted = _shifted_session(bob, agent)
    hub_services.version_remove(
        actor=member_actor(alice), version=versions["pdf-tools"], reason="withdrawn"
    )
    nxt = completed_run(bob, agent, PDF_AGAIN, shifted.session)
    assert "pdf-tools" not in _bodies(nxt)
    hook = nxt.steps.get(name="assemble_context:skills")
    assert not any("pdf-tools" in label for label in hook.output["loaded"])
    system = nxt.steps.get(kind="model_call").input["messages"][0]["content"]
    assert "Use pypdf to merge files." not in system and "pdf-tools" not in system


def test_a_tampered_version_is_refused_though_its_vector_was_prefetched(bob, agent, versions):
    from hub.models import SkillFile

    shifted = _shifted_session(bob, agent)
    # The stored SKILL.md listing no longer matches the signed fingerprint.
    SkillFile.objects.filter(version=versions["pdf-tools"], path="SKILL.md").update(sha256="0" * 64)
    nxt = completed_run(bob, agent, PDF_AGAIN, shifted.session)
    assert _bodies(nxt)["pdf-tools"] == (False, False, "")
    system = nxt.steps.get(kind="model_call").input["messages"][0]["content"]
    assert "Use pypdf to merge files." not in system
