"""The console's shell and its people pages in the reader's language (issue #33): sign-in,
home, members, departments, positions, API keys, audit log, organization, single sign-on,
usage and the error page read in Chinese for a member who chose it, in English for an English
colleague of the same organization; the language switcher saves the choice on the member."""

from __future__ import annotations

import json
import re

import pytest
from django.core import mail
from django.urls import reverse

from cadre.governance.models import AuditEvent
from cadre.tenancy import services
from cadre.tenancy.actors import member_actor
from cadre.tenancy.models import Member, Organization
from tests.factories import MemberFactory
from tests.i18n.untranslated import english_sentences

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(zh, bob):
    """A department with a sub-department, a position, a member in it with a pending
    invitation, an API key, a budget and an identity provider: every page has rows to show."""
    actor = member_actor(zh)
    bob.display_name = "王伟"
    bob.save(update_fields=["display_name"])
    sales = services.department_create(actor=actor, name="销售部")
    services.department_create(actor=actor, name="华东组", parent=sales)
    position = services.position_create(actor=actor, name="大客户销售", code="key-sales")
    services.member_update(actor=actor, member=bob, department=sales, positions=[position])
    services.member_invite(actor=actor, email="zhao@acme.test", display_name="赵敏")
    key, _secret = services.api_key_create(actor=actor, name="人事同步", scopes=["org:read"])
    return {"sales": sales, "position": position, "bob": bob, "key": key}


# Names that stay as they are: protocols and the identity providers' own product names, and
# the IdP's identifiers that a form field is named for.
NAMES = {
    "OpenID Connect",
    "Google Workspace",
    "Authing",
    "Shibboleth",
    "PingFederate",
    "IdP",
    "AgentId",
    "Entra",
    "Okta",
    "Keycloak",
    "AD FS",
}
# Options that are data, not sentences: time zone ids and each language's own name.
DATA_SELECTS = re.compile(r'<select name="(?:time_zone|locale)".*?</select>', re.S)


def _english(page: str) -> list[str]:
    page = DATA_SELECTS.sub("", page)
    found = []
    for phrase in english_sentences(page):
        rest = phrase
        for name in NAMES:
            rest = rest.replace(name, "")
        if re.search(r"[A-Za-z]{2,}", rest):
            found.append(phrase)
    return found


def _pages(world) -> list[str]:
    event = AuditEvent.objects.filter(organization=world["bob"].organization).first()
    return [
        reverse("console:home"),
        reverse("console:members"),
        reverse("console:member", args=[world["bob"].pk]),
        reverse("console:member_edit", args=[world["bob"].pk]),
        reverse("console:member_create"),
        reverse("console:member_invite"),
        reverse("console:member_deactivate", args=[world["bob"].pk]),
        reverse("console:departments"),
        reverse("console:department", args=[world["sales"].pk]),
        reverse("console:department_edit", args=[world["sales"].pk]),
        reverse("console:department_create"),
        reverse("console:positions"),
        reverse("console:position_edit", args=[world["position"].pk]),
        reverse("console:position_create"),
        reverse("console:api_keys"),
        reverse("console:api_key_create"),
        reverse("console:api_key_revoke", args=[world["key"].pk]),
        reverse("console:audit"),
        reverse("console:audit_event", args=[event.pk]),
        reverse("console:organization"),
        reverse("console:identity_providers"),
        reverse("console:identity_provider_new"),
        reverse("console:usage"),
        reverse("console:budget_create"),
    ]


def test_every_page_reads_in_chinese_for_a_chinese_member(zh, world, browser):
    client = browser(zh)
    problems = {}
    for url in _pages(world):
        response = client.get(url)
        assert response.status_code == 200, url
        page = response.content.decode()
        assert '<html lang="zh-hans">' in page, url
        english = _english(page)
        if english:
            problems[url] = english
    assert not problems, json.dumps(problems, ensure_ascii=False, indent=1)
    home = client.get(reverse("console:home")).content.decode()
    assert "概览" in home and "退出登录" in home and "最近动态" in home
    members = client.get(reverse("console:members")).content.decode()
    assert "成员" in members and "邀请使用控制台" in members


def test_the_activity_and_the_audit_log_speak_chinese(zh, world, browser):
    client = browser(zh)
    home = client.get(reverse("console:home")).content.decode()
    assert "你创建了部门“销售部”" in home or "你创建了部门 销售部" in home
    audit = client.get(reverse("console:audit")).content.decode()
    assert "审计日志" in audit and "时间（UTC）" in audit


def test_not_found_and_denied_pages_read_in_chinese(zh, bob, browser):
    missing = browser(zh).get(reverse("console:member", args=[987654]))
    assert missing.status_code == 404
    assert "此页面不存在" in missing.content.decode()
    assert _english(missing.content.decode()) == []
    bob.language = "zh-hans"
    bob.save(update_fields=["language"])
    denied = browser(bob).get(reverse("console:api_keys"))
    assert denied.status_code == 403
    body = denied.content.decode()
    assert "你无权访问此页面" in body and "apikey.view" in body


def test_sign_in_page_follows_the_browser_language(client):
    page = client.get(reverse("console:login"), HTTP_ACCEPT_LANGUAGE="zh-CN,zh;q=0.9")
    body = page.content.decode()
    assert "登录" in body and "邮箱" in body and "密码" in body
    assert _english(body) == []
    english = client.get(reverse("console:login"), HTTP_ACCEPT_LANGUAGE="en-US").content.decode()
    assert "Sign in" in english and "Password" in english


def test_an_invitation_opens_in_the_organizations_language(zh, client):
    Organization.objects.filter(pk=zh.organization_id).update(locale="zh-hans")
    zh.refresh_from_db()
    _member, _invitation, token = services.member_invite(
        actor=member_actor(zh), email="new@acme.test", display_name="新同事"
    )
    body = client.get(f"/invite/{token}/").content.decode()
    assert "加入 艾克美" in body and "创建账号并加入" in body
    assert _english(body) == []
    # A link that names no invitation names no organization either: the browser's language.
    gone = client.get("/invite/not-a-token/", HTTP_ACCEPT_LANGUAGE="zh-CN").content.decode()
    assert "此邀请链接无效" in gone and "邀请无效" in gone


def test_the_invitation_email_is_in_the_invitees_language(zh, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    Organization.objects.filter(pk=zh.organization_id).update(locale="zh-hans")
    zh.refresh_from_db()
    actor = member_actor(zh)
    _member, invitation, _token = services.member_invite(actor=actor, email="wu@acme.test")
    assert services.invitation_email(actor=actor, invitation=invitation, url="https://x/i/t/")
    message = mail.outbox[-1]
    assert "邀请你加入" in message.subject and "打开此链接" in message.body


def test_an_english_colleague_sees_english(zh, en, world, browser):
    client = browser(en)
    home = client.get(reverse("console:home")).content.decode()
    assert '<html lang="en">' in home
    assert "Overview" in home and "Sign out" in home and "概览" not in home
    members = client.get(reverse("console:members")).content.decode()
    assert "Invite to console" in members and "邀请" not in members
    detail = client.get(reverse("console:member", args=[world["bob"].pk])).content.decode()
    assert "Direct reports" in detail and "IM accounts" in detail
    audit = client.get(reverse("console:audit")).content.decode()
    assert "Audit log" in audit and "审计日志" not in audit


def test_the_switcher_changes_the_language_and_keeps_it_on_the_member(en, browser):
    client = browser(en)
    home = client.get(reverse("console:home")).content.decode()
    assert 'data-testid="language-switcher"' in home and "简体中文" in home
    response = client.post(
        reverse("console:set_language"), {"language": "zh-hans", "next": reverse("console:home")}
    )
    assert response.status_code == 302 and response["Location"] == reverse("console:home")
    assert Member.objects.get(pk=en.pk).language == "zh-hans"
    home = client.get(reverse("console:home")).content.decode()
    assert '<html lang="zh-hans">' in home and "概览" in home
    client.post(reverse("console:set_language"), {"language": "en"})
    assert Member.objects.get(pk=en.pk).language == "en"
    assert "Overview" in client.get(reverse("console:home")).content.decode()


def test_the_sign_in_page_has_the_switcher(client):
    page = client.get(reverse("console:login")).content.decode()
    assert 'data-testid="language-switcher"' in page and "简体中文" in page
    client.post(reverse("console:set_language"), {"language": "zh-hans"})
    assert "密码" in client.get(reverse("console:login")).content.decode()


def test_an_admin_sets_a_members_language_on_the_edit_form(zh, bob, browser):
    client = browser(zh)
    page = client.get(reverse("console:member_edit", args=[bob.pk])).content.decode()
    assert 'name="language"' in page
    data = {
        "display_name": bob.display_name,
        "email": bob.email,
        "roles": bob.roles,
        "language": "zh-hans",
    }
    response = client.post(reverse("console:member_edit", args=[bob.pk]), data)
    assert response.status_code == 302
    assert Member.objects.get(pk=bob.pk).language == "zh-hans"


def test_role_labels_follow_the_reader(zh, en, browser):
    MemberFactory(organization=zh.organization, display_name="周杰", roles=["auditor"])
    chinese = browser(zh).get(reverse("console:organization")).content.decode()
    assert "审计员" in chinese and "IT 管理员" in chinese
    english = browser(en).get(reverse("console:organization")).content.decode()
    assert "Auditor" in english and "IT admin" in english


def test_pages_shown_once_after_a_create_read_in_chinese(zh, browser):
    """The invitation link, a new API key and a new SCIM token: each page is shown once."""
    client = browser(zh)
    invited = client.post(
        reverse("console:member_invite"),
        {"email": "qian@acme.test", "display_name": "钱多多", "roles": ["employee"]},
    )
    key = client.post(
        reverse("console:api_key_create"), {"name": "审计导出", "scopes": ["audit:read"]}
    )
    token = client.post(reverse("console:scim_token_create"), {"name": "企业目录"})
    for response, words in (
        (invited, "邀请链接"),
        (key, "请立即复制密钥"),
        (token, "请立即复制令牌"),
    ):
        assert response.status_code == 200
        body = response.content.decode()
        assert words in body
        assert _english(body) == [], body


def test_sso_pages_read_in_chinese(zh, client):
    from django.template.loader import render_to_string
    from django.utils import translation

    provider = type(
        "Provider",
        (),
        {"name": "飞书", "slug": "feishu", "organization": zh.organization, "pk": 1},
    )()
    with translation.override("zh-hans"):
        refused = render_to_string(
            "console/sso_refused.html",
            {"provider": provider, "message": "你的账号未获授权。", "reason": "not_allowed"},
        )
        signed_out = render_to_string("console/sso_signed_out.html", {"provider": provider})
    assert "登录被拒绝" in refused and "原因代码" in refused
    assert "已退出登录" in signed_out
    assert _english(refused) == [] and _english(signed_out) == []
