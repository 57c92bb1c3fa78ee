"""The agents area in the reader's language (issue #33): a member who reads Chinese meets no
English sentence on its pages (agents, an agent, a session's transcript and call chain; role
templates, a template, a version, the editor in both views, new, generate and compare;
deployments, a deployment and dispatch; chat; evaluation, a suite and a replay; models and a
provider; MCP servers and a server), and an English colleague in the same organization sees
the same pages in English."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils import timezone, translation

from cadre.agents import services
from cadre.agents.evaluation import services as evaluation
from cadre.agents.models import Agent, McpServer, ModelProviderConfig
from cadre.agents.runtime.lifecycle import execution as engine
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.llm.tool_sentences import failure_sentence, request_sentence, tool_sentence
from cadre.tenancy.actors import member_actor
from tests.factories import PositionFactory
from tests.i18n.untranslated import english_sentences

pytestmark = pytest.mark.django_db

TOOLS = {
    "memory_search": {"risk": "low", "confirmation": "never"},
    "im_send": {"risk": "medium", "confirmation": "high_risk"},
}
HOOKS_OFF = {
    "assemble_context": [{"name": "memory_retrieval", "enabled": False}],
    "process_memory": [{"name": "memory_write", "enabled": False}],
}


def _run(member, agent, text, session=None):
    run = runtime.run_start(actor=member_actor(member), agent=agent, text=text, session=session)
    with translation.override("zh-hans"):  # a worker answers in the member's language
        engine.run_execute(run.pk)
    run.refresh_from_db()
    return run


@pytest.fixture
def world(zh, bob):
    bob.display_name = "王伟"
    bob.save(update_fields=["display_name"])
    owner = member_actor(zh)
    sales = PositionFactory(organization=zh.organization, name="销售", code="xiao-shou")
    zh.organization.name = "艾克米"
    zh.organization.save(update_fields=["name"])
    zh.positions.add(sales)
    bob.positions.add(sales)
    template = services.template_create(
        actor=owner,
        name="销售助手",
        code="xiao-shou-zhu-shou",
        agent_md="# 角色\n你帮助{{member.display_name}}销售。",
        sop="# 流程\n## 定价\n标准折扣为百分之五。\n",
        user_md_template="# 关于{{member.display_name}}",
        tool_permissions=TOOLS,
        model_settings={"provider": "offline", "model": "offline-1"},
        memory_policy={"read_scopes": ["agent", "user"], "write_scopes": ["agent"]},
        hooks=HOOKS_OFF,
    )
    first = template.versions.get()
    services.version_submit(actor=owner, version=first)
    published = services.version_publish(actor=owner, version=first, reason="已审核")
    deployment = services.deployment_create(
        actor=owner, name="销售团队", template=template, version=published, positions=[sales]
    )
    agent = Agent.objects.get(deployment=deployment, member=zh)
    run = _run(zh, agent, "标准折扣是多少？")
    draft = services.version_draft(actor=owner, template=template)
    services.version_update(actor=owner, version=draft, sop="# 流程\n请询问你的经理。")
    suite = evaluation.suite_create(actor=owner, name="销售对话", template=template)
    evaluation.case_create(
        actor=owner,
        suite=suite,
        data={"title": "折扣", "input": "标准折扣是多少？", "required_facts": ["百分之五"]},
    )
    replay = evaluation.eval_run_start(
        actor=owner, suite=suite, candidate={"kind": "template_version", "version": draft.pk}
    )
    with translation.override("zh-hans"):
        evaluation.eval_run_execute(replay.pk)
    provider = ModelProviderConfig.objects.create(
        organization=zh.organization,
        name="本地模型",
        kind=ModelProviderConfig.Kind.OPENAI_COMPATIBLE,
        base_url="http://llm.test/v1",
        default_model="qwen-7b",
    )
    server = McpServer.objects.create(
        organization=zh.organization,
        name="ke-hu",
        description="客户管理系统",
        transport=McpServer.Transport.STREAMABLE_HTTP,
        url="http://crm.test/mcp",
        tools=[
            {"name": "get_contact", "description": "查找联系人。", "annotations": {}},
            {
                "name": "delete_contact",
                "description": "删除联系人。",
                "annotations": {"destructiveHint": True},
            },
        ],
        discovered_at=timezone.now(),
    )
    return {
        "template": template,
        "published": published,
        "draft": draft,
        "deployment": deployment,
        "agent": agent,
        "run": run,
        "suite": suite,
        "replay": replay,
        "provider": provider,
        "server": server,
    }


def _pages(world) -> list[str]:
    template = world["template"].pk
    run = world["run"]
    return [
        reverse("console:agents"),
        reverse("console:agents") + "?q=nothing-matches-this",
        reverse("console:agent", args=[world["agent"].pk]),
        reverse("console:session", args=[run.session_id]),
        reverse("console:run_call_chain", args=[run.pk]),
        reverse("console:templates"),
        reverse("console:templates") + "?q=nothing-matches-this",
        reverse("console:template_create"),
        reverse("console:template", args=[template]),
        reverse("console:template_version", args=[template, world["published"].number]),
        reverse("console:template_version", args=[template, world["draft"].number]),
        reverse("console:template_version_edit", args=[template, world["draft"].number]),
        reverse("console:template_version_edit", args=[template, world["draft"].number])
        + "?view=json",
        reverse("console:template_generate", args=[template]),
        reverse("console:template_diff", args=[template]) + "?a=1&b=2&layout=unified",
        reverse("console:template_diff", args=[template]) + "?a=1&b=2&layout=split",
        reverse("console:deployments"),
        reverse("console:deployment", args=[world["deployment"].pk]),
        reverse("console:deployment_create"),
        reverse("console:chat") + "?pick",
        reverse("console:chat_agent", args=[world["agent"].pk]),
        reverse("console:chat_session", args=[run.session_id]),
        reverse("console:evaluation"),
        reverse("console:evaluation_suite", args=[world["suite"].pk]),
        reverse("console:evaluation_run", args=[world["replay"].pk]),
        reverse("console:models"),
        reverse("console:provider_create") + "?preset=openai",
        reverse("console:provider_edit", args=[world["provider"].pk]),
        reverse("console:mcp_servers"),
        reverse("console:mcp_server", args=[world["server"].pk]),
    ]


# Product and protocol names the pages name as they are (model providers, MCP transports).
NAMES = {
    "Studio",
    "Moonshot",
    "Kimi",
    "Zhipu",
    "DashScope",
    "LiteLLM",
    "OneAPI",
    "Streamable",
    "stdio",
}


def _codes() -> set[str]:
    """The built-in tools', hooks' and hook points' names: identifiers the editor shows as
    they are (in the hooks' aria-labels too)."""
    from cadre.agents.hooks.registry import _REGISTRY
    from cadre.agents.tools.registry import all_tools

    hooks = {name for registered in _REGISTRY.values() for name in registered}
    return {tool.name for tool in all_tools()} | hooks | set(_REGISTRY)


def _english(page: str) -> list[str]:
    allowed = NAMES | _codes()
    return [
        phrase
        for phrase in english_sentences(page)
        if not set(phrase.replace(",", " ").split()) <= allowed
    ]


def test_every_page_reads_in_chinese_for_a_chinese_member(zh, world, browser):
    client = browser(zh)
    problems = {}
    for url in _pages(world):
        response = client.get(url)
        assert response.status_code == 200, url
        found = _english(response.content.decode())
        if found:
            problems[url] = found
    assert problems == {}


def test_pages_say_it_in_chinese(zh, world, browser):
    client = browser(zh)
    listing = client.get(reverse("console:agents")).content.decode()
    assert "智能体与会话" in listing and "输入 / 输出 Token" in listing
    deployment = client.get(reverse("console:deployment", args=[world["deployment"].pk]))
    assert "为新目标添加智能体" in deployment.content.decode()
    edit = client.get(
        reverse("console:template_version_edit", args=[world["template"].pk, 2])
    ).content.decode()
    assert "钩子流水线" in edit and '允许 <span translate="no">im_send</span>' in edit
    evaluation_home = client.get(reverse("console:evaluation")).content.decode()
    assert "门槛" in evaluation_home and "评估集" in evaluation_home
    mcp = client.get(reverse("console:mcp_server", args=[world["server"].pk])).content.decode()
    assert "默认（高）" in mcp and "保存风险" in mcp


def test_an_english_colleague_sees_english(en, world, browser):
    client = browser(en)
    listing = client.get(reverse("console:agents")).content.decode()
    assert "Agents &amp; sessions" in listing and "Tokens in / out" in listing
    run = world["run"]
    session = client.get(reverse("console:session", args=[run.session_id]))
    if session.status_code == 200:  # transcripts are personal: only where she may read them
        assert "Call chain" in session.content.decode()
    edit = client.get(
        reverse("console:template_version_edit", args=[world["template"].pk, 2])
    ).content.decode()
    assert "Hook pipeline" in edit and 'Allow <span translate="no">im_send</span>' in edit
    evaluation_home = client.get(reverse("console:evaluation")).content.decode()
    assert "Gates" in evaluation_home and "Suites" in evaluation_home
    mcp = client.get(reverse("console:mcp_server", args=[world["server"].pk])).content.decode()
    assert "Default (high)" in mcp and "Save risks" in mcp
    # The Chinese colleague's pages did not change the English one's.
    assert "智能体与会话" not in listing and "钩子流水线" not in edit


def test_tool_sentences_in_the_readers_language():
    sent = {"status": "sent", "recipients": [{"member": 1, "name": "王伟"}]}
    with translation.override("zh-hans"):
        assert tool_sentence("im_send", sent) == "已发送给王伟。"
        assert failure_sentence("im_send", "no connector for channel feishu") == (
            "无法发送：尚未设置 IM 连接器。"
        )
        assert request_sentence("memory_write", {"content": "喜欢早上开会"}) == (
            "记住“喜欢早上开会”。"
        )
    with translation.override("en"):
        assert tool_sentence("im_send", sent) == "Sent to 王伟."
        assert failure_sentence("im_send", "no connector for channel feishu") == (
            "Could not send: no IM connector is set up."
        )
