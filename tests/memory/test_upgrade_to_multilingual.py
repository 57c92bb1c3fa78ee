"""An installation upgraded from the English-only default (all-MiniLM-L6-v2) to the
multilingual one (multilingual-e5-small): its organizations keep searching with the model they
have until each re-embeds; the models page offers the move; the re-embed and switch give
Chinese questions their Chinese answers. Both models are the real ones, in the process."""

from __future__ import annotations

import pytest

from cadre.memory import embeddings, reembed, selectors, services
from cadre.memory.models import MemoryEmbedding, OrganizationEmbeddingModel
from tests.memory.conftest import actor

MINILM = "local/all-MiniLM-L6-v2"
E5 = "local/multilingual-e5-small"
FACTS = {
    "我在几楼上班？": "我的工位在 12 楼靠窗的位置",
    "我的员工编号是多少": "我的工号是 SZ20931",
    "我不能吃什么": "我对花生过敏",
    "周报要发给谁": "每周一把周报发给李伟",
}


def vector_answers(member) -> list[str]:
    """The best vector-side hit for each question (the lexical side shares no word with the
    questions on purpose)."""
    return [
        selectors.memory_search(actor=actor(member), query=question, mode="vector", top_k=1)
        .hits[0]
        .memory.content
        for question in FACTS
    ]


@pytest.fixture
def upgraded(bob, charlie, run_async):
    """Bob's organization searched with all-MiniLM-L6-v2 before the upgrade; Charlie's (another
    organization) too."""
    old = embeddings.register_model(MINILM, "local", "all-MiniLM-L6-v2", 384)
    for member in (bob, charlie):
        OrganizationEmbeddingModel.objects.create(
            organization=member.organization, model=old, status="active"
        )
    with run_async():
        for member in (bob, charlie):
            for fact in FACTS.values():
                services.memory_add(
                    actor=actor(member),
                    scope="user",
                    kind="fact",
                    content=fact,
                    source_kind="user_statement",
                )
    return old


def test_an_upgraded_organization_keeps_its_model_until_it_reembeds(
    alice, bob, charlie, upgraded, run_async
):
    assert embeddings.configured().model_id == E5  # the new default
    assert embeddings.active_model(bob.organization).pk == MINILM
    # Its memories were embedded under the model its search uses, not the new default.
    assert not MemoryEmbedding.objects.filter(model_id=E5).exists()
    status = reembed.embedding_status(bob.organization)
    assert (status.active.pk, status.configured_id, status.target) == (MINILM, E5, None)

    before = vector_answers(bob)
    assert before != list(FACTS.values())  # English-only vectors miss Chinese questions

    with run_async():  # the models page's "Re-embed memories" (an owner's)
        task = reembed.reembed_start(actor=actor(alice))
    task.refresh_from_db()
    assert (task.status, task.params["model_id"]) == ("completed", E5)
    assert embeddings.active_model(bob.organization).pk == E5
    assert vector_answers(bob) == list(FACTS.values())

    # The other organization is untouched: same model, no new vectors.
    assert embeddings.active_model(charlie.organization).pk == MINILM
    assert not MemoryEmbedding.objects.filter(
        model_id=E5, memory__organization=charlie.organization
    ).exists()


def test_the_models_page_offers_the_new_default(alice, upgraded, client):
    client.force_login(alice.user)
    page = client.get("/models/").content.decode()
    assert MINILM in page and E5 in page
    assert "a re-embed moves search to it" in page


def test_doctor_names_the_organizations_still_on_the_earlier_model(upgraded, bob, charlie):
    from cadre.checks import APP_CHECKS

    checks = APP_CHECKS.get("memory")()
    assert checks[0].status == "OK" and "local/multilingual-e5-small embeds" in checks[0].detail
    assert [(c.status, c.detail) for c in checks[1:]] == [
        (
            "WARN",
            "2 organizations still search memory with local/all-MiniLM-L6-v2, not the "
            "configured local/multilingual-e5-small",
        )
    ]
    assert "Re-embed memories" in checks[1].fix


def test_doctor_fails_on_a_local_model_the_provider_does_not_have(monkeypatch, db):
    from cadre.checks import APP_CHECKS

    monkeypatch.setenv("CADRE_EMBEDDING_MODEL", "bge-m3")
    [check] = APP_CHECKS.get("memory")()
    assert check.status == "FAIL" and "bge-m3" in check.detail
