"""A Chinese-speaking employee, through the public API on a fresh install's default embedding
model: facts written in Chinese are found by questions in other words (员工编号 for 工号, 不能吃
for 过敏), different facts of one person all stay, and an English question finds an English
fact in the same scope."""

from __future__ import annotations

from cadre.memory.models import Memory

FACTS = {
    "我在几楼上班？": "我的工位在 12 楼靠窗的位置",
    "我的员工编号是多少": "我的工号是 SZ20931",
    "我不能吃什么": "我对花生过敏",
    "周报要发给谁": "每周一把周报发给李伟",
}


def test_chinese_questions_find_chinese_facts_through_the_api(bob, client_for, run_async):
    client = client_for(bob)
    ids = {}
    with run_async():  # each write's enrich (embedding) and dedup tasks run
        for fact in [*FACTS.values(), "The VPN password rotates every 90 days"]:
            created = client.post(
                "/api/v1/memories/", {"content": fact, "kind": "fact"}, format="json"
            )
            assert created.status_code == 201, created.json()
            assert created.json()["dedup"] == "stored"
            ids[fact] = created.json()["id"]
    # Different facts of one person, however alike they look to the embedder: none merged.
    assert Memory.objects.filter(pk__in=ids.values(), status="active").count() == len(ids)

    for question, fact in FACTS.items():
        found = client.post(
            "/api/v1/memories/search/", {"query": question, "top_k": 1}, format="json"
        )
        assert found.status_code == 200, found.json()
        [hit] = found.json()["hits"]
        assert hit["memory"]["content"] == fact, question
        assert "vector_rank" in hit["components"]
    english = client.post(
        "/api/v1/memories/search/",
        {"query": "how often does my VPN secret change", "top_k": 1},
        format="json",
    ).json()["hits"]
    assert english[0]["memory"]["id"] == ids["The VPN password rotates every 90 days"]
