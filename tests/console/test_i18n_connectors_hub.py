"""The connectors, Skills Hub and skill review pages in the reader's language (issue #33): a
member who reads Chinese meets no English sentence on any of them (connector list, add, detail,
bindings, identities, map, rotate, import preview; Hub browse, package, version, file, install,
distribution; review inbox, candidate, proposals, stages), an English colleague in the same
organization sees the same pages in English."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from cadre.agents.models import Agent, AgentTemplate, Deployment, Run
from cadre.skills import services as skill_services
from cadre.skills.models import SkillProposal
from cadre.tenancy.actors import member_actor
from cadre.tenancy.models import Department, IMIdentity, Position
from connectors.base import services
from connectors.models import ConnectorBinding, UnmappedIdentity
from hub.models import SkillInstall
from hub.tests.agent_setup import deploy, template_with_skills
from hub.tests.factories import publish
from hub.tests.skill_samples import skill_files
from tests.api.tenant_objects import FACTORIES
from tests.i18n.untranslated import english_sentences
from tests.skills.conftest import skill_md

pytestmark = pytest.mark.django_db

SECRET = "whsec-i18n-0123456789abcdef"
SKILL = "bao-xiao"  # an identifier: stays as it is in every language


@pytest.fixture(autouse=True)
def _signing_key(settings, tmp_path, monkeypatch):
    from cadre import signing

    monkeypatch.delenv("CADRE_SIGNING_KEY", raising=False)
    monkeypatch.delenv("CADRE_SIGNING_KEY_FILE", raising=False)
    settings.DATA_DIR = tmp_path
    signing.forget_key()
    yield
    signing.forget_key()


@pytest.fixture
def world(zh, bob):
    """A connector with a binding, a mapped account and one waiting; a Hub skill installed on
    agents with an update offered; a skill candidate in review and a proposal waiting."""
    bob.display_name = "王伟"
    bob.save(update_fields=["display_name"])
    connector = services.connector_create(
        actor=member_actor(zh),
        platform="webhook",
        name="总部 Webhook",
        credentials={"signing_secret": SECRET},
        settings={},
    )
    binding = ConnectorBinding.objects.create(
        organization=zh.organization, connector=connector, name="销售团队"
    )
    binding.members.add(bob)
    unmapped = UnmappedIdentity.objects.create(
        organization=zh.organization,
        connector=connector,
        platform_user_id="u-9",
        display_name="张三",
        message_count=2,
    )
    IMIdentity.objects.create(
        organization=zh.organization,
        member=bob,
        platform="webhook",
        platform_user_id="u-7",
        display_name="王伟",
    )
    files = skill_files(SKILL, description="填写并合并报销单。", body="# 报销\n\n合并文件。\n")
    publish(zh, name=SKILL, version="1.0.0", files=files)
    template = template_with_skills(zh, [{"package": f"@acme/{SKILL}", "range": "^1"}])
    AgentTemplate.objects.filter(pk=template.pk).update(name="报销助手")
    deployment, agents = deploy(zh, template, zh, bob)
    for agent in agents.values():
        Agent.objects.filter(pk=agent.pk).update(name=f"{agent.member.display_name}的助手")
    version = publish(zh, name=SKILL, version="1.1.0", files=files)
    install = SkillInstall.objects.filter(agent=agents[bob.pk]).get()
    candidate = skill_services.candidate_create(
        actor=member_actor(bob),
        source="upload",
        files={
            "SKILL.md": skill_md("fang-ke", "准备客户拜访的议程和参会人", ["写议程", "列出参会人"])
        },
        requested_by=bob,
    )
    run = FACTORIES[Run](zh)
    proposal = SkillProposal.objects.create(
        organization=zh.organization,
        member=zh,
        run=run,
        session=run.session,
        kind=SkillProposal.Kind.NEW_SKILL,
        name="zhou-bao",
        summary="每周五写周报。",
        correction="下次也写上风险。",
        drafted_by="离线规则",
        files={"SKILL.md": "---\nname: zhou-bao\n---\n写周报。\n"},
    )
    # What the factories named in English gets a Chinese name, as a Chinese organization's would.
    for number, position in enumerate(Position.objects.filter(organization=zh.organization)):
        Position.objects.filter(pk=position.pk).update(name=f"岗位{number + 1}")
    for number, department in enumerate(Department.objects.filter(organization=zh.organization)):
        Department.objects.filter(pk=department.pk).update(name=f"部门{number + 1}")
    for number, deployment in enumerate(Deployment.objects.filter(organization=zh.organization)):
        Deployment.objects.filter(pk=deployment.pk).update(name=f"部署{number + 1}")
    for number, template in enumerate(AgentTemplate.objects.filter(organization=zh.organization)):
        AgentTemplate.objects.filter(pk=template.pk).update(name=f"助手模板{number + 1}")
    return {
        "connector": connector,
        "unmapped": unmapped,
        "version": version,
        "install": install,
        "candidate": candidate,
        "proposal": proposal,
        "template": template,
    }


def _pages(world) -> list[str]:
    connector = world["connector"].pk
    version = world["version"]
    return [
        reverse("console:connectors"),
        reverse("console:connector_create"),
        reverse("console:connector_create") + "?platform=webhook",
        reverse("console:connector", args=[connector]),
        reverse("console:connector_bindings", args=[connector]),
        reverse("console:connector_identities", args=[connector]),
        reverse("console:connector_unmapped_map", args=[connector, world["unmapped"].pk]),
        reverse("console:connector_rotate", args=[connector]),
        reverse("console:hub"),
        reverse("console:hub") + "?q=报销",
        reverse("console:hub") + "?q=nothing-matches-this",
        reverse("console:hub_package", args=["acme", SKILL]),
        reverse("console:hub_template_install", args=["acme", SKILL])
        + f"?template={world['template'].pk}",
        reverse("console:hub_version", args=["acme", SKILL, version.version]),
        reverse("console:hub_file", args=["acme", SKILL, version.version, "SKILL.md"]),
        reverse("console:hub_install", args=[world["install"].pk]),
        reverse("console:hub_install_apply", args=[world["install"].pk]),
        reverse("console:hub_distribution"),
        reverse("console:hub_distribution") + "?pending=1",
        reverse("console:skill_reviews") + "?view=in_review",
        reverse("console:skill_reviews"),
        reverse("console:skill_review", args=[world["candidate"].pk]),
        reverse("console:skill_proposals"),
        reverse("console:skill_review_stages"),
    ]


def _english(page: str) -> list[str]:
    """English a Chinese reader meets on the page."""
    return english_sentences(_without_install_history(page))


def _without_install_history(page: str) -> str:
    """An install's history rows quote the reason and actor hub.distribution stored in English
    when the event happened (data written before any reader is known); the page around them
    is checked."""
    start = page.find('<table class="table" data-testid="install-history">')
    if start < 0:
        return page
    return page[:start] + page[page.index("</table>", start) :]


def test_every_page_reads_in_chinese_for_a_chinese_member(zh, world, browser):
    client = browser(zh)
    problems = {}
    for url in _pages(world):
        response = client.get(url)
        assert response.status_code == 200, url
        page = response.content.decode()
        found = _english(page)
        if found:
            problems[url] = found
    assert problems == {}, "\n".join(f"{url}: {found}" for url, found in problems.items())


def test_import_preview_and_health_read_in_chinese(zh, world, browser):
    client = browser(zh)
    connector = world["connector"]
    upload = SimpleUploadedFile(
        "ids.csv", b"platform_user_id,member_email\nu-8,bob@acme.test\nu-10,nobody@acme.test\n"
    )
    response = client.post(
        reverse("console:connector_identity_import", args=[connector.pk]), {"file": upload}
    )
    page = response.content.decode()
    assert "导入预览" in page
    # The rows' own error messages come from the importer; the page around them is checked.
    head = page.split('<table class="table" data-testid="import-rows">')[0]
    assert _english(head) == []
    # A connector with failures: its health sentence reads in Chinese on the list.
    type(connector).objects.filter(pk=connector.pk).update(signature_rejections=7, failures=3)
    listing = client.get(reverse("console:connectors")).content.decode()
    assert "签名校验拒绝 7 次" in listing and "失败 3 次" in listing
    assert "需关注" in listing
    assert _english(listing) == []


def test_an_english_colleague_sees_english(en, world, browser):
    client = browser(en)
    connector = world["connector"].pk
    listing = client.get(reverse("console:connectors")).content.decode()
    assert "Add connector" in listing and "Signature rejections" in listing
    detail = client.get(reverse("console:connector", args=[connector])).content.decode()
    assert "Recent failures" in detail and "Rotate credentials" in detail
    hub = client.get(reverse("console:hub")).content.decode()
    assert "Skills Hub" in hub and "Success rate" in hub
    inbox = client.get(reverse("console:skill_reviews") + "?view=in_review").content.decode()
    assert "Skill reviews" in inbox and "Review stages" in inbox
    review = client.get(reverse("console:skill_review", args=[world["candidate"].pk]))
    assert "Decisions and comments" in review.content.decode()
    # The Chinese colleague's pages did not change the English one's.
    assert "技能中心" not in hub and "连接器" not in listing
