"""Which language a person reads Cadre in (docs/i18n.md): the member's preference, else the
browser's, else the organization's default — in the console, the API (session or key) and for
a member provisioned over SCIM; the switcher saves the choice and refuses what it cannot keep."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from cadre.governance.models import AuditEvent
from cadre.tenancy.languages import member_language, remember_platform_locale, supported
from cadre.tenancy.models import Member
from tests.conftest import PASSWORD

pytestmark = pytest.mark.django_db

ZH = "zh-CN,zh;q=0.9,en;q=0.8"


def _signed_in(member) -> Client:
    client = Client()
    client.force_login(member.user)
    return client


def _language_of(response) -> str:
    return response.headers["Content-Language"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("zh-CN", "zh-hans"),
        ("zh_Hans", "zh-hans"),
        ("zh-Hans-CN", "zh-hans"),
        ("zh-MY", "zh-hans"),
        # A Traditional Chinese reader reads Simplified Chinese sooner than English (Django's
        # own fallback from a regional variant to a supported one of the same language).
        ("zh-TW", "zh-hans"),
        ("en-US", "en"),
        ("EN", "en"),
        ("fr", None),
        ("", None),
        ("zh\x00CN", None),
        ("\ud800", None),
        ("²", None),
        ("x" * 5000, None),
        (None, None),
        (42, None),
    ],
)
def test_supported_reads_locales_and_refuses_everything_else(value, expected):
    assert supported(value) == expected


def test_the_member_preference_beats_the_browser_and_the_browser_beats_the_organization(
    org_a, alice
):
    client = _signed_in(alice)
    # no preference, no header: the organization's default
    org_a.locale = "zh-hans"
    org_a.save(update_fields=["locale"])
    assert _language_of(client.get(reverse("console:home"))) == "zh-hans"
    # the browser asks for English: English
    english = client.get(reverse("console:home"), HTTP_ACCEPT_LANGUAGE="en-US,en;q=0.9")
    assert _language_of(english) == "en"
    # the member chose Chinese: Chinese whatever the browser asks
    alice.language = "zh-hans"
    alice.save(update_fields=["language"])
    chinese = client.get(reverse("console:home"), HTTP_ACCEPT_LANGUAGE="en-US,en;q=0.9")
    assert _language_of(chinese) == "zh-hans"
    assert "Accept-Language" in chinese.headers["Vary"]
    assert '<html lang="zh-hans"' in chinese.content.decode()


def test_a_browser_asking_for_chinese_gets_a_chinese_sign_in_page():
    page = Client().get(reverse("console:login"), HTTP_ACCEPT_LANGUAGE=ZH)
    assert page.status_code == 200
    assert _language_of(page) == "zh-hans"
    assert "登录" in page.content.decode()
    english = Client().get(reverse("console:login"))
    assert _language_of(english) == "en"


def test_the_switcher_saves_the_members_choice_and_audits_it(org_a, alice):
    client = _signed_in(alice)
    response = client.post(
        reverse("console:set_language"), {"language": "zh-hans", "next": "/console/members/"}
    )
    assert response.status_code == 302 and response.url == "/console/members/"
    alice.refresh_from_db()
    assert alice.language == "zh-hans"
    event = AuditEvent.objects.get(organization=org_a, action="member.language")
    assert "zh-hans" in str(event.changes)
    # another device, a browser asking for English: still Chinese
    other = _signed_in(alice)
    page = other.get(reverse("console:home"), HTTP_ACCEPT_LANGUAGE="en")
    assert _language_of(page) == "zh-hans"
    # back to "the browser's": the preference is cleared
    client.post(reverse("console:set_language"), {"language": ""})
    alice.refresh_from_db()
    assert alice.language == ""


@pytest.mark.parametrize("language", ["fr", "zh\x00", "x" * 300, "de-DE", "²"])
def test_the_switcher_refuses_a_language_it_cannot_keep_and_stores_nothing(org_a, alice, language):
    client = _signed_in(alice)
    response = client.post(reverse("console:set_language"), {"language": language})
    assert response.status_code == 400
    alice.refresh_from_db()
    assert alice.language == ""
    assert not AuditEvent.objects.filter(organization=org_a, action="member.language").exists()
    assert "django_language" not in response.cookies


def test_the_switcher_never_sends_anyone_off_site(alice):
    client = _signed_in(alice)
    for target in ("https://evil.example/", "//evil.example/", "javascript:alert(1)"):
        response = client.post(
            reverse("console:set_language"),
            {"language": "en", "next": target},
            HTTP_REFERER="https://evil.example/x",
        )
        assert response.status_code == 302
        assert response.url == reverse("console:home")


def test_signed_out_the_switcher_keeps_the_choice_in_a_cookie():
    client = Client()
    response = client.post(reverse("console:set_language"), {"language": "zh-hans"})
    assert response.status_code == 302 and response.url == reverse("console:login")
    assert response.cookies["django_language"].value == "zh-hans"
    assert response.cookies["django_language"]["httponly"]
    page = client.get(reverse("console:login"), HTTP_ACCEPT_LANGUAGE="en")
    assert _language_of(page) == "zh-hans"


def test_the_switcher_needs_the_csrf_token(alice):
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice.user)
    response = client.post(reverse("console:set_language"), {"language": "zh-hans"})
    assert response.status_code == 403
    alice.refresh_from_db()
    assert alice.language == ""


def test_an_api_key_answers_in_its_members_language(org_a, alice, key_client):
    alice.language = "zh-hans"
    alice.save(update_fields=["language"])
    client = key_client(alice, ["org:read"])
    response = client.get("/api/v1/members/")
    assert response.status_code == 200
    assert _language_of(response) == "zh-hans"
    alice.language = ""
    alice.save(update_fields=["language"])
    assert _language_of(client.get("/api/v1/members/")) == "en"
    assert _language_of(client.get("/api/v1/members/", HTTP_ACCEPT_LANGUAGE=ZH)) == "zh-hans"


def test_an_admin_sets_a_members_language_over_the_api_and_only_a_real_one(
    org_a, alice, bob, client_for
):
    client = client_for(alice)
    url = f"/api/v1/members/{bob.pk}/"
    response = client.patch(url, {"language": "zh-hans"}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["language"] == "zh-hans"
    refused = client.patch(url, {"language": "klingon"}, format="json")
    assert refused.status_code == 400
    bob.refresh_from_db()
    assert bob.language == "zh-hans"


def test_out_of_a_request_members_are_written_to_in_their_language(org_a, make_member):
    preferring = make_member(language="zh-hans")
    assert member_language(preferring) == "zh-hans"
    platform = make_member()
    assert member_language(platform) == "en"
    remember_platform_locale(platform, "zh_CN")
    platform.refresh_from_db()
    assert platform.platform_language == "zh-hans"
    assert member_language(platform) == "zh-hans"
    remember_platform_locale(platform, "bogus\x00")  # refused, nothing changes
    platform.refresh_from_db()
    assert platform.platform_language == "zh-hans"
    # the member's own choice beats their platform's locale
    platform.language = "en"
    assert member_language(platform) == "en"
    # neither: the organization's default
    org_a.locale = "zh-hans"
    org_a.save(update_fields=["locale"])
    plain = Member.objects.get(pk=make_member().pk)
    assert member_language(plain) == "zh-hans"


def test_password_sign_in_page_in_chinese_keeps_working(alice):
    client = Client(HTTP_ACCEPT_LANGUAGE=ZH)
    response = client.post(
        reverse("console:login"), {"username": alice.user.email, "password": PASSWORD}
    )
    assert response.status_code == 302


def test_the_scripts_catalog_speaks_the_readers_language_and_is_cached():
    client = Client()
    chinese = client.get(reverse("console:javascript_catalog"), HTTP_ACCEPT_LANGUAGE=ZH)
    assert chinese.status_code == 200
    assert chinese.headers["Content-Type"].startswith("text/javascript")
    assert chinese.headers["Content-Language"] == "zh-hans"
    assert '"plural"' in chinese.content.decode() or "pluralidx" in chinese.content.decode()
    again = client.get(
        reverse("console:javascript_catalog"),
        HTTP_ACCEPT_LANGUAGE=ZH,
        HTTP_IF_MODIFIED_SINCE=chinese.headers["Last-Modified"],
    )
    assert again.status_code == 304


def test_an_asgi_scope_names_the_browsers_language_by_cookie_then_header():
    from cadre.languages import scope_language

    def scope(*headers):
        return {"headers": [(name, value.encode("latin-1")) for name, value in headers]}

    assert scope_language(scope((b"accept-language", ZH))) == "zh-hans"
    assert scope_language(scope((b"accept-language", "fr, en;q=0.5"))) == "en"
    switched = scope((b"cookie", "a=b; django_language=zh-hans"), (b"accept-language", "en"))
    assert scope_language(switched) == "zh-hans"
    assert scope_language(scope((b"cookie", "django_language=klingon"))) is None
    assert scope_language(scope((b"accept-language", "x" * 2000))) is None
    assert scope_language({}) is None
