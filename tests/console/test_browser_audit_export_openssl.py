# ruff: noqa: F811 - the fixtures imported from test_browser_chat are parameters here
"""The auditor's export page in a real browser (Debian's Chromium): an auditor opens a finished
export, downloads the bundle and the public key from the page, and runs the OpenSSL commands
the page shows, read from the page itself, in a shell: each prints what the page says it
prints; after the manifest is edited the signature step fails. Screenshots in
var/screenshots/audit-export-openssl-*.png (git-ignored)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from cadre.governance import audit, export
from cadre.governance.export.openssl_check import NOT_VERIFIED, VERIFIED
from cadre.tenancy.actors import member_actor
from tests.conftest import PASSWORD
from tests.console.test_browser_chat import (  # noqa: F401 - fixtures and helpers
    browser_page,
    chromium,
    expect,
    live_server_url,
)
from tests.console.test_browser_csp import _sign_in

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is not installed"),
]
SHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"


@pytest.fixture
def finished_export(settings, tmp_path, alice):
    from cadre.celery import app

    settings.DATA_DIR = tmp_path / "data"
    settings.DATA_DIR.mkdir()
    previous = (app.conf.task_always_eager, app.conf.task_eager_propagates)
    app.conf.task_always_eager = app.conf.task_eager_propagates = True
    try:
        actor = member_actor(alice)
        for number in range(5):
            audit.record(
                actor=actor, action="member.update", target=("member", number, f"M{number}")
            )
        created = export.audit_export_create(actor=actor, formats=["jsonl", "csv"])
        yield export.audit_export_run(export_id=created.pk)
    finally:
        app.conf.task_always_eager, app.conf.task_eager_propagates = previous


def _shell(commands: list[str], folder: Path) -> subprocess.CompletedProcess:
    for command in commands:
        # What the page shows, pasted into a shell as an auditor would.
        result = subprocess.run(
            command, shell=True, cwd=folder, capture_output=True, text=True, timeout=60
        )
        if result.returncode != 0:
            break
    return result


def _lines(locator) -> list[str]:
    return [line for line in locator.inner_text().splitlines() if line.strip()]


def test_an_auditor_verifies_the_bundle_with_the_pages_openssl_commands(
    chromium, live_server_url, alice, finished_export, tmp_path
):
    SHOTS.mkdir(parents=True, exist_ok=True)
    folder = tmp_path / "auditor"
    folder.mkdir()
    with browser_page(chromium, live_server_url) as page:
        page.set_viewport_size({"width": 1400, "height": 900})
        assert _sign_in(page, alice.user.email, PASSWORD).status == 200
        page.goto("/audit/")
        page.get_by_role("link", name="Export…").click()
        expect(page.locator(".page-header")).to_contain_text("OpenSSL alone")
        page.locator(f'a[href="/audit/exports/{finished_export.pk}/"]').click()
        check = page.locator("#openssl-check")
        expect(check.get_by_role("heading")).to_have_text("Verify this bundle without Cadre")
        page.screenshot(path=SHOTS / "audit-export-openssl-1-steps.png", full_page=True)

        for kind in ("bundle", "key"):
            with page.expect_download() as download:
                check.locator(f'[data-download="{kind}"]').click()
            download.value.save_as(folder / download.value.suggested_filename)
        assert sorted(p.name for p in folder.iterdir()) == [
            f"audit-export-{finished_export.pk}.tar",
            "cadre-audit-key.pem",
        ]

        steps = check.locator("li[data-step]")
        expect(steps).to_have_count(5)
        ran = 0
        for index in range(steps.count()):
            step = steps.nth(index)
            if not step.locator("[data-commands]").count():
                continue
            commands = _lines(step.locator("[data-commands]"))
            expected = (
                _lines(step.locator("[data-expected]"))
                if step.locator("[data-expected]").count()
                else []
            )
            result = _shell(commands, folder)
            assert result.returncode == 0, (commands, result.stderr)
            assert result.stdout.splitlines() == expected, commands
            ran += 1
        assert ran == 4
        signature_step = steps.nth(3)
        expect(signature_step.locator("[data-expected]")).to_have_text(VERIFIED)

        # An edited manifest: the same commands from the page now fail.
        manifest = folder / str(finished_export.pk) / "manifest.json"
        manifest.write_text(manifest.read_text().replace('"masked": true', '"masked": false'))
        result = _shell(_lines(signature_step.locator("[data-commands]")), folder)
        assert result.returncode == 1 and NOT_VERIFIED in result.stdout + result.stderr
        expect(signature_step).to_contain_text(NOT_VERIFIED)
