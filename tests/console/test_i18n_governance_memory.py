"""The governance and memory pages in the reader's language (issue #33): a member who reads
Chinese meets no English sentence on any of them (policy chains, the masking bench with a
result, confirmations waiting and decided, their history, alerts and their rules, audit
exports and a finished one, the memory list, a memory's detail, correction and deletion,
memory search with hits, the four Memory Viewer pages); an English colleague in the same
organization sees the same pages in English. The confirmation's summary, blast radius and
reasons, and an alert's title, are stored in English and read back in the reader's language."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse
from django.utils import translation

from cadre.agents.models import AgentTemplate, TemplateVersion
from cadre.governance import alerts, confirmations, export
from cadre.governance.masking.services import masking_rule_create
from cadre.governance.models import Confirmation, PolicyDecision
from cadre.governance.policy.services import policy_chain_set
from cadre.governance.risk import blast_radius_sentence, classify
from cadre.memory import services as memory_services
from cadre.memory.models import ContextRecord, ContextRecordItem
from cadre.tenancy.actors import member_actor
from tests.i18n.untranslated import english_sentences

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _signing_key(settings, tmp_path, monkeypatch):
    from cadre import signing

    monkeypatch.delenv("CADRE_SIGNING_KEY", raising=False)
    monkeypatch.delenv("CADRE_SIGNING_KEY_FILE", raising=False)
    settings.DATA_DIR = tmp_path
    signing.forget_key()
    yield
    signing.forget_key()


def _remember(member, content: str, **fields):
    return memory_services.memory_add(
        actor=member_actor(member),
        scope="user",
        scope_id=member.pk,
        kind=fields.pop("kind", "preference"),
        content=content,
        source_kind=fields.pop("source_kind", "user_statement"),
        **fields,
    )


@pytest.fixture
def world(zh, bob):
    """A template with its own plugins, an organization masking rule, a confirmation waiting
    and one decided, alerts (one acknowledged) with a rule on each channel kind, a finished
    audit export, and memories that were sent to a model call and corrected."""
    bob.display_name = "王伟"
    bob.save(update_fields=["display_name"])
    actor = member_actor(zh)
    organization = zh.organization
    template = AgentTemplate.objects.create(
        organization=organization, name="销售助理", code="sales"
    )
    TemplateVersion.objects.create(
        organization=organization, template=template, number=1, name=template.name
    )
    policy_chain_set(
        actor=actor,
        plugins=[
            {"plugin": "masking", "enabled": True, "config": {}},
            {"plugin": "tool_access", "enabled": False, "config": {"deny": ["shell_*"]}},
        ],
    )
    masking_rule_create(
        actor=actor, name="客户名单", entity_type="CUSTOMER", kind="dictionary", terms=["华星"]
    )
    arguments = {"recipients": ["13812345678", "x@acme.test"], "text": "价格表"}
    waiting = confirmations.confirmation_create(
        organization=organization,
        tool="im_send",
        arguments=arguments,
        assessment=classify(
            tool="im_send",
            arguments=arguments,
            declared="high",
            reach={"recipients": 14, "groups": [{"name": "全体员工", "people": 12}], "members": 2},
        ),
        idempotency_key="i18n:1",
        requester=bob,
    )
    decided = confirmations.confirmation_create(
        organization=organization,
        tool="records_delete",
        arguments={"ids": [1, 2, 3]},
        assessment=classify(tool="records_delete", arguments={"ids": [1, 2, 3]}),
        idempotency_key="i18n:2",
        requester=zh,
    )
    Confirmation.objects.filter(pk=decided.pk).update(decider_ids=[bob.pk])
    decided.refresh_from_db()
    confirmations.confirmation_decide(
        confirmation=decided,
        actor=member_actor(bob),
        decision="reject",
        via="console",
        reason="范围太大",
    )
    rule = alerts.alert_rule_create(
        actor=actor,
        name="拒绝激增",
        kind="denied_spike",
        params={"threshold": 0},
        severity="critical",
        channels=[
            {"kind": "email", "to": ["ops@acme.test"]},
            {"kind": "webhook", "url": "https://hooks.acme.test/alerts"},
            {"kind": "im", "members": [bob.pk]},
        ],
    )
    PolicyDecision.objects.create(
        organization=organization, stage="tool_call", plugin="tool_access", action="deny"
    )
    [alert] = alerts.alert_rule_evaluate(rule)
    alerts.alert_acknowledge(actor=actor, alert=alert, note="在处理")
    job = export.audit_export_create(actor=actor, formats=["jsonl", "csv"])
    export.audit_export_run(export_id=job.pk)
    memory = _remember(zh, "周报发送给王伟", source_ref={"message_id": "m-7"})
    memory = memory_services.memory_update(
        actor=actor,
        memory=memory,
        expected_version=memory.version,
        reason="负责人变了",
        content="周报发送给张伟",
    )
    _remember(zh, "喜欢下午喝绿茶")
    record = ContextRecord.objects.create(
        organization=organization, run_id="41", step_id="2", query="周报发给谁"
    )
    ContextRecordItem.objects.create(
        context=record, memory=memory, memory_version=memory.version, rank=1, score=0.9
    )
    return {
        "template": template,
        "waiting": waiting,
        "decided": decided,
        "rule": rule,
        "alert": alert,
        "job": job,
        "memory": memory,
    }


def _pages(world) -> list[str]:
    template, memory = world["template"], world["memory"]
    return [
        reverse("console:policies"),
        reverse("console:policies") + f"?template={template.pk}",
        reverse("console:masking_bench"),
        reverse("console:confirmations"),
        reverse("console:confirmation_history"),
        reverse("console:confirmation", args=[world["waiting"].pk]),
        reverse("console:confirmation", args=[world["decided"].pk]),
        reverse("console:alerts"),
        reverse("console:alert", args=[world["alert"].pk]),
        reverse("console:alert_rules"),
        reverse("console:alert_rule_create"),
        reverse("console:alert_rule_edit", args=[world["rule"].pk]),
        reverse("console:alert_rule_delete", args=[world["rule"].pk]),
        reverse("console:audit_exports"),
        reverse("console:audit_export", args=[world["job"].pk]),
        reverse("console:memory"),
        reverse("console:memory") + "?verification=unverified",
        reverse("console:memory") + "?q=不存在的内容",
        reverse("console:memory_detail", args=[memory.pk]),
        reverse("console:memory_correct", args=[memory.pk]),
        reverse("console:memory_delete", args=[memory.pk]),
        reverse("console:memory_search"),
        reverse("console:memory_search") + "?q=周报",
        reverse("console:memory_timeline"),
        reverse("console:memory_map"),
        reverse("console:memory_heatmap"),
        reverse("console:memory_quality"),
    ]


def _english(page: str) -> list[str]:
    return english_sentences(page)


def test_every_page_reads_in_chinese_for_a_chinese_member(zh, world, browser):
    client = browser(zh)
    problems = {}
    for url in _pages(world):
        response = client.get(url)
        assert response.status_code == 200, url
        found = _english(response.content.decode())
        if found:
            problems[url] = found
    assert problems == {}, "\n".join(f"{url}: {found}" for url, found in problems.items())


def test_what_a_chinese_member_reads_is_said_in_chinese(zh, world, browser):
    client = browser(zh)
    waiting = client.get(reverse("console:confirmation", args=[world["waiting"].pk]))
    page = waiting.content.decode()
    # The summary, blast radius and reasons are stored in English and read in Chinese.
    assert "王伟 的智能体想要运行 im_send（高风险）。" in page
    assert "发送给 14 人：全体员工中的 12 人和按姓名指定的 2 人。" in page
    assert "该工具声明为高风险" in page
    assert "wants to run" not in page
    alerts_page = client.get(reverse("console:alerts")).content.decode()
    assert "拒绝请求激增：1 次" in alerts_page and "严重" in alerts_page
    rules = client.get(reverse("console:alert_rules")).content.decode()
    assert "邮件：ops@acme.test" in rules and "IM 消息：王伟" in rules
    bench = client.post(
        reverse("console:masking_bench"), {"text": "请联系华星的张经理，电话 13812345678。"}
    )
    assert bench.status_code == 200
    result = bench.content.decode()
    assert "模型收到的内容" in result and "检测结果" in result
    assert _english(result) == []
    chain = client.post(
        reverse("console:policy_chain_edit"),
        {"op": "toggle", "index": "9", "version": "1", "template": ""},
    )
    assert "未知的更改" in chain.content.decode()
    search = client.get(reverse("console:memory_search"), {"q": "周报"}).content.decode()
    assert "“周报”共有" in search and "得分" in search


def test_the_memory_viewer_api_and_catalog_speak_the_readers_language(zh, world, browser):
    client = browser(zh)
    quality = client.get("/api/v1/memory-viewer/quality/").json()
    names = {figure["key"]: figure["name"] for figure in quality["figures"]}
    assert names["recall_hit_rate"] == "召回命中率"
    # The console's JavaScript catalog carries the viewer's and the live queue's words.
    catalog = client.get(reverse("console:javascript_catalog"))
    assert catalog.status_code == 200
    text = catalog.content.decode()
    for chinese in ("正在后台计算地图", "实时更新已暂停"):
        assert chinese in text or json.dumps(chinese)[1:-1] in text  # as written, or escaped


def test_an_english_colleague_sees_english(en, world, browser):
    client = browser(en)
    waiting = client.get(reverse("console:confirmation", args=[world["waiting"].pk]))
    page = waiting.content.decode()
    assert "王伟&#x27;s agent wants to run im_send (high risk)." in page
    assert "Sends to 14 people: 12 people in 全体员工 and 2 people by name." in page
    assert "What will happen" in page and "将会发生什么" not in page
    assert "Spike of denied requests: 1" in client.get(reverse("console:alerts")).content.decode()
    policies = client.get(reverse("console:policies")).content.decode()
    assert "Every agent input, retrieved text" in policies and "策略链" not in policies
    memory = client.get(reverse("console:memory")).content.decode()
    assert "What agents remember" in memory and "智能体记住的内容" not in memory
    exports = client.get(reverse("console:audit_exports")).content.decode()
    assert "Export the audit log" in exports and "导出审计日志" not in exports
    viewer = client.get(reverse("console:memory_quality")).content.decode()
    assert "Memory quality" in viewer


def test_sentences_stay_english_where_they_are_stored(zh, world):
    """The record keeps English (the audit log's and the API's language); only its reading
    is translated."""
    waiting = world["waiting"]
    assert waiting.summary.startswith("王伟's agent wants to run im_send (high risk).")
    with translation.override("zh-hans"):
        assert blast_radius_sentence({"records": 3}) == "修改 3 条记录。"
        assert waiting.summary_text.startswith("王伟 的智能体想要运行 im_send")
    with translation.override("en"):
        assert waiting.summary_text == waiting.summary
        assert blast_radius_sentence({"records": 3}) == "Changes 3 records."
