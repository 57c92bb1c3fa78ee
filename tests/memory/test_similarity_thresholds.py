"""Similarity thresholds stated once on the usual scale (unrelated ≈ 0) hold under each local
embedding model: all-MiniLM-L6-v2 (unrelated texts ≈ 0) and multilingual-e5-small (squeezed:
unrelated ≈ 0.8, unrelated Chinese texts up to ≈ 0.9). Real texts, real models; each test fails
if a threshold were compared with E5's raw cosine instead of the calibrated similarity."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np
import pytest

from cadre.agents.hooks import prefetched
from cadre.memory import embeddings
from cadre.memory.models import EmbeddingModel
from cadre.memory.services import feedback
from cadre.skills import distill

E5 = EmbeddingModel(
    id="local/multilingual-e5-small", provider="local", name="multilingual-e5-small", dimension=384
)
MINILM = EmbeddingModel(
    id="local/all-MiniLM-L6-v2", provider="local", name="all-MiniLM-L6-v2", dimension=384
)

# Trajectories (task and steps): a paraphrase and an unrelated one, per language.
DEPLOY_ZH = "部署网站到测试环境\n构建Docker镜像\n推送到镜像仓库\n执行数据库迁移\n重启服务"
DEPLOY_ZH_AGAIN = "把接口服务发布到预发环境\n构建 docker 镜像\n推送镜像\n运行数据库迁移\n重启容器"
REFUND_ZH = "处理客户退款申请\n核对订单号\n确认退款金额\n在财务系统提交退款"
REPORT_ZH = "写周报\n汇总本周工作\n列出下周计划\n发给经理"
DEPLOY_EN = (
    "Deploy the web app to staging\nbuild the docker image\npush it to the registry\n"
    "run the migration\nrestart the service"
)
DEPLOY_EN_AGAIN = (
    "Release the API service to staging\nbuild docker image\npush image to registry\n"
    "apply database migrations\nrestart the containers"
)
OFFSITE_EN = "Plan the team offsite\nbook a venue\norder catering\nsend calendar invites"


@pytest.fixture(autouse=True)
def _no_configured_floor(monkeypatch):
    monkeypatch.delenv("CADRE_EMBEDDING_SIMILARITY_FLOOR", raising=False)
    embeddings.forget_providers()
    yield
    embeddings.forget_providers()


def _vectors(model: EmbeddingModel, texts: list[str], *, query: bool = False) -> list:
    return embeddings.provider_for(model).embed(texts, query=query)


def _cosine(a, b) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


# --- skills: clustering trajectories -------------------------------------------------------


def _clusters(model: EmbeddingModel, texts: list[str]) -> list[list[int]]:
    trajectories = [
        distill.Trajectory(index, text.splitlines()[0], text.splitlines()[1:], True, vector)
        for index, (text, vector) in enumerate(zip(texts, _vectors(model, texts), strict=True))
    ]
    return [
        [t.memory_id for t in members] for members in distill.cluster(trajectories, model=model)
    ]


def test_an_unrelated_chinese_trajectory_does_not_join_a_cluster_under_e5():
    deploy, refund, report = _vectors(E5, [DEPLOY_ZH, REFUND_ZH, REPORT_ZH])
    # Squeezed: far above CLUSTER_SIMILARITY as raw cosines.
    assert _cosine(deploy, refund) > 0.85 and _cosine(refund, report) > 0.85
    assert _clusters(E5, [DEPLOY_ZH, REFUND_ZH, REPORT_ZH]) == [[0], [1], [2]]
    assert _clusters(E5, [DEPLOY_ZH, REFUND_ZH, DEPLOY_ZH_AGAIN]) == [[0, 2], [1]]


@pytest.mark.parametrize("model", [E5, MINILM], ids=["e5", "minilm"])
def test_paraphrased_trajectories_cluster_and_unrelated_ones_do_not(model):
    assert _clusters(model, [DEPLOY_EN, OFFSITE_EN, DEPLOY_EN_AGAIN]) == [[0, 2], [1]]


# --- memory feedback: which memories a correction changes ----------------------------------


@dataclass
class _Hit:
    memory: SimpleNamespace
    components: dict = field(default_factory=dict)


def _affected(monkeypatch, model: EmbeddingModel, statement: str, contents: list[str]) -> list:
    monkeypatch.setattr(embeddings, "active_model", lambda organization=None: model)
    hits = [
        _Hit(SimpleNamespace(content=content, kind="fact", organization_id=1, pk=index))
        for index, content in enumerate(contents)
    ]
    found = feedback._rule_affected(feedback.Claim(statement=statement), hits)
    return [hit.memory.content for hit in found]


def test_a_correction_does_not_match_an_unrelated_chinese_memory_under_e5(monkeypatch):
    statement = "周会改到周三下午三点了"
    unrelated = ["他喜欢喝不加糖的咖啡", "新员工入职要领工牌"]
    vectors = _vectors(E5, [statement, *unrelated])
    assert all(_cosine(vectors[0], vector) > 0.8 for vector in vectors[1:])
    found = _affected(monkeypatch, E5, statement, ["团队周会在每周二上午十点召开", *unrelated])
    assert found == ["团队周会在每周二上午十点召开"]


@pytest.mark.parametrize("model", [E5, MINILM], ids=["e5", "minilm"])
def test_a_correction_matches_the_memory_it_changes_only(monkeypatch, model):
    found = _affected(
        monkeypatch,
        model,
        "Our VPN server is vpn2.example.com",
        [
            "Connect to the VPN at vpn.example.com",
            "Lunch is served in the cafeteria on floor 3",
            "Prefer dark mode in the IDE",
        ],
    )
    assert found == ["Connect to the VPN at vpn.example.com"]


# --- prefetch: topic shift and match --------------------------------------------------------


def test_a_new_chinese_topic_is_a_shift_and_no_match_under_e5(settings):
    before, same, other = _vectors(
        E5,
        [
            "第三季度市场活动的预算是多少？",
            "三季度活动预算还剩多少？",
            "新员工入职需要准备什么材料？",
        ],
        query=True,
    )
    assert _cosine(before, other) > 1 - settings.CADRE_PREFETCH_TOPIC_SHIFT  # raw: "same topic"
    assert prefetched.topic_shift(before, other, model=E5)
    assert prefetched.similarity(E5, before, other) < settings.CADRE_PREFETCH_MATCH
    assert not prefetched.topic_shift(before, same, model=E5)
    assert prefetched.similarity(E5, before, same) >= settings.CADRE_PREFETCH_MATCH


@pytest.mark.parametrize("model", [E5, MINILM], ids=["e5", "minilm"])
def test_a_follow_up_matches_and_a_new_topic_shifts(model, settings):
    vpn, vpn_again, offsite = _vectors(
        model,
        [
            "What's the budget for the Q3 marketing campaign?",
            "How much of the Q3 campaign budget is left?",
            "When is the team offsite this year?",
        ],
        query=True,
    )
    assert prefetched.similarity(model, vpn, vpn_again) >= settings.CADRE_PREFETCH_MATCH
    assert not prefetched.topic_shift(vpn, vpn_again, model=model)
    assert prefetched.topic_shift(vpn, offsite, model=model)
    assert prefetched.similarity(model, vpn, offsite) < settings.CADRE_PREFETCH_MATCH
