"""The audit trail against whoever can write the database: the application's role cannot
truncate it or disable its triggers, a chain rewritten by the owner is caught by the signed
digests, and an export is verified against a trusted key only (issue 14, items 3 and 4)."""

from __future__ import annotations

import base64
import hashlib
import json
from io import StringIO

import psycopg
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.conf import settings
from django.core.management import call_command
from django.db import DatabaseError, connection, transaction

from cadre import signing
from cadre.governance import audit, audit_digest, export
from cadre.governance.models import AuditChainHead, AuditEvent
from cadre.tenancy.actors import member_actor, system_actor
from tests.governance.conftest import anchor_files


def _app_connection() -> psycopg.Connection:
    """A connection to the test database as the application's role (the runtime's)."""
    role = settings.DATABASE_APP_ROLE
    if not role:
        pytest.skip("no separate application role configured (DATABASE_OWNER_URL unset)")
    db = connection.settings_dict
    app = psycopg.connect(
        dbname=db["NAME"], user=role, host=db["HOST"] or None, port=db["PORT"] or None,
        autocommit=True, options="-c lock_timeout=5s -c cadre.audit_truncate=allow",
    )  # fmt: skip
    return app


def _events(organization, count: int) -> None:
    actor = system_actor(organization)
    for number in range(count):
        audit.record(actor=actor, action="member.update", target=("member", number, f"M{number}"))


@pytest.fixture
def digest_log(anchor_dir):
    return anchor_dir


@pytest.mark.django_db(transaction=True)
def test_app_role_cannot_truncate_the_audit_trail(org_a):
    _events(org_a, 3)
    audit.seal(organization=org_a)
    with _app_connection() as app:
        for table in ("governance_auditevent", "governance_auditchainhead"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                app.execute(f"TRUNCATE {table}")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            app.execute("DELETE FROM governance_auditevent")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            app.execute("UPDATE governance_auditevent SET reason = 'rewritten'")
        # what the app does need: reading, and recording
        assert app.execute("SELECT count(*) FROM governance_auditevent").fetchone()[0] == 3
    assert AuditEvent.objects.filter(organization=org_a).count() == 3
    assert audit.verify_chain(org_a)["ok"]


@pytest.mark.django_db(transaction=True)
def test_app_role_cannot_disable_the_audit_triggers(org_a):
    _events(org_a, 1)
    audit.seal(organization=org_a)
    with _app_connection() as app:
        for statement in (
            "ALTER TABLE governance_auditevent DISABLE TRIGGER ALL",
            "ALTER TABLE governance_auditevent DISABLE TRIGGER governance_auditevent_append_only",
            "SET session_replication_role = replica",
            "DROP TRIGGER governance_auditevent_no_truncate ON governance_auditevent",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                app.execute(statement)
        owner = app.execute(
            "SELECT pg_has_role(current_user, relowner, 'USAGE') FROM pg_class "
            "WHERE relname = 'governance_auditevent'"
        ).fetchone()[0]
        assert owner is False
    triggers = dict(
        _rows(
            "SELECT tgname, tgenabled FROM pg_trigger "
            "WHERE tgrelid = 'governance_auditevent'::regclass AND NOT tgisinternal"
        )
    )
    assert triggers == {
        "governance_auditevent_append_only": "O",
        "governance_auditevent_no_truncate": "O",
    }


def _rows(sql: str, params=()) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


@pytest.mark.django_db
def test_truncate_is_refused_even_to_the_owner_unless_it_opts_out(org_a):
    _events(org_a, 2)
    refused = pytest.raises(DatabaseError, match="TRUNCATE of governance_auditevent refused")
    with refused, transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # no pending FK checks in the way
        cursor.execute("SET LOCAL cadre.audit_truncate TO ''")
        cursor.execute("TRUNCATE governance_auditevent")
    assert AuditEvent.objects.filter(organization=org_a).count() == 2


def _rewrite_as_owner(organization, position: int, reason: str) -> None:
    """What the owner (or a superuser) can do: switch the trigger off, edit an event,
    recompute every later hash and the chain head, switch it back on."""
    events = list(
        AuditEvent.objects.sealed().filter(organization=organization).order_by("sequence")
    )
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # ALTER TABLE needs no pending checks
        cursor.execute(
            "ALTER TABLE governance_auditevent DISABLE TRIGGER governance_auditevent_append_only"
        )
        previous = events[position - 2].hash if position > 1 else audit.GENESIS_HASH
        for event in events[position - 1 :]:
            if event.sequence == position:
                event.reason = reason
            event.prev_hash = previous
            fields = {name: getattr(event, name) for name in audit._HASHED_FIELDS}
            event.hash = audit.event_hash(organization.pk, event.created_at, fields)
            cursor.execute(
                "UPDATE governance_auditevent SET reason = %s, prev_hash = %s, hash = %s "
                "WHERE id = %s",
                [event.reason, event.prev_hash, event.hash, event.pk],
            )
            previous = event.hash
        cursor.execute(
            "ALTER TABLE governance_auditevent ENABLE TRIGGER governance_auditevent_append_only"
        )
    AuditChainHead.objects.filter(organization=organization).update(hash=previous)


@pytest.mark.django_db
def test_chain_recomputed_by_the_owner_is_caught_by_the_signed_digest(org_a, digest_log):
    _events(org_a, 5)
    audit.seal(organization=org_a)
    digest = audit.digest_write(org_a)
    assert digest["sequence"] == 5 and digest["key_id"] == signing.key_id()
    assert audit.digest_write(org_a) is None  # the head has not moved
    (stored,) = anchor_files(digest_log)
    line = json.loads(stored.read_text())
    assert audit_digest.is_valid(line, signing.public_key())
    _events(org_a, 2)
    audit.seal(organization=org_a)

    _rewrite_as_owner(org_a, 3, "nothing happened")

    result = audit.verify_chain(org_a)
    assert result["ok"] is False
    assert result["broken"]["position"] == 5
    assert "differs from the digest signed at" in result["broken"]["problem"]
    assert "positions 1-5" in result["broken"]["problem"]
    with pytest.raises(audit.AuditChainBroken):
        audit.digest_write(org_a)  # the forgery is never signed
    assert anchor_files(digest_log) == [stored]
    out = StringIO()
    with pytest.raises(Exception, match="verification failed"):
        call_command("audit_verify", "--org", "acme", stdout=out)
    assert "BROKEN at position 5" in out.getvalue()


@pytest.mark.django_db
def test_removing_events_after_the_last_digest_is_caught(org_a, digest_log):
    _events(org_a, 4)
    audit.seal(organization=org_a)
    audit.digest_write(org_a)
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # ALTER TABLE needs no pending checks
        cursor.execute(
            "ALTER TABLE governance_auditevent DISABLE TRIGGER governance_auditevent_append_only"
        )
        cursor.execute(
            "DELETE FROM governance_auditevent WHERE organization_id = %s AND sequence > 2",
            [org_a.pk],
        )
        cursor.execute(
            "ALTER TABLE governance_auditevent ENABLE TRIGGER governance_auditevent_append_only"
        )
    head = AuditEvent.objects.sealed().filter(organization=org_a).order_by("-sequence").first()
    AuditChainHead.objects.filter(organization=org_a).update(sequence=2, hash=head.hash)
    result = audit.verify_chain(org_a)
    assert result["ok"] is False and "events were removed" in result["broken"]["problem"]


@pytest.mark.django_db
def test_a_forged_digest_line_is_reported(org_a, digest_log):
    _events(org_a, 2)
    audit.seal(organization=org_a)
    audit.digest_write(org_a)
    (stored,) = anchor_files(digest_log)
    forged = json.loads(stored.read_text())
    forged.update(sequence=1, hash="f" * 64)  # same key id, signature no longer matches
    forged_key = audit_digest.write(forged)
    result = audit.verify_chain(org_a)
    assert result["ok"] is False and forged_key in result["broken"]["problem"]


@pytest.mark.django_db
def test_a_digest_of_an_earlier_release_in_the_old_log_still_anchors(org_a, anchor_dir, settings):
    """An upgrade keeps its anchors: the old JSONL log is read beside the objects."""
    _events(org_a, 3)
    audit.seal(organization=org_a)
    head = AuditChainHead.objects.get(organization=org_a)
    digest = audit_digest.signed(organization_id=org_a.pk, sequence=3, hash=head.hash)
    settings.AUDIT_DIGEST_LOG.write_text(json.dumps(digest) + "\n")
    assert audit.verify_chain(org_a)["digests"]["trusted"] == 1
    assert audit.digest_write(org_a) is None  # the old log's digest is the last: head unmoved
    _rewrite_as_owner(org_a, 2, "nothing happened")
    result = audit.verify_chain(org_a)
    assert (
        result["ok"] is False and "differs from the digest signed at" in result["broken"]["problem"]
    )


# --- exports: verified against a trusted key, never the manifest's own ------------------


@pytest.fixture
def eager_celery():
    from cadre.celery import app

    previous = (app.conf.task_always_eager, app.conf.task_eager_propagates)
    app.conf.task_always_eager = app.conf.task_eager_propagates = True
    yield
    app.conf.task_always_eager, app.conf.task_eager_propagates = previous


def _export(alice, count=4):
    actor = member_actor(alice)
    for number in range(count):
        audit.record(actor=actor, action="member.update", target=("member", number, "M"))
    created = export.audit_export_create(actor=actor, formats=["jsonl"], mask=False)
    job = export.audit_export_run(export_id=created.pk)
    return settings.DATA_DIR / job.bundle_path  # the filesystem "exports" storage


def _verify_command(*args) -> tuple[int, str]:
    out = StringIO()
    try:
        call_command("audit_export_verify", *map(str, args), stdout=out)
    except SystemExit as exit:
        return int(exit.code), out.getvalue()
    return 0, out.getvalue()


def _resign_with_fresh_key(directory) -> str:
    """The forgery of the probe: edit a row, fix the manifest's hashes, sign it with a new
    key, and keep claiming the real key id."""
    rows_path = directory / "audit.jsonl"
    rows = rows_path.read_text().splitlines()
    row = json.loads(rows[1])
    row["reason"] = "never happened"
    rows[1] = json.dumps(row)
    rows_path.write_text("\n".join(rows) + "\n")
    manifest = json.loads((directory / "manifest.json").read_text())
    data = rows_path.read_bytes()
    for entry in manifest["files"]:
        if entry["name"] == "audit.jsonl":
            entry.update(sha256=hashlib.sha256(data).hexdigest(), bytes=len(data))
            entry["block_sha256"] = [hashlib.sha256(data).hexdigest()]
    fresh = Ed25519PrivateKey.generate()
    manifest["signing"]["public_key_pem"] = signing.public_key_pem(fresh.public_key())
    real_key_id = manifest["signing"]["key_id"]  # left as it was: the real instance key's
    data = json.dumps(manifest, indent=2, sort_keys=True).encode()
    (directory / "manifest.json").write_bytes(data)
    (directory / "manifest.sig").write_text(base64.b64encode(fresh.sign(data)).decode() + "\n")
    return real_key_id


@pytest.mark.django_db(transaction=True)
def test_export_resigned_with_a_fresh_key_fails_by_default(alice, eager_celery, digest_log):
    directory = _export(alice)
    real_key_id = _resign_with_fresh_key(directory)
    assert real_key_id == signing.key_id()

    report = export.verify_bundle(directory)
    assert not report.ok and report.key_id == ""
    status, output = _verify_command(directory)
    assert status == 1 and output.startswith("TAMPERED")
    assert "signature does not verify with this instance's key" in output
    assert real_key_id not in output and real_key_id[:16] not in output
    # pinning the real key id refuses the manifest's (fresh) key
    status, output = _verify_command(directory, "--key-id", real_key_id)
    assert status == 1 and "does not have the pinned key id" in output


@pytest.mark.django_db(transaction=True)
def test_genuine_export_verifies_and_names_the_key_that_verified(
    alice, eager_celery, digest_log, tmp_path
):
    audit.record(actor=member_actor(alice), action="member.update", target=("member", 9, "M"))
    audit.seal(organization=alice.organization)
    audit.digest_write(alice.organization)
    directory = _export(alice)
    real_key_id = signing.key_id()
    status, output = _verify_command(directory)
    assert status == 0, output
    assert f"signature by key {real_key_id}," in output and "1 signed digest(s)" in output
    pem = tmp_path / "instance.pem"
    pem.write_text(signing.public_key_pem())
    assert _verify_command(directory, "--public-key", pem)[0] == 0
    assert _verify_command(directory, "--key-id", real_key_id)[0] == 0
    other = tmp_path / "other.pem"
    other.write_text(signing.public_key_pem(Ed25519PrivateKey.generate().public_key()))
    status, output = _verify_command(directory, "--public-key", other)
    assert status == 1 and real_key_id not in output


@pytest.mark.django_db(transaction=True)
def test_export_of_a_chain_rewritten_after_a_digest_fails(alice, eager_celery, digest_log):
    organization = alice.organization
    _events(organization, 3)
    audit.seal(organization=organization)
    audit.digest_write(organization)
    _rewrite_as_owner(organization, 2, "nothing happened")
    directory = _export(alice, count=1)  # signed by the instance, honestly, over forged rows
    report = export.verify_bundle(directory)
    assert not report.ok
    assert any("differs from the digest signed at" in p.message for p in report.problems)


@pytest.mark.django_db
def test_public_key_is_published_without_authentication(client):
    response = client.get("/api/v1/audit/public-key/")
    assert response.status_code == 200
    body = response.json()
    assert body["algorithm"] == "Ed25519"
    assert body["key_id"] == signing.key_id(signing.load_public_key(body["public_key_pem"]))
    assert body["key_id"] == signing.key_id()
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    assert "/api/v1/audit/public-key/" in schema["paths"]


@pytest.mark.django_db
def test_console_export_page_shows_the_signing_key_and_fingerprint(alice, client_for):
    from django.urls import reverse

    page = client_for(alice).get(reverse("console:audit_exports"))
    assert page.status_code == 200
    text = page.content.decode()
    assert signing.key_id() in text
    assert signing.public_key_pem().splitlines()[1] in text
    assert "/api/v1/audit/public-key/" in text


@pytest.mark.django_db
def test_doctor_warns_when_the_app_connects_as_a_superuser_or_owner():
    from cadre.runtime.doctor import check_database_role

    check = check_database_role()  # the test database's connection is the owner's
    assert check.status == "WARN"
    assert "superuser" in check.detail or "owns governance_auditevent" in check.detail
    assert "DATABASE_OWNER_URL" in check.fix
