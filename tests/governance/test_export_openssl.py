"""The OpenSSL steps the export page gives an external auditor, run as written (`openssl` and
`tar` of this machine, in a shell) against a real export: they print what the page says they
print for a sound bundle, and something else for a tampered one."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from cadre import signing
from cadre.governance import audit, export
from cadre.governance.export.openssl_check import (
    KEY_FILE,
    NOT_VERIFIED,
    VERIFIED,
    openssl_steps,
    tar_name,
)
from cadre.tenancy.actors import member_actor

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is not installed")


@pytest.fixture
def data_dir(settings, tmp_path):
    settings.DATA_DIR = tmp_path / "data"
    settings.DATA_DIR.mkdir()
    return settings.DATA_DIR


@pytest.fixture(autouse=True)
def eager_celery():
    from cadre.celery import app

    previous = (app.conf.task_always_eager, app.conf.task_eager_propagates)
    app.conf.task_always_eager = app.conf.task_eager_propagates = True
    yield
    app.conf.task_always_eager, app.conf.task_eager_propagates = previous


def run_step(step, folder: Path) -> subprocess.CompletedProcess:
    """The step's commands in order, as an auditor pastes them; the last one's result."""
    for command in step.commands:
        # The page's own commands, in a shell as an auditor runs them, on our files.
        result = subprocess.run(
            command, shell=True, cwd=folder, capture_output=True, text=True, timeout=60
        )
        if result.returncode != 0:
            return result
    return result


def downloaded(job, folder: Path) -> Path:
    """What the export page offers, saved in one folder: the bundle's tar and the key."""
    folder.mkdir()
    export.tar_bundle(export.stored_bundle(job), folder / tar_name(job.pk))
    (folder / KEY_FILE).write_text(signing.published_key()["public_key_pem"], encoding="ascii")
    return folder


@pytest.fixture
def job(alice, data_dir):
    actor = member_actor(alice)
    for number in range(12):
        audit.record(
            actor=actor,
            action="member.update",
            target=("member", number, f"Member {number}"),
            changes={"n": number},
        )
    created = export.audit_export_create(actor=actor, formats=["jsonl", "csv", "ocsf"])
    return export.audit_export_run(export_id=created.pk)


def steps_for(job):
    return openssl_steps(export_id=job.pk, key_id=signing.key_id(), files=job.manifest["files"])


@pytest.mark.django_db(transaction=True)
def test_the_pages_openssl_steps_verify_a_real_export(job, tmp_path):
    folder = downloaded(job, tmp_path / "auditor")
    steps = steps_for(job)
    assert [len(step.commands) for step in steps] == [0, 1, 1, 2, 1]
    for step in steps:
        if not step.commands:
            continue
        result = run_step(step, folder)
        assert result.returncode == 0, (step.commands, result.stderr)
        assert result.stdout.splitlines() == list(step.expected), step.title
    # The signature step says what success looks like; the file step covers every file.
    assert steps[3].expected == (VERIFIED,)
    assert len(steps[4].expected) == 4 == len(job.manifest["files"])


@pytest.mark.django_db(transaction=True)
def test_a_tampered_manifest_fails_the_signature_step(job, tmp_path):
    folder = downloaded(job, tmp_path / "auditor")
    unpack, _key, signature = steps_for(job)[1:4]
    assert run_step(unpack, folder).returncode == 0
    manifest = folder / str(job.pk) / "manifest.json"
    text = manifest.read_text()
    assert f'"rows": {job.rows_written},' in text
    manifest.write_text(text.replace(f'"rows": {job.rows_written},', '"rows": 1,'))
    result = run_step(signature, folder)
    assert result.returncode == 1
    assert NOT_VERIFIED in result.stdout + result.stderr and VERIFIED not in result.stdout


@pytest.mark.django_db(transaction=True)
def test_an_edited_file_fails_the_hash_step(job, tmp_path):
    folder = downloaded(job, tmp_path / "auditor")
    steps = steps_for(job)
    assert run_step(steps[1], folder).returncode == 0
    rows = folder / str(job.pk) / "audit.jsonl"
    rows.write_text(rows.read_text().replace("Member 3", "Member 9"))
    # The signature still verifies (the manifest is untouched) ...
    assert run_step(steps[3], folder).stdout.splitlines() == [VERIFIED]
    # ... but the edited file no longer hashes to what the signed manifest lists.
    printed = run_step(steps[4], folder).stdout.splitlines()
    differing = [line for line in printed if line not in steps[4].expected]
    assert differing == [line for line in printed if line.endswith("/audit.jsonl")]
    assert len(differing) == 1


@pytest.mark.django_db(transaction=True)
def test_another_key_fails_the_fingerprint_and_signature_steps(job, tmp_path):
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    folder = downloaded(job, tmp_path / "auditor")
    other = Ed25519PrivateKey.generate().public_key()
    (folder / KEY_FILE).write_text(signing.public_key_pem(other))
    steps = steps_for(job)
    assert run_step(steps[1], folder).returncode == 0
    assert run_step(steps[2], folder).stdout.splitlines() != list(steps[2].expected)
    assert run_step(steps[3], folder).returncode == 1
