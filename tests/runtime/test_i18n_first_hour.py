"""The first hour in the installer's language: `make up` / `cadre doctor` print in it, the demo
organization is created in it (Chinese templates, presets and sample data for a Chinese
installer), and agents are told the language of the person they answer."""

from __future__ import annotations

import contextlib
import json
import re
from io import StringIO

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import translation

from cadre.agents import services as agents
from cadre.agents.models import AgentTemplate, Run
from cadre.agents.runtime.lifecycle import execution as engine
from cadre.governance.models import Confirmation
from cadre.memory.models import Memory
from cadre.runtime.demo import DEMO_STRUCTURE_ZH, demo_setup, describe
from cadre.runtime.demo_data import CHINESE, MARK_ZH
from cadre.runtime.doctor import run_checks
from cadre.runtime.language import installer_language
from cadre.tenancy.actors import member_actor
from cadre.tenancy.languages import member_language
from cadre.tenancy.models import Department, Member, Position
from hub.models import SkillPackage
from tests.agents.fake_models import FakeModelServer
from tests.agents.test_memory_context import _agent, _run
from tests.i18n.untranslated import english_sentences_in_text

PASSPHRASE = "a-long-demo-passphrase-42"
CHINESE_LINE = "The person's preferred language: Simplified Chinese (zh-Hans)."
# Commands and names a Chinese sentence quotes as they are typed (and the test database's role).
COMMANDS = re.compile(
    r"`[^`]*`|cadre manage \S+|python manage\.py \S+|make \w+|npm ci|pip install"
    r"|apt install \S+|\bvector\b|\bpostgres\b|\bWeb\b"
)


def prose(text: str) -> list[str]:
    """The English phrases of `text` outside the commands and names it quotes."""
    return english_sentences_in_text(COMMANDS.sub(" ", text))


# --- installer_language() -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, "en"),
        ({"LANG": "C.UTF-8"}, "en"),
        ({"LANG": "en_US.UTF-8"}, "en"),
        ({"LANG": "zh_CN.UTF-8"}, "zh-hans"),
        ({"LANG": "zh_TW.UTF-8"}, "zh-hans"),  # Simplified is the only Chinese Cadre speaks
        # POSIX order: LC_ALL, then LC_MESSAGES, then LANG; the first one set decides
        ({"LC_ALL": "zh_CN.UTF-8", "LANG": "en_US.UTF-8"}, "zh-hans"),
        ({"LC_ALL": "C", "LANG": "zh_CN.UTF-8"}, "en"),
        ({"LC_MESSAGES": "zh_CN.UTF-8", "LANG": "en_GB.UTF-8"}, "zh-hans"),
        ({"LC_ALL": "", "LC_MESSAGES": "", "LANG": "zh_SG.UTF-8"}, "zh-hans"),
        # CADRE_LANGUAGE wins over the locale, spelt as a code or a locale
        ({"CADRE_LANGUAGE": "zh-hans", "LANG": "en_US.UTF-8"}, "zh-hans"),
        ({"CADRE_LANGUAGE": "zh-CN"}, "zh-hans"),
        ({"CADRE_LANGUAGE": "zh_Hans"}, "zh-hans"),
        ({"CADRE_LANGUAGE": "en", "LC_ALL": "zh_CN.UTF-8"}, "en"),
        ({"CADRE_LANGUAGE": " ", "LANG": "zh_CN.UTF-8"}, "zh-hans"),
    ],
)
def test_installer_language_follows_cadre_language_then_the_locale(environ, expected):
    assert installer_language(environ) == expected


def test_an_unsupported_cadre_language_names_the_variable():
    with pytest.raises(ImproperlyConfigured, match="CADRE_LANGUAGE: 'fr'"):
        installer_language({"CADRE_LANGUAGE": "fr", "LANG": "zh_CN.UTF-8"})


def test_the_locale_is_read_from_the_environment(monkeypatch):
    monkeypatch.delenv("CADRE_LANGUAGE")
    monkeypatch.delenv("LC_ALL", raising=False)
    monkeypatch.delenv("LC_MESSAGES", raising=False)
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    assert installer_language() == "zh-hans"
    monkeypatch.setenv("LANG", "en_US.UTF-8")
    assert installer_language() == "en"


# --- the demo organization in Chinese -------------------------------------------------------


@pytest.fixture
def chinese_demo(db, monkeypatch):
    monkeypatch.setenv("CADRE_LANGUAGE", "zh-hans")
    monkeypatch.setenv("CADRE_DEMO_PASSWORD", PASSPHRASE)
    return demo_setup()


def test_a_chinese_installer_gets_the_demo_organization_in_chinese(chinese_demo):
    organization = chinese_demo.organization
    assert organization.locale == "zh-hans" and organization.name == "演示公司"
    assert organization.slug == "demo"
    owner = Member.objects.get(organization=organization, email=chinese_demo.email)
    assert owner.display_name == "演示管理员"
    departments = set(
        Department.objects.filter(organization=organization).values_list("name", flat=True)
    )
    assert departments == set(DEMO_STRUCTURE_ZH)
    positions = Position.objects.filter(organization=organization)
    assert {p.name for p in positions} == {n for names in DEMO_STRUCTURE_ZH.values() for n in names}
    assert all(p.code.isascii() and p.code for p in positions)  # codes stay identifiers

    templates = {t.code: t for t in AgentTemplate.objects.filter(organization=organization)}
    assert set(templates) == {"demo-sales", "demo-support", "demo-it-ops"}
    assert all(t.name.endswith(MARK_ZH) for t in templates.values())
    sales = templates["demo-sales"].versions.get()
    zh_sales = agents.presets("zh-hans")["sales"]
    assert sales.sop == zh_sales["sop"] and "销售助理 SOP" in sales.sop
    assert sales.agent_md == zh_sales["agent_md"] and "你是" in sales.agent_md
    # the preset's tools and settings are the English preset's, the demo's policy on top
    assert sales.tool_permissions["task_create"]["confirmation"] == "always"
    assert sales.model_settings["provider"] == "offline"
    assert templates["demo-sales"].description == zh_sales["description"] + CHINESE.note

    # The owner's agent speaks to a person whose USER.md is filled in Chinese.
    agent = chinese_demo.seed.agent
    assert agent.user_md.startswith("# 关于演示管理员")
    employee = Member.objects.get(organization=organization, roles=["employee"])
    assert employee.display_name == CHINESE.employee_name
    assert member_language(employee) == "zh-hans"  # the organization's default
    assert employee.positions.get().name == "客户经理"
    contents = set(
        Memory.objects.filter(organization=organization).values_list("content", flat=True)
    )
    assert contents == {content for _, _, content, _, _ in CHINESE.memories}
    skill = SkillPackage.objects.get(organization=organization)
    assert skill.name == "meeting-brief" and skill.display_name == CHINESE.skill_display_name


def test_the_chinese_demo_request_waits_on_a_confirmation(chinese_demo):
    run = Run.objects.get(agent=chinese_demo.seed.agent)
    assert run.input["text"] == CHINESE.confirmation_request
    assert engine.run_execute(run.pk) == Run.Status.WAITING
    confirmation = Confirmation.objects.get(run_id=run.pk)
    assert confirmation.tool == "task_create"
    assert confirmation.arguments["title"] == "把第三季度价目表发给销售团队"


def test_the_first_start_says_how_to_sign_in_in_chinese(chinese_demo):
    with translation.override("zh-hans"):
        text = "\n".join(describe(chinese_demo, "http://127.0.0.1:8000/"))
    assert "演示组织“演示公司”已创建" in text and PASSPHRASE in text
    assert "http://127.0.0.1:8000/chat/agents/" in text
    # The generated password is random letters, which can read as an English word.
    password = chinese_demo.seed.employee_password
    assert password and password in text  # created by this first start, shown once
    assert prose(text.replace(password, " ")) == []


def test_an_english_installer_keeps_the_english_demo(db, monkeypatch):
    monkeypatch.setenv("CADRE_DEMO_PASSWORD", PASSPHRASE)
    account = demo_setup()
    assert account.organization.locale == "en" and account.organization.name == "Demo Co"
    sales = AgentTemplate.objects.get(organization=account.organization, code="demo-sales")
    assert sales.versions.get().sop == agents.presets("en")["sales"]["sop"]


def test_presets_exist_in_both_languages():
    english, chinese = agents.presets("en"), agents.presets("zh-hans")
    assert set(english) == set(chinese)
    for key, preset in chinese.items():
        for field in ("name", "description", "sop", "agent_md", "user_md_template"):
            assert preset[field] != english[key][field], (key, field)
        # what is not text is shared
        assert preset["tool_permissions"] == english[key]["tool_permissions"]
        assert preset["code"] == english[key]["code"]
    with translation.override("zh-hans"):
        assert agents.presets()["sales"]["name"] == chinese["sales"]["name"]
    assert agents.presets()["sales"]["name"] == english["sales"]["name"]


# --- cadre doctor in Chinese ---------------------------------------------------------------


def _doctor() -> str:
    out = StringIO()
    with contextlib.suppress(CommandError):  # a FAIL on this machine still prints every line
        call_command("doctor", stdout=out)
    return out.getvalue()


def test_doctor_prints_in_chinese_for_a_chinese_installer(db, monkeypatch):
    monkeypatch.setenv("CADRE_LANGUAGE", "zh-hans")
    output = _doctor()
    assert "OK    database" in output  # statuses and names are identifiers
    assert "已全部应用" in output and "all applied" not in output
    assert "项 FAIL，" in output
    with translation.override("zh-hans"):
        checks = [c for c in run_checks() if not c.name.startswith("connector")]
    for check in checks:
        assert prose(f"{check.detail} {check.fix}") == [], check


def test_doctor_stays_english_for_an_english_installer(db):
    output = _doctor()
    assert "all applied" in output and "FAIL, " in output


# --- agents are told the person's language -------------------------------------------------


def _system_text(request: dict) -> str:
    return "\n".join(m["content"] for m in request["body"]["messages"] if m["role"] == "system")


def test_the_persons_language_reaches_the_model(alice, bob, make_member):
    bob.language = "zh-hans"
    bob.save(update_fields=["language"])
    carol = make_member(display_name="Carol", email="carol@acme.test")
    owner = member_actor(alice)
    with FakeModelServer([{"text": "好的。"}, {"text": "Sure."}]) as server:
        agent = _agent(owner, bob, server, code="zh-desk", agent_md="You help the desk.")
        _run(bob, agent, "你好，帮我看看这个订单。")
        english_agent = _agent(owner, carol, server, code="en-desk", agent_md="You help.")
        _run(carol, english_agent, "Hello, can you check this order?")

    chinese, english = server.requests
    system = _system_text(chinese)
    assert CHINESE_LINE in system
    assert "Answer in it unless they write in another language." in system
    # right after AGENT.md, in the cached prefix
    assert chinese["body"]["messages"][0]["content"].startswith(
        "You help the desk.\n\n" + CHINESE_LINE
    )
    # an English colleague in an English organization: nothing to tell, nothing wrong told
    assert "preferred language" not in json.dumps(english["body"], ensure_ascii=False)


def test_an_english_member_of_a_chinese_organization_is_told_english(alice, bob, org_a):
    org_a.locale = "zh-hans"
    org_a.save(update_fields=["locale"])
    bob.language = "en"
    bob.save(update_fields=["language"])
    with FakeModelServer([{"text": "Sure."}]) as server:
        agent = _agent(member_actor(alice), bob, server, code="en-in-zh", agent_md="你是助理。")
        _run(bob, agent, "Hello")
    system = _system_text(server.requests[0])
    assert "The person's preferred language: English (en)." in system
    assert "Simplified Chinese" not in system


def test_a_member_without_a_preference_gets_the_organizations_language(alice, bob, org_a):
    org_a.locale = "zh-hans"
    org_a.save(update_fields=["locale"])
    with FakeModelServer([{"text": "好的。"}]) as server:
        agent = _agent(member_actor(alice), bob, server, code="org-zh", agent_md="你是助理。")
        _run(bob, agent, "你好")
    assert CHINESE_LINE in _system_text(server.requests[0])
