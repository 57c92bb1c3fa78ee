# ruff: noqa: F811 - the fixtures imported from other test modules are parameters here
"""The connector page's directory card in a real browser (headless Chromium, the ASGI server of
test_browser_chat.py) against a loopback Feishu contact API: "Sync directory" runs the sync,
the card shows its outcome and the conflicts queue, and a conflict is resolved from there.
A screenshot is written to var/screenshots/ (git-ignored)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cadre.tenancy.models import Member
from connectors.conftest import celery_eager  # noqa: F401 - fixture
from connectors.models import DirectoryConflict
from connectors.tests.fake_directory import CREDENTIALS, FakeDirectory, generate
from connectors.tests.fakes import FakePlatformServer
from connectors.tests.helpers import make_connector
from tests.console.test_browser_chat import (  # noqa: F401 - fixtures
    PASSWORD,
    browser_page,
    chromium,
    expect,
    live_server_url,
)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"


@pytest.fixture
def feishu_directory():
    server = FakePlatformServer().start()
    org = generate(users=24, departments=5)
    org.users[3].email = org.users[4].email = "shared@corp.example"
    yield FakeDirectory(server, "feishu", org)
    server.stop()


def test_sync_directory_from_the_connector_page(
    chromium, live_server_url, alice, feishu_directory, celery_eager
):
    connector = make_connector(
        alice, "feishu", CREDENTIALS["feishu"], feishu_directory.connector_settings(),
        name="Feishu HQ",
    )  # fmt: skip
    with browser_page(chromium, live_server_url) as page:
        page.goto(f"/login/?next=/connectors/{connector.pk}/")
        page.get_by_label("Email").fill(alice.user.email)
        page.get_by_label("Password").fill(PASSWORD)
        with page.expect_navigation():
            page.get_by_role("button", name="Sign in").click()
        card = page.get_by_test_id("directory")
        expect(card).to_contain_text("Never synced")
        card.get_by_test_id("directory-sync").click()
        expect(page.get_by_test_id("directory-status")).to_have_text("Succeeded")
        expect(page.get_by_test_id("directory-counts")).to_contain_text("members_created: 22")
        conflicts = page.get_by_test_id("directory-conflicts").locator("tbody tr")
        expect(conflicts).to_have_count(2)
        expect(conflicts.first).to_contain_text("Two directory users with one e-mail")
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.set_viewport_size({"width": 1280, "height": 1000})
        page.screenshot(path=str(SCREENSHOTS / "directory_sync.png"), full_page=True)
        with page.expect_navigation():
            conflicts.first.get_by_role("button", name="Create without e-mail").click()
        expect(page.get_by_test_id("directory-conflicts").locator("tbody tr")).to_have_count(1)
    assert Member.objects.filter(organization=alice.organization).count() == 1 + 22 + 1
    assert DirectoryConflict.objects.filter(status="open").count() == 1
