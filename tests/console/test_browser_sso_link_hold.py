# ruff: noqa: F811 - the fixtures imported from other test modules are parameters here
"""A member held for single sign-on, in a real browser (Debian's Chromium through Playwright,
pages served by uvicorn), in English and in Chinese: a colleague's e-mail changed in the
console's edit form holds them (docs/identity.md, "Whoever edits colleagues cannot become
one"); their page says so, and offers an owner "Allow single sign-on" behind a confirmation,
which lifts the hold; an IT admin is offered no such button, and the hold stays. The Chinese
pages hold no English sentence (tests/i18n/untranslated.py). Screenshots in
var/screenshots/sso-hold-*.png (git-ignored)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from cadre.governance.models import AuditEvent
from cadre.tenancy.models import Member
from tests.console.test_browser_chat import (  # noqa: F401 - fixtures and page helpers
    browser_page,
    chromium,
    expect,
    live_server_url,
)
from tests.console.test_browser_navigation import LAYOUT_PROBLEMS, SHOTS
from tests.console.test_browser_saml_export_zh import (  # noqa: F401 - a fixture, a helper
    owner,
    signed_in,
)
from tests.i18n.untranslated import english_sentences

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
LANGUAGES = ["en", "zh-hans"]
# Names the test world holds in English whatever the reader's language (tests/conftest.py).
DATA = {"Acme", "Alice", "Bob", "Ivan"}
NEW_EMAIL = "bob.personal@acme.test"

# What the pages say, in each language (the Chinese as the catalog has it).
WORDS = {
    "en": {
        "save": "Save changes",
        "updated": "Bob was updated.",
        "held": "Someone other than this member changed the e-mail, employee number or IM "
        "account single sign-on finds them by. Until they sign in through an account already "
        "theirs, or an owner allows it, no new single sign-on account can take over this member.",
        "allow": "Allow single sign-on",
        "confirm": "Allow single sign-on to link Bob's account? Do this when you know the "
        "e-mail, employee number and IM accounts shown here are theirs.",
        "allowed": "Single sign-on may link Bob's account again.",
    },
    "zh-hans": {
        "save": "保存更改",
        "updated": "已更新 Bob。",
        "held": "该成员以外的人修改了单点登录用来识别其身份的邮箱、工号或 IM 账号。"
        "在其通过自己已有的账号登录一次、或所有者允许之前，任何新的单点登录账号都不能接管此成员。",
        "allow": "允许单点登录",
        "confirm": "允许单点登录关联 Bob 的账号？"
        "请在确认此处显示的邮箱、工号和 IM 账号确属其本人后再操作。",
        "allowed": "单点登录已可再次关联 Bob 的账号。",
    },
}


def read(page, language: str, name: str) -> None:
    """The page as it stands: nothing overflowing, and in Chinese no English sentence left; a
    screenshot."""
    page.wait_for_load_state("networkidle")
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"sso-hold-{name}-{language}.png"), full_page=True)
    assert not page.evaluate(LAYOUT_PROBLEMS), name
    if language != "en":
        english = [phrase for phrase in english_sentences(page.content()) if phrase not in DATA]
        assert not english, f"{name}: English on a Chinese page: {sorted(set(english))}"


def edit_bobs_email(page, bob, words: dict) -> None:
    """The member edit form: a new e-mail for Bob, saved, back on his page."""
    page.locator("#id_email").fill(NEW_EMAIL)
    page.get_by_role("button", name=words["save"], exact=True).click()
    page.wait_for_url(f"**{reverse('console:member', args=[bob.pk])}")
    expect(page.locator(".flashes")).to_contain_text(words["updated"])


def allow(page, words: dict) -> list[str]:
    """Press "Allow single sign-on" and accept the confirmation; what the dialog asked."""
    asked: list[str] = []

    def accept(dialog) -> None:
        asked.append(dialog.message)
        dialog.accept()

    page.once("dialog", accept)
    with page.expect_navigation():
        page.get_by_role("button", name=words["allow"], exact=True).click()
    return asked


def held_notice(page, words: dict):
    return page.locator(".alert-warning", has_text=words["held"])


@pytest.mark.parametrize("owner", LANGUAGES, indirect=True)
def test_an_owner_allows_single_sign_on_for_a_colleague_whose_email_they_changed(
    chromium, live_server_url, owner, bob
):
    language = owner.language
    words = WORDS[language]
    with browser_page(chromium, live_server_url) as page:
        signed_in(page, owner, reverse("console:member_edit", args=[bob.pk]))
        edit_bobs_email(page, bob, words)
        notice = held_notice(page, words)
        expect(notice).to_contain_text(words["held"])
        expect(notice.get_by_role("button", name=words["allow"], exact=True)).to_be_visible()
        read(page, language, "held-owner")
        assert Member.objects.get(pk=bob.pk).sso_link_held

        asked = allow(page, words)
        assert asked == [words["confirm"]]
        expect(page.locator(".flashes .alert-success")).to_have_text(words["allowed"])
        expect(page.get_by_text(words["held"])).to_have_count(0)
        expect(page.get_by_role("button", name=words["allow"])).to_have_count(0)
        read(page, language, "allowed-owner")

    bob.refresh_from_db()
    assert bob.sso_link_held is False and bob.email == NEW_EMAIL
    event = AuditEvent.objects.get(action="member.sso_link_allow", target_id=str(bob.pk))
    assert event.actor_type == "member" and event.actor_id == str(owner.pk)


@pytest.mark.parametrize("language", LANGUAGES)
def test_an_it_admin_who_changed_a_colleagues_email_cannot_allow_single_sign_on(
    chromium, live_server_url, make_member, bob, language
):
    words = WORDS[language]
    ivan = make_member(
        roles=["it_admin"], email="ivan@acme.test", display_name="Ivan", language=language
    )
    with browser_page(chromium, live_server_url) as page:
        signed_in(page, ivan, reverse("console:member_edit", args=[bob.pk]))
        edit_bobs_email(page, bob, words)
        expect(held_notice(page, words)).to_contain_text(words["held"])
        held = Member.objects.get(pk=bob.pk)
        assert held.sso_link_held

        # Only an owner lifts a hold: the IT admin is told so, and offered no button.
        expect(page.get_by_role("button", name=words["allow"])).to_have_count(0)
        read(page, language, "refused-it-admin")

    assert Member.objects.get(pk=bob.pk).sso_link_held
    assert not AuditEvent.objects.filter(action="member.sso_link_allow").exists()
