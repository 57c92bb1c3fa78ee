"""Audit export: bundle contents, signature, offline verification and tamper detection."""

from __future__ import annotations

import csv
import json
import tarfile
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.files.storage import FileSystemStorage
from django.core.management import call_command
from django.utils import timezone

from cadre.governance import audit, export
from cadre.governance.models import AuditExport
from cadre.tenancy.actors import member_actor
from tests.refusals import nothing_changes


@pytest.fixture
def data_dir(settings, tmp_path):
    settings.DATA_DIR = tmp_path
    return tmp_path


def _events(actor, count, reason="routine"):
    for number in range(count):
        audit.record(
            actor=actor,
            action="member.update" if number % 2 else "policy.denied",
            target=("member", number, f"Member {number}"),
            changes={"note": f"call 13812345678 about #{number}", "n": number},
            reason=reason,
        )


@pytest.fixture(autouse=True)
def eager_celery():
    """The export task runs in this process when its transaction commits."""
    from cadre.celery import app

    previous = (app.conf.task_always_eager, app.conf.task_eager_propagates)
    app.conf.task_always_eager = app.conf.task_eager_propagates = True
    yield
    app.conf.task_always_eager, app.conf.task_eager_propagates = previous


def _run(actor, **kwargs):
    created = export.audit_export_create(actor=actor, **kwargs)  # the task ran on commit
    result = export.audit_export_run(export_id=created.pk)  # idempotent: already completed
    assert result.finished_at is not None
    return result


@pytest.mark.django_db(transaction=True)
def test_export_writes_signed_bundle_that_verifies(alice, data_dir):
    actor = member_actor(alice)
    _events(actor, 25)
    result = _run(actor, formats=["jsonl", "csv", "ocsf"], mask=False)
    assert result.status == AuditExport.Status.COMPLETED
    directory = data_dir / result.bundle_path
    manifest = json.loads((directory / "manifest.json").read_text())
    # the range ends when the export was requested: the request event itself is after it
    assert manifest["rows"] == 25
    assert manifest["chain"]["first"]["sequence"] == 1
    assert manifest["chain"]["contiguous"] is True
    assert {f["name"] for f in manifest["files"]} == {
        "audit.jsonl",
        "audit.csv",
        "audit.ocsf.jsonl",
        "digests.jsonl",
    }
    rows = [json.loads(line) for line in (directory / "audit.jsonl").read_text().splitlines()]
    assert [row["sequence"] for row in rows] == list(range(1, 26))
    with open(directory / "audit.csv", newline="") as handle:
        assert len(list(csv.DictReader(handle))) == 25
    ocsf = json.loads((directory / "audit.ocsf.jsonl").read_text().splitlines()[0])
    assert ocsf["class_uid"] == 6003 and ocsf["type_uid"] == 600300 + ocsf["activity_id"]
    report = export.verify_bundle(directory)
    assert report.ok, [str(p) for p in report.problems]
    tar = export.tar_bundle(export.stored_bundle(result), data_dir / "bundle.tar")
    tar_report = export.verify_bundle(tar)
    assert tar_report.ok, [str(p) for p in tar_report.problems]
    assert result.progress == 1.0


@pytest.mark.django_db(transaction=True)
def test_edited_row_is_pinpointed_to_its_line(alice, data_dir):
    actor = member_actor(alice)
    _events(actor, 12)
    result = _run(actor, formats=["jsonl"], mask=False)
    path = data_dir / result.bundle_path / "audit.jsonl"
    lines = path.read_text().splitlines()
    row = json.loads(lines[6])
    row["reason"] = "nothing to see here"
    lines[6] = json.dumps(row, ensure_ascii=False, separators=(",", ":"))
    path.write_text("\n".join(lines) + "\n")
    report = export.verify_bundle(path.parent)
    assert not report.ok
    messages = [str(problem) for problem in report.problems]
    assert "audit.jsonl line 7: content does not match the event's hash (edited)" in messages
    assert any("lines 1-1000: content differs from the signed manifest" in m for m in messages)


@pytest.mark.django_db(transaction=True)
def test_deleted_row_breaks_the_chain_even_when_masked(alice, data_dir):
    actor = member_actor(alice)
    _events(actor, 12)
    result = _run(actor, formats=["jsonl"])
    path = data_dir / result.bundle_path / "audit.jsonl"
    lines = path.read_text().splitlines()
    del lines[4]
    path.write_text("\n".join(lines) + "\n")
    report = export.verify_bundle(path.parent)
    assert not report.ok
    messages = [str(problem) for problem in report.problems]
    assert "audit.jsonl line 5: sequence jumps from 4 to 6: events were removed" in messages
    assert "audit.jsonl: 11 rows, the manifest says 12" in messages


@pytest.mark.django_db(transaction=True)
def test_altered_manifest_fails_signature(alice, data_dir):
    actor = member_actor(alice)
    _events(actor, 3)
    result = _run(actor, formats=["jsonl"])
    manifest_path = data_dir / result.bundle_path / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["rows"] = 999
    manifest_path.write_text(json.dumps(manifest, indent=2, sort_keys=True))
    report = export.verify_bundle(manifest_path.parent)
    assert not report.ok
    assert any("signature does not verify" in p.message for p in report.problems)


@pytest.mark.django_db(transaction=True)
def test_bundle_signed_by_another_key_is_refused_when_key_given(alice, data_dir):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    actor = member_actor(alice)
    _events(actor, 2)
    result = _run(actor, formats=["jsonl"])
    other = (
        Ed25519PrivateKey.generate()
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    report = export.verify_bundle(data_dir / result.bundle_path, public_key_pem=other)
    assert not report.ok


@pytest.mark.django_db(transaction=True)
def test_masked_export_leaks_no_original_value(alice, data_dir):
    actor = member_actor(alice)
    audit.record(
        actor=actor,
        action="member.update",
        target=("member", 1, "Zhang, 13812345678"),
        changes={"after": {"email": "wang.fang@example.com", "note": ["id 110101199003074477"]}},
        reason="phone 13812345678 changed",
    )
    result = _run(actor, formats=["jsonl", "csv", "ocsf"])
    directory = data_dir / result.bundle_path
    for name in ("audit.jsonl", "audit.csv", "audit.ocsf.jsonl"):
        text = (directory / name).read_text()
        for original in ("13812345678", "wang.fang@example.com", "110101199003074477"):
            assert original not in text, (name, original)
    assert export.verify_bundle(directory).ok


@pytest.mark.django_db(transaction=True)
def test_time_range_and_filters_select_rows(alice, data_dir):
    actor = member_actor(alice)
    _events(actor, 10)
    result = _run(actor, formats=["jsonl"], filters={"action": "policy."}, mask=False)
    rows = [
        json.loads(line)
        for line in (data_dir / result.bundle_path / "audit.jsonl").read_text().splitlines()
    ]
    assert len(rows) == 5 and {row["action"] for row in rows} == {"policy.denied"}
    assert export.verify_bundle(data_dir / result.bundle_path).ok
    future = _run(
        actor,
        formats=["jsonl"],
        since=timezone.now() + timedelta(hours=1),
        until=timezone.now() + timedelta(hours=2),
    )
    assert future.rows_written == 0


@pytest.mark.django_db(transaction=True)
def test_export_of_large_range_streams_in_bounded_memory(alice, data_dir):
    """Peak Python allocations while exporting stay far below the size of the data."""
    import tracemalloc

    actor = member_actor(alice)
    organization = alice.organization
    long_reason = "x" * 400

    def rows():  # 30,000 synthetic rows shaped like the export's own
        for number in range(1, 20_001):
            yield {
                "id": number,
                "organization": organization.pk,
                "sequence": number,
                "created_at": "2026-01-01T00:00:00+00:00",
                "actor_type": "member",
                "actor_id": "1",
                "actor_label": "Alice",
                "action": "member.update",
                "target_type": "member",
                "target_id": str(number),
                "target_label": "",
                "changes": {"n": number},
                "reason": f"{long_reason}{number}",
                "request_id": "",
                "trace_id": "",
                "ip": None,
                "user_agent": "",
                "prev_hash": "0" * 64,
                "hash": f"{number:064x}",
            }

    tracemalloc.start()
    result = export.write_bundle(
        data_dir / "big", rows(), formats=["jsonl", "csv", "ocsf"], organization=organization
    )
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    written = sum(f["bytes"] for f in result.manifest["files"])
    assert result.rows == 20_000
    assert written > 20_000_000
    assert peak < 8_000_000, peak  # file buffers and the masking cache, not the data
    assert actor is not None


@pytest.mark.django_db(transaction=True)
def test_paging_reads_all_rows(alice):
    actor = member_actor(alice)
    _events(actor, 23)
    rows = list(export.export_rows(alice.organization, page_size=5))
    assert [row["sequence"] for row in rows] == list(range(1, 24))


@pytest.mark.django_db(transaction=True)
def test_audit_export_verify_command_reports_tampering(alice, data_dir, capsys):
    actor = member_actor(alice)
    _events(actor, 5)
    result = _run(actor, formats=["jsonl"], mask=False)
    directory = data_dir / result.bundle_path
    tar = export.tar_bundle(export.stored_bundle(result), data_dir / "bundle.tar")
    call_command("audit_export_verify", str(tar))
    assert "OK" in capsys.readouterr().out
    path = directory / "audit.jsonl"
    path.write_text(path.read_text().replace("member.update", "member.updatE", 1))
    with pytest.raises(SystemExit) as exited:
        call_command("audit_export_verify", str(directory))
    assert exited.value.code == 1
    out = capsys.readouterr().out
    assert "audit.jsonl line 2" in out


@pytest.mark.django_db
def test_unmasked_export_needs_policy_manage(make_member):
    from cadre.errors import NotPermitted

    auditor = make_member(roles=["auditor"])
    with pytest.raises(NotPermitted):
        export.audit_export_create(actor=member_actor(auditor), mask=False)


def test_tar_layout_has_one_folder(tmp_path):
    folder = tmp_path / "7"
    folder.mkdir()
    (folder / "manifest.json").write_text("{}")
    bundle = export.StoredBundle(key="7", storage=FileSystemStorage(location=tmp_path))
    tar = export.tar_bundle(bundle, tmp_path / "out.tar")
    with tarfile.open(tar) as archive:
        assert archive.getnames() == ["7/manifest.json"]
        assert archive.extractfile("7/manifest.json").read() == b"{}"
    assert Path(tar).stat().st_size % 512 == 0


# --- API ----------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_api_creates_follows_and_downloads_an_export(alice, client_for, data_dir):
    import io

    client = client_for(alice)
    _events(member_actor(alice), 4)
    created = client.post("/api/v1/audit-exports/", {"formats": ["jsonl", "ocsf"]}, format="json")
    assert created.status_code == 202, created.json()
    job = client.get(f"/api/v1/audit-exports/{created.json()['id']}/").json()
    assert job["status"] == "completed" and job["rows_written"] == 4 and job["progress"] == 1.0
    response = client.get(f"/api/v1/audit-exports/{job['id']}/download/")
    assert response.status_code == 200 and response["Content-Type"] == "application/x-tar"
    archive_bytes = b"".join(response.streaming_content)
    (data_dir / "download.tar").write_bytes(archive_bytes)
    assert export.verify_bundle(data_dir / "download.tar").ok
    with tarfile.open(fileobj=io.BytesIO(archive_bytes)) as archive:
        assert f"{job['id']}/manifest.sig" in archive.getnames()
    assert len(client.get("/api/v1/audit-exports/").json()["results"]) == 1


@pytest.mark.django_db
def test_api_export_permissions(alice, bob, charlie, make_member, client_for):
    job = AuditExport.objects.create(organization=alice.organization, formats=["jsonl"])
    with nothing_changes(AuditExport):
        assert client_for(bob).post("/api/v1/audit-exports/", {}, format="json").status_code == 403
    assert client_for(charlie).get(f"/api/v1/audit-exports/{job.pk}/").status_code == 404
    auditor = make_member(roles=["auditor"])
    assert client_for(auditor).get(f"/api/v1/audit-exports/{job.pk}/").status_code == 200
    not_ready = client_for(auditor).get(f"/api/v1/audit-exports/{job.pk}/download/")
    assert not_ready.status_code == 409
    with nothing_changes(AuditExport):
        bad = client_for(alice).post("/api/v1/audit-exports/", {"formats": ["xml"]}, format="json")
    assert bad.status_code == 400


@pytest.mark.django_db
def test_audit_stream_writes_masked_json_lines(alice, capsys):
    actor = member_actor(alice)
    audit.record(
        actor=actor, action="member.update", target=("member", 1), reason="call 13812345678"
    )
    call_command("audit_stream", "--org", alice.organization.slug)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1
    row = json.loads(lines[0])
    assert row["action"] == "member.update" and "13812345678" not in lines[0]
    call_command("audit_stream", "--org", alice.organization.slug, "--after-sequence", "1")
    assert capsys.readouterr().out == ""
