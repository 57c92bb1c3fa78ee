"""The Skills Hub in the console: browse and search, package and version pages (files, scan,
signature, success rate, installs, dist-tags), distribution with apply-update and rollback;
allowed, denied and outsider."""

from __future__ import annotations

import pytest
from django.urls import reverse

from cadre.agents.runtime.lifecycle import services as runtime
from cadre.tenancy.actors import member_actor
from hub.models import SkillBlob, SkillInstall, SkillUsage, SkillVersion
from hub.tests.agent_setup import deploy, template_with_skills
from hub.tests.factories import publish
from hub.tests.skill_samples import skill_files

pytestmark = pytest.mark.django_db

PACKAGE = reverse("console:hub_package", args=["acme", "pdf-tools"])


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
def agents(alice, bob):
    """pdf-tools 1.0.0 installed on alice's and bob's agents (auto policy), 1.1.0 offered."""
    publish(alice, version="1.0.0")
    template = template_with_skills(alice, [{"package": "@acme/pdf-tools", "range": "^1"}])
    _, by_member = deploy(alice, template, alice, bob)
    publish(alice, version="1.1.0")
    return by_member


def _install(agent) -> SkillInstall:
    return SkillInstall.objects.select_related("version", "pending_version").get(agent=agent)


def test_browse_lists_and_searches_skills_with_success_rate(browser, alice, bob, agents):
    agent = agents[bob.pk]
    run = runtime.run_start(actor=member_actor(bob), agent=agent, text="merge")
    run.status = "completed"
    run.save(update_fields=["status"])
    version = _install(agent).version
    SkillUsage.objects.create(
        organization=agent.organization,
        run=run,
        agent=agent,
        package=version.package,
        version=version,
    )
    publish(
        alice,
        name="crm-notes",
        files=skill_files("crm-notes", description="CRM notes.", body="Log calls.\n"),
    )
    page = browser(bob).get(reverse("console:hub")).content.decode()
    assert "@acme/pdf-tools" in page and "@acme/crm-notes" in page
    assert "100%" in page and "1 of 1 runs" in page
    found = browser(bob).get(reverse("console:hub"), {"q": "pdf forms"}).content.decode()
    assert "@acme/pdf-tools" in found
    # Only a meaning-based match could bring the CRM skill in, and never above the PDF one.
    assert "@acme/crm-notes" not in found or found.index("@acme/pdf-tools") < found.index(
        "@acme/crm-notes"
    )


def test_package_page_shows_versions_tags_installs_and_offers(browser, alice, bob, agents):
    page = browser(alice).get(PACKAGE).content.decode()
    assert "1.0.0" in page and "1.1.0" in page
    assert "Dist-tags" in page and "latest" in page
    assert agents[bob.pk].name in page and "Apply update" in page  # 1.1.0 offered
    # An employee sees their own agent only, and no apply action.
    mine = browser(bob).get(PACKAGE).content.decode()
    assert agents[bob.pk].name in mine and agents[alice.pk].name not in mine
    assert "Apply update" not in mine


def test_version_page_shows_files_scan_and_a_verified_signature(browser, alice, agents):
    url = reverse("console:hub_version", args=["acme", "pdf-tools", "1.0.0"])
    page = browser(alice).get(url).content.decode()
    assert "SKILL.md" in page and "scripts/merge.py" in page
    assert "Verified" in page
    file_url = reverse("console:hub_file", args=["acme", "pdf-tools", "1.0.0", "SKILL.md"])
    assert "Use pypdf to merge files." in browser(alice).get(file_url).content.decode()


def test_version_page_shows_a_signature_mismatch(browser, alice, agents):
    version = SkillVersion.objects.get(package__name="pdf-tools", version="1.0.0")
    sha = version.files.get(path="SKILL.md").sha256
    SkillBlob.objects.filter(sha256=sha).update(content=b"tampered")
    url = reverse("console:hub_version", args=["acme", "pdf-tools", "1.0.0"])
    page = browser(alice).get(url).content.decode()
    assert "Mismatch" in page and "SHA-256" in page


def test_scan_findings_only_for_maintainers(browser, alice, bob):
    files = skill_files()
    files["scripts/fetch.py"] = b"import requests\nrequests.get('https://example.test')\n"
    publish(alice, files=files)
    url = reverse("console:hub_version", args=["acme", "pdf-tools", "1.0.0"])
    assert "network_reach" in browser(alice).get(url).content.decode()
    page = browser(bob).get(url).content.decode()
    assert "network_reach" not in page and "shown to the skill's maintainers" in page


def test_distribution_apply_update_and_rollback(browser, alice, bob, agents):
    install = _install(agents[bob.pk])
    page = browser(alice).get(reverse("console:hub_distribution"), {"pending": "1"})
    assert agents[bob.pk].name in page.content.decode()
    apply_url = reverse("console:hub_install_apply", args=[install.pk])
    assert "Apply update" in browser(alice).get(apply_url).content.decode()  # confirm page
    response = browser(alice).post(apply_url)
    assert response.status_code == 302
    assert _install(agents[bob.pk]).version.version == "1.1.0"
    history = browser(alice).get(reverse("console:hub_install", args=[install.pk]))
    assert "Offered update applied" in history.content.decode()
    response = browser(alice).post(
        reverse("console:hub_install_rollback", args=[install.pk]), {"reason": "bad forms"}
    )
    assert response.status_code == 302
    assert _install(agents[bob.pk]).version.version == "1.0.0"


def test_an_employee_cannot_apply_updates(browser, bob, agents):
    install = _install(agents[bob.pk])
    response = browser(bob).post(reverse("console:hub_install_apply", args=[install.pk]))
    assert response.status_code == 403
    assert _install(agents[bob.pk]).version.version == "1.0.0"


def test_outsider_gets_404_and_anonymous_is_sent_to_sign_in(browser, alice, charlie, agents):
    install = _install(agents[alice.pk])
    for url in (
        PACKAGE,
        reverse("console:hub_version", args=["acme", "pdf-tools", "1.0.0"]),
        reverse("console:hub_file", args=["acme", "pdf-tools", "1.0.0", "SKILL.md"]),
        reverse("console:hub_install", args=[install.pk]),
        reverse("console:hub_install_apply", args=[install.pk]),
    ):
        assert browser(charlie).get(url).status_code == 404, url
    assert (
        browser(charlie)
        .post(reverse("console:hub_install_rollback", args=[install.pk]))
        .status_code
        == 404
    )
    assert "@acme/pdf-tools" not in browser(charlie).get(reverse("console:hub")).content.decode()
    anonymous = browser().get(reverse("console:hub"))
    assert anonymous.status_code == 302 and "login" in anonymous["Location"]
