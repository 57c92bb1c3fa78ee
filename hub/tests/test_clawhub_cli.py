"""The real `clawhub` CLI (npm clawhub 0.23.x) against a live Cadre: search, inspect,
install (latest and pinned), publish and tag.

Install the CLI once with `npm ci --prefix hub/tests/clawhub` (the Makefile's test target).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from cadre.tenancy import services as tenancy
from cadre.tenancy.actors import member_actor
from hub.bundles import bundle_from_directory
from hub.models import DistTag, SkillVersion
from hub.tests.factories import publish
from hub.tests.skill_samples import skill_files

CLI = Path(__file__).parent / "clawhub" / "node_modules" / ".bin" / "clawhub"
NODE = shutil.which("node")

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        not CLI.exists() or NODE is None,
        reason="clawhub CLI not installed: run `npm ci --prefix hub/tests/clawhub` (needs Node.js)",
    ),
]


class ClawHub:
    def __init__(self, registry: str, token: str, home: Path):
        self.registry, self.home = registry, home
        self.workdir = home / "work"
        self.workdir.mkdir()
        self.config = home / "config.json"
        self.config.write_text(json.dumps({"registry": registry, "token": token}))

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(self.home),
            "CLAWHUB_REGISTRY": self.registry,
            "CLAWHUB_CONFIG_PATH": str(self.config),
            "CLAWHUB_DISABLE_TELEMETRY": "1",
            "CLAWHUB_WORKDIR": str(self.workdir),
            "NO_COLOR": "1",
            "CI": "1",
        }
        result = subprocess.run(
            [str(CLI), "--no-input", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=False,
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"clawhub {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"
            )
        return result


@pytest.fixture
def cadre(live_server, settings, org_a, alice, tmp_path):
    settings.CADRE_BASE_URL = live_server.url
    org_a.settings = {"hub": {"publish_without_review": True}}
    org_a.save()
    alice.organization.refresh_from_db()
    _, token = tenancy.api_key_create(
        actor=member_actor(alice), name="clawhub", scopes=["hub:read", "hub:publish"]
    )
    return ClawHub(live_server.url, token, tmp_path)


def json_output(result: subprocess.CompletedProcess) -> dict:
    return json.loads(result.stdout[result.stdout.index("{") :])


def installed(cli: ClawHub, owner: str, slug: str) -> Path:
    return cli.workdir / "skills" / f"@{owner}" / slug


def test_whoami_search_and_inspect(cadre, alice):
    publish(alice, version="1.0.0", changelog="first")
    publish(
        alice,
        name="excel-report",
        files=skill_files("excel-report", description="Build Excel reports."),
    )
    assert "acme" in cadre.run("whoami").stdout
    found = cadre.run("search", "excel").stdout
    assert "excel-report" in found and "pdf-tools" not in found
    data = json_output(cadre.run("inspect", "acme/pdf-tools", "--json"))
    assert data["skill"]["slug"] == "pdf-tools"
    assert data["latestVersion"]["version"] == "1.0.0"
    assert data["owner"]["handle"] == "acme"
    data = json_output(cadre.run("inspect", "acme/pdf-tools", "--files", "--json"))
    assert {f["path"] for f in data["version"]["files"]} == set(skill_files())


def test_install_latest_and_a_pinned_version(cadre, alice):
    publish(alice, version="1.0.0")
    publish(alice, version="1.1.0", files=skill_files() | {"references/guide.md": b"# v1.1\n"})
    cadre.run("install", "acme/pdf-tools")
    target = installed(cadre, "acme", "pdf-tools")
    assert (target / "references" / "guide.md").read_bytes() == b"# v1.1\n"
    lock = json.loads((cadre.workdir / ".clawhub" / "lock.json").read_text())
    assert lock["skills"]["@acme/pdf-tools"]["version"] == "1.1.0"
    cadre.run("install", "acme/pdf-tools", "--version", "1.0.0", "--force")
    assert (target / "references" / "guide.md").read_bytes() == b"# Guide\n"
    assert (
        bundle_from_directory(target).fingerprint
        == SkillVersion.objects.get(version="1.0.0").fingerprint
    )


def test_invisible_or_unpublished_skills_cannot_be_installed(cadre, org_a, make_member, charlie):
    publish(charlie, name="globex-secret")
    result = cadre.run("install", "globex/globex-secret", check=False)
    assert result.returncode != 0
    assert "not found" in (result.stdout + result.stderr).lower()
    org_a.settings = {}
    org_a.save()
    publish(make_member(roles=["business_admin"]), name="pending-skill")  # awaits review
    result = cadre.run("install", "acme/pending-skill", check=False)
    assert result.returncode != 0
    assert not installed(cadre, "acme", "pending-skill").exists()


def test_publish_then_tag(cadre, tmp_path):
    folder = tmp_path / "pdf-tools"
    for path, content in skill_files().items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_bytes(content)
    out = cadre.run(
        "publish",
        str(folder),
        "--version",
        "1.0.0",
        "--changelog",
        "first",
        "--tags",
        "latest,beta",
    )
    assert "Published pdf-tools@1.0.0" in out.stdout + out.stderr
    version = SkillVersion.objects.get(package__name="pdf-tools")
    assert version.status == SkillVersion.Status.PUBLISHED and version.signature
    assert version.fingerprint == bundle_from_directory(folder).fingerprint
    (folder / "references" / "guide.md").write_bytes(b"# Guide 2\n")
    cadre.run("publish", str(folder))  # no --version: the CLI asks resolve and bumps the patch
    assert set(SkillVersion.objects.values_list("version", flat=True)) == {"1.0.0", "1.0.1"}
    out = cadre.run("skill", "tag", "acme/pdf-tools", "1.0.0", "--tag", "stable", "--yes")
    assert "stable" in out.stdout + out.stderr
    tags = dict(DistTag.objects.values_list("tag", "version__version"))
    assert tags == {"latest": "1.0.1", "beta": "1.0.0", "stable": "1.0.0"}
    again = cadre.run("publish", str(folder))  # unchanged files: nothing new
    assert "already published" in again.stdout + again.stderr
