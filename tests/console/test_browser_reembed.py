# ruff: noqa: F811 - the fixtures imported from other test modules are parameters here
"""After an upgrade, in a real browser (Debian's Chromium through Playwright, pages served by
uvicorn, the re-embed run by a real Celery worker): an owner whose organization still searches
with the earlier English-only model opens the Models page, sees the configured multilingual
default beside it, presses "Re-embed memories", and watches the page switch to it — in English
and in Chinese. Afterwards Chinese questions find Chinese facts by meaning. Screenshots in
var/screenshots/reembed-*.png (git-ignored)."""

from __future__ import annotations

import pytest

from cadre.memory import embeddings, selectors, services
from cadre.memory.models import MemoryEmbedding, OrganizationEmbeddingModel
from tests.conftest import PASSWORD
from tests.console.test_browser_chat import (  # noqa: F401 - fixtures and page helpers
    browser_page,
    chromium,
    expect,
    live_server_url,
    worker,
)
from tests.console.test_browser_navigation import SHOTS
from tests.memory.conftest import actor
from tests.memory.test_upgrade_to_multilingual import E5, FACTS, MINILM

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
BUTTON = {"en": "Re-embed memories", "zh-hans": "重新嵌入记忆"}
HEADING = {"en": "Embeddings", "zh-hans": "嵌入"}


@pytest.fixture
def upgraded(alice):
    """Alice's organization searched with all-MiniLM-L6-v2 before the upgrade."""
    old = embeddings.register_model(MINILM, "local", "all-MiniLM-L6-v2", 384)
    OrganizationEmbeddingModel.objects.create(
        organization=alice.organization, model=old, status="active"
    )
    memories = [
        services.memory_add(
            actor=actor(alice),
            scope="user",
            kind="fact",
            content=fact,
            source_kind="user_statement",
        )
        for fact in FACTS.values()
    ]
    embeddings.embed_memories(memories, old)
    return old


@pytest.mark.parametrize("language", ["en", "zh-hans"])
def test_an_owner_moves_search_to_the_multilingual_default_from_the_models_page(
    chromium, live_server_url, worker, alice, upgraded, language
):
    alice.language = language  # her own choice: the console speaks it once she is signed in
    alice.save(update_fields=["language"])
    with browser_page(chromium, live_server_url) as page:
        page.goto("/login/?next=/models/")  # signed out: the browser's language, English
        page.get_by_label("Email").fill(alice.user.email)
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url("**/models/")
        expect(page.locator("html")).to_have_attribute("lang", language)
        card = page.locator("#embeddings")
        expect(card.get_by_role("heading", name=HEADING[language], exact=True)).to_be_visible()
        expect(page.locator("#embedding-active")).to_have_text(MINILM)
        expect(card).to_contain_text(E5)  # the configured model, not yet in use

        card.get_by_role("button", name=BUTTON[language]).click()
        # The worker embeds every memory under the new model and switches search to it; the
        # card follows the re-embed while it runs.
        expect(page.locator("#embedding-active")).to_have_text(E5, timeout=90_000)
        expect(page.locator("#embedding-coverage")).to_contain_text(str(len(FACTS)))
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / f"reembed-{language}.png"), full_page=True)

    uses = OrganizationEmbeddingModel.objects.filter(organization=alice.organization)
    assert dict(uses.values_list("model_id", "status")) == {E5: "active", MINILM: "retired"}
    assert MemoryEmbedding.objects.filter(model_id=E5).count() == len(FACTS)
    for question, fact in FACTS.items():
        hits = selectors.memory_search(
            actor=actor(alice), query=question, mode="vector", top_k=1
        ).hits
        assert hits[0].memory.content == fact, question
