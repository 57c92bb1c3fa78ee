# ruff: noqa: F811 - the fixtures imported from other test modules are parameters here
"""Two recent console surfaces walked in a real browser (Debian's Chromium through Playwright,
pages served by uvicorn) by an owner who reads the console in English, then by one who reads it
in Chinese: adding a SAML IdP (its fields, the refusal without metadata, then the SP side a
saved provider shows: metadata URL, ACS and single logout over HTTP-Redirect and HTTP-POST), and
an audit export whose bundle was deleted after the retention period (expired: said so, nothing
to download). The Chinese pages hold no English sentence (tests/i18n/untranslated.py) and none
of the English strings these surfaces show. Screenshots in var/screenshots/lang-*.png
(git-ignored)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from cadre.governance.models import AuditExport
from cadre.tenancy.models import IdentityProvider
from cadre.tenancy.services import saml
from tests.conftest import PASSWORD
from tests.console.test_browser_chat import (  # noqa: F401 - fixtures and page helpers
    browser_page,
    chromium,
    expect,
    live_server_url,
)
from tests.console.test_browser_navigation import LAYOUT_PROBLEMS, SHOTS, VIEWPORT
from tests.console.test_identity_providers import saml_idp  # noqa: F401 - fixture
from tests.i18n.untranslated import english_sentences

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
LANGUAGES = ["en", "zh-hans"]
# Data the test world holds in English whatever the reader's language: the organization, the
# owner and the provider's names (tests/conftest.py).
DATA = {"Acme", "Alice"}

# What the SAML surfaces say, in each language (the Chinese as the catalog has it).
SAML = {
    "en": {
        "metadata_url": "IdP metadata URL",
        "metadata_xml": "IdP metadata XML",
        "metadata_help": "SAML only: the IdP's metadata (EntityDescriptor",
        "no_metadata": "Enter the IdP's metadata URL or paste its XML.",
        "save": "Save",
        "paste": "Paste into the IdP (or give it the metadata URL):",
        "sp": "SP metadata URL and entity id:",
        "acs": "Assertion consumer service (HTTP-POST):",
        "slo": "Single logout (HTTP-Redirect and HTTP-POST):",
        "certificate": "SP certificate (signing and encryption), SHA-256:",
        "entity": "IdP entity id:",
    },
    "zh-hans": {
        "metadata_url": "IdP 元数据 URL",
        "metadata_xml": "IdP 元数据 XML",
        "metadata_help": "仅限 SAML：当 IdP 没有 Cadre 可访问的 URL 时",
        "no_metadata": "请输入 IdP 的元数据 URL 或粘贴其 XML。",
        "save": "保存",
        "paste": "粘贴到 IdP 中（或提供元数据 URL）：",
        "sp": "SP 元数据 URL 和实体 ID：",
        "acs": "断言消费服务（ACS，HTTP-POST）：",
        "slo": "单点登出（HTTP-Redirect 与 HTTP-POST）：",
        "certificate": "SP 证书（签名与加密）SHA-256：",
        "entity": "IdP 实体 ID：",
    },
}
EXPIRED = {
    "en": {
        "status": "Expired",
        "deleted": "The bundle was deleted {days} days after it was written; start a new export.",
    },
    "zh-hans": {"status": "已过期", "deleted": "导出包已在写入 {days} 天后删除；请重新发起导出。"},
}


def signed_in(page, member, path: str) -> None:
    """Through the sign-in form (English: the browser's language) to `path`, in the member's
    own language."""
    page.set_viewport_size(VIEWPORT)
    page.goto(f"/login/?next={path}")
    page.get_by_label("Email").fill(member.user.email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"**{path}")
    expect(page.locator("html")).to_have_attribute("lang", member.language)


def read(page, language: str, name: str) -> None:
    """The page as it stands: in Chinese no English sentence left, nothing overflowing in
    either language; a screenshot."""
    page.wait_for_load_state("networkidle")
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"lang-{name}-{language}.png"), full_page=True)
    assert not page.evaluate(LAYOUT_PROBLEMS), name
    if language != "en":
        english = [phrase for phrase in english_sentences(page.content()) if phrase not in DATA]
        assert not english, f"{name}: English on a Chinese page: {sorted(set(english))}"


def no_english_of(page, language: str, strings: dict) -> None:
    """On the Chinese page, none of the English strings these surfaces show (a msgid left
    untranslated would be one)."""
    if language == "en":
        return
    text = page.locator("main, body").first.inner_text()
    left = [english for english in strings["en"].values() if english.split("{")[0] in text]
    assert not left, f"English left on the Chinese page: {left}"


@pytest.fixture
def owner(alice, request):
    alice.language = request.param
    alice.save(update_fields=["language"])
    return alice


@pytest.mark.parametrize("owner", LANGUAGES, indirect=True)
def test_an_owner_adds_a_saml_idp_and_reads_the_sp_side_in_their_language(
    chromium, live_server_url, owner, saml_idp
):
    language = owner.language
    words = SAML[language]
    with browser_page(chromium, live_server_url) as page:
        signed_in(page, owner, reverse("console:identity_provider_new"))
        page.locator("#id_name").fill("Acme AD FS")
        page.locator("#id_slug").fill("adfs")
        page.locator("#id_kind").select_option("saml")
        expect(page.locator("label[for=id_saml_metadata_url]")).to_contain_text(
            words["metadata_url"]
        )
        expect(page.locator("label[for=id_saml_metadata_xml]")).to_contain_text(
            words["metadata_xml"]
        )
        expect(page.locator("#id_saml_metadata_xml ~ .help")).to_contain_text(
            words["metadata_help"]
        )

        # SAML without metadata: refused, said in the member's language, nothing stored.
        page.get_by_role("button", name=words["save"], exact=True).click()
        expect(page.locator(".field.has-error")).to_contain_text(words["no_metadata"])
        assert not IdentityProvider.objects.exists()
        read(page, language, "saml-refused")
        no_english_of(page, language, SAML)

        page.locator("#id_saml_metadata_xml").fill(saml_idp.metadata())
        page.get_by_role("button", name=words["save"], exact=True).click()
        page.wait_for_url(f"**{reverse('console:identity_providers')}")
        provider = IdentityProvider.objects.get(organization=owner.organization, slug="adfs")
        assert (provider.kind, provider.saml_entity_id) == ("saml", saml_idp.entity_id)

        # The saved provider's page: what to paste into the IdP.
        page.goto(reverse("console:identity_provider_edit", args=[provider.pk]))
        sp = page.locator(".saml-sp")
        expect(sp).to_contain_text(words["paste"])
        expect(sp.locator("p", has=page.locator("code.saml-metadata-url"))).to_contain_text(
            words["sp"]
        )
        expect(sp.locator("p", has=page.locator("code.saml-acs-url"))).to_contain_text(words["acs"])
        slo = sp.locator("p", has=page.locator("code.saml-slo-url"))
        expect(slo).to_contain_text(words["slo"])
        expect(slo.locator("code.saml-slo-url")).to_have_text(
            settings.CADRE_BASE_URL.rstrip("/") + "/sso/acme/adfs/saml/slo/"
        )
        # The SP key pair made at creation, as the IdP will show it.
        certificate = sp.locator("p", has=page.locator("code.saml-sp-certificate"))
        expect(certificate).to_contain_text(words["certificate"])
        expect(certificate.locator("code")).to_have_text(
            saml.certificate_fingerprint(provider.saml_sp_certificate)
        )
        expect(sp.locator("code.saml-sp-next-certificate")).to_have_count(0)
        entity = sp.locator("p", has=page.locator("code", has_text=saml_idp.entity_id))
        expect(entity).to_contain_text(words["entity"])
        # When the metadata was read, as a date the sentence can end after (English's default
        # format ends in "p.m.", which left "p.m.." here).
        expect(entity).to_have_text(re.compile(r" \d{4}-\d\d-\d\d \d\d:\d\d[.。]$"))
        read(page, language, "saml-provider")
        no_english_of(page, language, SAML)


@pytest.mark.parametrize("owner", LANGUAGES, indirect=True)
def test_an_expired_export_says_so_and_offers_nothing_to_download(chromium, live_server_url, owner):
    language = owner.language
    words = EXPIRED[language]
    finished = timezone.now() - timedelta(days=settings.AUDIT_EXPORT_RETENTION_DAYS + 1)
    # As audit_exports_expire leaves a job whose bundle it deleted.
    job = AuditExport.objects.create(
        organization=owner.organization,
        requested_by=owner,
        formats=["jsonl", "csv"],
        status=AuditExport.Status.EXPIRED,
        total_rows=12,
        rows_written=12,
        manifest={"files": [{"name": "audit.jsonl", "lines": 12, "bytes": 3456, "sha256": "ab"}]},
        created_at=finished,
        started_at=finished,
        finished_at=finished,
    )
    download = reverse("console:audit_export_download", args=[job.pk])
    with browser_page(chromium, live_server_url) as page:
        signed_in(page, owner, reverse("console:audit_exports"))
        row = page.locator("tr", has=page.locator("td.mono", has_text=str(job.pk)))
        expect(row.locator(".badge-expired")).to_have_text(words["status"])
        expect(page.locator(f'a[href="{download}"]')).to_have_count(0)
        read(page, language, "export-list-expired")
        no_english_of(page, language, EXPIRED)

        row.locator(f'a[href="{reverse("console:audit_export", args=[job.pk])}"]').click()
        status = page.locator("#export-status")
        expect(status.get_by_role("heading", level=2)).to_have_text(words["status"])
        expect(status.get_by_role("alert")).to_have_text(
            words["deleted"].format(days=settings.AUDIT_EXPORT_RETENTION_DAYS)
        )
        expect(page.locator(f'a[href="{download}"]')).to_have_count(0)
        expect(status.locator("table, [download]")).to_have_count(0)
        read(page, language, "export-expired")
        no_english_of(page, language, EXPIRED)
