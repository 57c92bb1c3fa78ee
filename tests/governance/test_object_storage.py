"""Export bundles and signed audit digests in S3 (issue 35): against moto's S3 server running as
its own process on loopback, the way an installation on several machines stores them."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
import tarfile
import time
from datetime import timedelta
from io import StringIO
from pathlib import Path

import boto3
import pytest
from botocore.exceptions import ClientError
from django.core.files.storage import storages
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse
from django.utils import timezone

from cadre import object_storage
from cadre.checks import FAIL, OK
from cadre.governance import audit, audit_digest, checks, export
from cadre.governance.models import AuditEvent, AuditExport
from cadre.tenancy.actors import member_actor, system_actor
from tests.refusals import nothing_changes

ROOT = Path(__file__).resolve().parents[2]
EXPORTS, ANCHORS = "cadre-exports", "cadre-anchors"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def s3_endpoint():
    """moto's S3 server, its own process on a free loopback port; the buckets an operator
    prepares: one for exports, one for anchors with Object Lock and a default retention."""
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                pytest.fail("moto_server did not start")
            time.sleep(0.1)
    client = _client(endpoint)
    client.create_bucket(Bucket=EXPORTS)
    client.create_bucket(Bucket=ANCHORS, ObjectLockEnabledForBucket=True)
    client.put_object_lock_configuration(
        Bucket=ANCHORS,
        ObjectLockConfiguration={
            "ObjectLockEnabled": "Enabled",
            "Rule": {"DefaultRetention": {"Mode": "COMPLIANCE", "Days": 1}},
        },
    )
    yield endpoint
    server.terminate()
    server.wait(timeout=10)


def _client(endpoint: str):
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )


def _keys(client, bucket: str, prefix: str = "") -> list[str]:
    listed = client.list_objects_v2(Bucket=bucket, Prefix=prefix)
    return sorted(entry["Key"] for entry in listed.get("Contents", []))


@pytest.fixture
def s3(settings, s3_endpoint, tmp_path):
    """Exports and anchors on S3 under a prefix of this test's own, as CADRE_S3_* configure
    them; DATA_DIR an empty folder, to see that nothing is left on this machine's disk."""
    prefix = f"t{time.monotonic_ns()}"
    options = {
        "endpoint_url": s3_endpoint,
        "region_name": "us-east-1",
        "access_key": "test",
        "secret_key": "test",
        "addressing_style": "path",
    }
    settings.DATA_DIR = tmp_path
    settings.AUDIT_DIGEST_LOG = tmp_path / "audit-digests.jsonl"
    settings.STORAGES = {
        **settings.STORAGES,
        "exports": {
            "BACKEND": "storages.backends.s3.S3Storage",
            "OPTIONS": {**options, "bucket_name": EXPORTS, "location": prefix},
        },
        "audit_anchors": {
            "BACKEND": "cadre.object_storage.WriteOnceS3Storage",
            "OPTIONS": {**options, "bucket_name": ANCHORS, "location": f"{prefix}/audit-anchors"},
        },
    }
    client = _client(s3_endpoint)
    client.prefix = prefix
    return client


def _events(organization, count: int) -> None:
    actor = system_actor(organization)
    for number in range(count):
        audit.record(actor=actor, action="member.update", target=("member", number, f"M{number}"))


@pytest.mark.django_db(transaction=True)
def test_export_built_by_the_worker_downloads_from_s3_and_leaves_nothing_on_disk(
    alice, client_for, s3, settings
):
    client = client_for(alice)
    _events(alice.organization, 4)
    created = client.post("/api/v1/audit-exports/", {"formats": ["jsonl", "csv"]}, format="json")
    assert created.status_code == 202, created.json()
    job = AuditExport.objects.get(pk=created.json()["id"])
    # The task ran on commit (eager): run it again as a worker would on redelivery.
    job = export.audit_export_run(export_id=job.pk)
    assert job.status == AuditExport.Status.COMPLETED
    assert job.bundle_path == f"exports/{alice.organization.slug}/{job.pk}"
    stored = _keys(s3, EXPORTS, f"{s3.prefix}/{job.bundle_path}/")
    names = [key.rsplit("/", 1)[1] for key in stored]
    assert names == sorted(
        ["audit.csv", "audit.jsonl", "digests.jsonl", "manifest.json", "manifest.sig"]
    )
    # Nothing left on this machine: not under DATA_DIR, not in the worker's temporary folder.
    assert not (Path(settings.DATA_DIR) / "exports").exists()
    assert list((Path(settings.DATA_DIR) / "tmp").iterdir()) == []

    response = client.get(f"/api/v1/audit-exports/{job.pk}/download/")
    assert response.status_code == 200 and response["Content-Type"] == "application/x-tar"
    archive_bytes = b"".join(response.streaming_content)
    with tarfile.open(fileobj=io.BytesIO(archive_bytes)) as archive:
        assert sorted(archive.getnames()) == sorted(f"{job.pk}/{name}" for name in names)
        for name in names:
            body = s3.get_object(Bucket=EXPORTS, Key=f"{s3.prefix}/{job.bundle_path}/{name}")
            assert archive.extractfile(f"{job.pk}/{name}").read() == body["Body"].read()
    tar = Path(settings.DATA_DIR) / "download.tar"
    tar.write_bytes(archive_bytes)
    report = export.verify_bundle(tar)
    assert report.ok and report.rows == 4, [str(p) for p in report.problems]


@pytest.mark.django_db(transaction=True)
def test_an_expired_export_is_deleted_from_s3(alice, client_for, s3):
    _events(alice.organization, 2)
    created = export.audit_export_create(actor=member_actor(alice), formats=["jsonl"])
    job = export.audit_export_run(export_id=created.pk)
    prefix = f"{s3.prefix}/{job.bundle_path}/"
    assert len(_keys(s3, EXPORTS, prefix)) == 4  # audit.jsonl, digests, manifest, signature
    assert export.audit_exports_expire() == 0  # young: kept
    assert len(_keys(s3, EXPORTS, prefix)) == 4  # audit.jsonl, digests, manifest, signature

    AuditExport.objects.filter(pk=job.pk).update(finished_at=timezone.now() - timedelta(days=31))
    assert export.audit_exports_expire() == 1
    assert _keys(s3, EXPORTS, prefix) == []
    job.refresh_from_db()
    assert job.status == AuditExport.Status.EXPIRED and job.bundle_path == ""
    assert AuditEvent.objects.filter(action="audit.export_expired", target_id=str(job.pk)).exists()
    gone = client_for(alice).get(f"/api/v1/audit-exports/{job.pk}/download/")
    assert gone.status_code == 409 and gone.json()["error"]["code"] == "export_not_ready"
    page = client_for(alice).get(reverse("console:audit_export", args=[job.pk]))
    assert "The bundle was deleted 30 days after it was written" in page.content.decode()
    assert export.audit_exports_expire() == 0  # once


@pytest.mark.django_db
def test_digests_are_write_once_objects_in_the_anchor_bucket(org_a, s3):
    _events(org_a, 3)
    audit.seal(organization=org_a)
    digest = audit.digest_write(org_a)
    (key,) = _keys(s3, ANCHORS, f"{s3.prefix}/audit-anchors/")
    assert key == f"{s3.prefix}/audit-anchors/{audit_digest.key(digest)}"
    assert key.endswith(f"-{3:012d}-{digest['hash']}.json")
    head = s3.head_object(Bucket=ANCHORS, Key=key)
    assert head["ObjectLockMode"] == "COMPLIANCE"  # the bucket's default retention applied
    original = s3.get_object(Bucket=ANCHORS, Key=key)["Body"].read()
    assert json.loads(original) == digest

    forged = {**digest, "hash": "f" * 64, "signature": digest["signature"]}
    forged_key = audit_digest.key(digest)
    # The same name again, even bypassing the exists check: S3 itself refuses the write.
    with pytest.raises(object_storage.AlreadyWritten):
        storages["audit_anchors"]._save(forged_key, io.BytesIO(json.dumps(forged).encode()))
    with pytest.raises(object_storage.AlreadyWritten):
        audit_digest.write(digest)
    with pytest.raises(PermissionError):
        storages["audit_anchors"].delete(forged_key)
    assert s3.get_object(Bucket=ANCHORS, Key=key)["Body"].read() == original
    assert _keys(s3, ANCHORS, f"{s3.prefix}/audit-anchors/") == [key]
    # Object Lock: not even a direct delete of the version removes it before its retention.
    version = s3.head_object(Bucket=ANCHORS, Key=key)["VersionId"]
    with pytest.raises(ClientError):
        s3.delete_object(Bucket=ANCHORS, Key=key, VersionId=version)

    out = StringIO()
    call_command("audit_verify", "--org", org_a.slug, stdout=out)
    assert f"{org_a.slug}: OK, 3 events verified; 1 signed digest(s) match" in out.getvalue()
    assert audit_digest.latest(org_a.pk) == digest


@pytest.mark.django_db
def test_audit_verify_fails_in_a_cluster_when_there_are_no_anchors_at_all(org_a, s3, settings):
    _events(org_a, 2)
    audit.seal(organization=org_a)  # young events: not UNANCHORED by age
    out = StringIO()
    call_command("audit_verify", "--all", stdout=out)  # one machine: OK, nothing signed yet
    assert "no signed digest yet" in out.getvalue()

    settings.CLUSTER = True
    out = StringIO()
    with pytest.raises(CommandError, match="verification failed"):
        call_command("audit_verify", "--all", stdout=out)
    report = out.getvalue()
    assert "CADRE_CLUSTER is set but there is no signed digest at all" in report
    assert f"s3://{ANCHORS}/{s3.prefix}/audit-anchors/" in report
    assert _keys(s3, ANCHORS, f"{s3.prefix}/") == []  # verifying wrote nothing

    settings.CLUSTER = False  # beat signs (with this test machine's generated key)
    call_command("audit_digest", stdout=StringIO())
    settings.CLUSTER = True
    out = StringIO()
    call_command("audit_verify", "--all", stdout=out)
    assert "1 signed digest(s) match" in out.getvalue()


@pytest.mark.django_db
def test_doctor_fails_anchors_on_local_disk_in_a_cluster(settings, tmp_path, s3):
    assert [check.status for check in checks.doctor_checks()] == [OK, OK]
    settings.CLUSTER = True
    assert [check.status for check in checks.doctor_checks()] == [OK, OK]  # S3: fine
    settings.STORAGES = {
        **settings.STORAGES,
        "audit_anchors": {
            "BACKEND": "cadre.object_storage.WriteOnceFileSystemStorage",
            "OPTIONS": {"location": str(tmp_path / "anchors")},
        },
    }
    found = {check.name: check for check in checks.doctor_checks()}
    assert found["export storage"].status == OK
    assert found["audit anchors"].status == FAIL
    assert "this machine's disk" in found["audit anchors"].detail
    settings.CLUSTER = False
    assert {check.name: check.status for check in checks.doctor_checks()}["audit anchors"] == OK


def test_settings_read_the_s3_environment(tmp_path):
    """CADRE_S3_* as the compose file and the manifests set them; the secret from a file."""
    secret = tmp_path / "secret"
    secret.write_text("s3cr3t\n")
    code = (
        "import json, cadre.settings as s; "
        "print(json.dumps({k: s.STORAGES[k] for k in ('exports', 'audit_anchors')}))"
    )
    base = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("CADRE_S3_") and name != "CADRE_AUDIT_ANCHOR_DIR"
    }

    def storages_with(**env) -> dict:
        done = subprocess.run(
            [sys.executable, "-c", code],
            cwd=ROOT,
            env={
                **base,
                "PYTHONPATH": "platform",
                "CADRE_DATA_DIR": str(tmp_path),
                # read, never connected to: importing settings starts no embedded server
                "DATABASE_URL": "postgresql://cadre@127.0.0.1:9/cadre",
                "REDIS_URL": "redis://127.0.0.1:9/0",
                **env,
            },
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.strip().splitlines()[-1])

    local = storages_with()
    assert local["exports"]["BACKEND"] == "cadre.object_storage.DataDirStorage"
    assert local["audit_anchors"]["OPTIONS"]["location"] == str(tmp_path / "audit-anchors")
    assert local["audit_anchors"]["BACKEND"] == "cadre.object_storage.WriteOnceFileSystemStorage"

    remote = storages_with(
        CADRE_S3_BUCKET="exports-bucket",
        CADRE_S3_PREFIX="/cadre/",
        CADRE_S3_ENDPOINT_URL="http://127.0.0.1:9000",
        CADRE_S3_REGION="eu-west-1",
        CADRE_S3_ACCESS_KEY_ID="key",
        CADRE_S3_SECRET_ACCESS_KEY_FILE=str(secret),
    )
    exports, anchors = remote["exports"], remote["audit_anchors"]
    assert exports["BACKEND"] == "storages.backends.s3.S3Storage"
    assert exports["OPTIONS"]["bucket_name"] == "exports-bucket"
    assert exports["OPTIONS"]["location"] == "cadre"
    assert exports["OPTIONS"]["secret_key"] == "s3cr3t"
    assert exports["OPTIONS"]["addressing_style"] == "path"
    assert anchors["BACKEND"] == "cadre.object_storage.WriteOnceS3Storage"
    assert anchors["OPTIONS"]["bucket_name"] == "exports-bucket"  # same bucket, own prefix
    assert anchors["OPTIONS"]["location"] == "cadre/audit-anchors"

    separate = storages_with(CADRE_S3_BUCKET="exports-bucket", CADRE_S3_ANCHOR_BUCKET="anchors")
    assert separate["audit_anchors"]["OPTIONS"]["bucket_name"] == "anchors"
    assert separate["audit_anchors"]["OPTIONS"]["addressing_style"] is None


@pytest.mark.django_db
def test_refused_anchor_write_stores_nothing(org_a, s3):
    """A digest write refused because its name is taken leaves the bucket as it was."""
    _events(org_a, 1)
    audit.seal(organization=org_a)
    digest = audit.digest_write(org_a)
    before = _keys(s3, ANCHORS, f"{s3.prefix}/")
    with nothing_changes(AuditEvent), pytest.raises(object_storage.AlreadyWritten):
        audit_digest.write(digest)
    assert _keys(s3, ANCHORS, f"{s3.prefix}/") == before
