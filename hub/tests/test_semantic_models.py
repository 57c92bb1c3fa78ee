"""The Hub's semantic search under each local embedding model (real models, nothing downloaded):
MIN_SIMILARITY is on the usual scale, so under multilingual-e5-small (unrelated texts ≈ 0.8
cosine) an unrelated query finds nothing and a related one finds its package; packages embedded
under the former model are queued for the configured one by a search and found once embedded,
and meanwhile search stays lexical without an error."""

from __future__ import annotations

import pytest

from cadre.memory import embeddings
from cadre.tenancy.actors import member_actor
from hub import selectors, semantic, tasks
from hub.models import SkillEmbedding, SkillPackage
from hub.tests.embedding_model import local_embedding_model
from hub.tests.factories import publish
from hub.tests.skill_samples import skill_files

pytestmark = pytest.mark.django_db

PACKAGES = {
    "meeting-notes": "把会议录音整理成会议纪要和待办事项",
    "expense-helper": "帮你填写报销单，核对发票",
    "weather-lookup": "Get the weather forecast for a city",
}


@pytest.fixture(autouse=True)
def local_model(monkeypatch):
    with local_embedding_model(monkeypatch, "multilingual-e5-small"):
        yield


@pytest.fixture
def packages(alice):
    for name, description in PACKAGES.items():
        publish(alice, name=name, files=skill_files(name, description=description))
    return {package.name: package for package in SkillPackage.objects.all()}


def _embed_all(packages) -> None:
    for package in packages.values():
        assert semantic.package_embed(package)


def _matches(member, query: str) -> dict[str, float]:
    visible = selectors.packages_visible(member_actor(member))
    return {
        package.name: similarity
        for package, similarity in semantic.semantic_matches(
            visible, query, limit=10, exclude=set()
        )
    }


def test_an_unrelated_chinese_query_finds_nothing_under_e5(bob, packages):
    _embed_all(packages)
    # Raw E5 cosines of these to every package are ≥ 0.8, above MIN_SIMILARITY as a cosine.
    assert _matches(bob, "今天食堂午饭吃什么") == {}
    assert _matches(bob, "写 SQL 查询并解释执行计划") == {}


def test_a_related_query_finds_its_package_with_a_usual_scale_similarity(bob, packages):
    _embed_all(packages)
    found = _matches(bob, "总结会议纪要")
    assert list(found) == ["meeting-notes"]
    assert semantic.MIN_SIMILARITY <= found["meeting-notes"] < 0.9
    assert list(_matches(bob, "报销单填写")) == ["expense-helper"]


def test_packages_of_the_former_model_are_embedded_under_the_configured_one(
    monkeypatch, settings, bob, packages
):
    monkeypatch.setenv("CADRE_EMBEDDING_MODEL", "all-MiniLM-L6-v2")
    embeddings.forget_providers()
    _embed_all(packages)
    former = embeddings.active_model()
    monkeypatch.setenv("CADRE_EMBEDDING_MODEL", "multilingual-e5-small")
    embeddings.forget_providers()
    current = embeddings.active_model()
    assert current != former

    # No broker in the tests: nothing is queued, the semantic stage finds nothing, and the
    # search stays lexical.
    assert _matches(bob, "总结会议纪要") == {}
    results = selectors.search(member_actor(bob), "weather forecast")
    assert [package.name for package, _ in results] == ["weather-lookup"]

    # With a broker: the search queues the missing packages (the task runs here and now).
    settings.CELERY_TASK_ALWAYS_EAGER = True
    queued = []

    def enqueue(name, package_id):
        queued.append(package_id)
        return tasks.package_embed(package_id)

    monkeypatch.setattr(semantic, "enqueue", enqueue)
    assert list(_matches(bob, "总结会议纪要")) == ["meeting-notes"]
    assert sorted(queued) == sorted(package.pk for package in packages.values())
    assert SkillEmbedding.objects.filter(model=current).count() == len(PACKAGES)
    assert SkillEmbedding.objects.filter(model=former).count() == len(PACKAGES)
    # Queued once per interval: a second search does not look for missing packages again.
    assert semantic.queue_missing(current) == 0
