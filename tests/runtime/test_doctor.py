"""`doctor` passes on a sound installation and names each problem with its fix."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from io import StringIO
from pathlib import Path

import psycopg
import pytest
from cryptography.fernet import Fernet
from django.apps import apps
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection, models

from cadre.checks import APP_CHECKS, Check
from cadre.crypto import EncryptedTextField
from cadre.runtime.doctor import FAIL, OK, WARN, run_checks
from tests.agents.test_worker_e2e import worker  # noqa: F401 - fixture: a Celery worker

ROOT = Path(__file__).resolve().parents[2]
KEY_A = Fernet.generate_key().decode()
KEY_B = Fernet.generate_key().decode()


@pytest.fixture
def secret_notes(db):
    """A real table with an encrypted column, present for one test only."""

    class SecretNote(models.Model):
        secret = EncryptedTextField(blank=True)

        class Meta:
            app_label = "runtime"
            db_table = "runtime_test_secretnote"

        def __str__(self) -> str:
            return f"note {self.pk}"

    with connection.schema_editor() as editor:
        editor.create_model(SecretNote)  # rolled back with the test's transaction
    try:
        yield SecretNote
    finally:
        del apps.all_models["runtime"]["secretnote"]
        apps.clear_cache()


def by_name(checks, name):
    return [check for check in checks if check.name == name]


def doctor_output() -> tuple[str, bool]:
    out = StringIO()
    try:
        call_command("doctor", stdout=out)
    except CommandError:
        return out.getvalue(), False
    return out.getvalue(), True


@pytest.mark.django_db
def test_doctor_passes_on_the_test_environment():
    checks = run_checks()
    assert [check for check in checks if check.status == FAIL] == []
    names = {check.name for check in checks}
    assert {"database", "pgvector", "pg_trgm", "redis", "migrations", "encryption"} <= names
    assert by_name(checks, "pgvector")[0].status == OK
    output, passed = doctor_output()
    assert passed
    assert "OK    database" in output
    assert "0 FAIL" in output


@pytest.mark.django_db
def test_doctor_runs_the_checks_apps_register_and_none_when_none_are():
    with APP_CHECKS.overridden():
        platform_only = run_checks()
    assert [check for check in platform_only if check.status == FAIL] == []
    assert not [check for check in platform_only if check.name.startswith("connector ")]
    found = Check(FAIL, "sample app", "its table is empty", "add a row")
    with APP_CHECKS.overridden({"sample": lambda: [found]}):
        checks = run_checks()
    assert checks[-1] == found
    assert [check.name for check in checks[:-1]] == [check.name for check in platform_only]


def test_doctor_fails_when_a_stored_value_cannot_be_decrypted(secret_notes, settings):
    settings.CADRE_ENCRYPTION_KEYS = [KEY_A]
    note = secret_notes.objects.create(secret="webhook-signing-secret")
    settings.CADRE_ENCRYPTION_KEYS = [KEY_B]  # the key that wrote it is gone

    [encryption] = [c for c in by_name(run_checks(), "encryption") if c.status == FAIL]
    assert "1 stored value(s) cannot be decrypted" in encryption.detail
    assert f"runtime.SecretNote.secret: 1 (ids {note.pk})" in encryption.detail
    assert "CADRE_ENCRYPTION_KEY" in encryption.fix
    output, passed = doctor_output()
    assert not passed
    assert "FAIL  encryption" in output
    assert "fix: add the key that encrypted them back to CADRE_ENCRYPTION_KEY" in output


def test_rotation_moves_every_value_to_the_newest_key(secret_notes, settings):
    settings.CADRE_ENCRYPTION_KEYS = [KEY_A]
    for index in range(3):
        secret_notes.objects.create(secret=f"secret-{index}")
    secret_notes.objects.create(secret="")  # empty values are not encrypted, nor rotated

    settings.CADRE_ENCRYPTION_KEYS = [KEY_B, KEY_A]  # new key first: it encrypts
    [older] = by_name(run_checks(), "encryption")
    assert older.status == WARN
    assert "3 stored value(s) are under an older key" in older.detail
    assert "encryption_rotate" in older.fix

    out = StringIO()
    call_command("encryption_rotate", stdout=out)
    assert "runtime.SecretNote.secret: 3 rotated, 0 already current" in out.getvalue()

    settings.CADRE_ENCRYPTION_KEYS = [KEY_B]  # the old key can now go
    [done] = by_name(run_checks(), "encryption")
    assert done.status == OK
    assert sorted(secret_notes.objects.values_list("secret", flat=True)) == [
        "",
        "secret-0",
        "secret-1",
        "secret-2",
    ]
    out = StringIO()
    call_command("encryption_rotate", stdout=out)
    assert "0 rotated, 3 already current" in out.getvalue()


def test_rotation_refuses_values_no_key_can_read(secret_notes, settings):
    settings.CADRE_ENCRYPTION_KEYS = [KEY_A]
    secret_notes.objects.create(secret="lost")
    settings.CADRE_ENCRYPTION_KEYS = [KEY_B]
    with pytest.raises(CommandError, match="cannot be decrypted"):
        call_command("encryption_rotate", stdout=StringIO())


def run_doctor(tmp_path, **variables) -> subprocess.CompletedProcess:
    env = {key: val for key, val in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}
    env.update({"CADRE_DATA_DIR": str(tmp_path), **variables})
    return subprocess.run(
        [sys.executable, "-m", "cadre.runtime.cli", "doctor"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def empty_database(db):
    """A fresh, empty database on the test server: nothing migrated yet."""
    params = connection.settings_dict
    name = f"doctor_{uuid.uuid4().hex[:12]}"
    admin = {"host": params["HOST"], "user": params["USER"] or "postgres", "dbname": "postgres"}
    if params["PORT"]:
        admin["port"] = params["PORT"]
    with psycopg.connect(**admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    user = admin["user"]
    if params["HOST"].startswith("/"):
        url = f"postgresql://{user}:@/{name}?host={params['HOST']}"
    else:
        url = f"postgresql://{user}:{params['PASSWORD']}@{params['HOST']}:{params['PORT']}/{name}"
    try:
        yield url
    finally:
        with psycopg.connect(**admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_doctor_fails_when_migrations_are_pending(tmp_path, empty_database):
    result = run_doctor(tmp_path, DATABASE_URL=empty_database)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "OK    database" in result.stdout
    assert "FAIL  migrations" in result.stdout
    assert "fix: run: cadre manage migrate" in result.stdout


def test_doctor_fails_when_the_database_cannot_be_reached(tmp_path):
    result = run_doctor(tmp_path, DATABASE_URL="postgresql://nobody@127.0.0.1:9/nowhere")
    assert result.returncode == 1
    assert "FAIL  database" in result.stdout
    assert "check DATABASE_URL" in result.stdout


def test_cadre_doctor_reports_a_malformed_setting(tmp_path):
    result = run_doctor(tmp_path, CADRE_ENCRYPTION_KEY="not-a-key")
    assert result.returncode == 1
    assert "FAIL  settings  CADRE_ENCRYPTION_KEY:" in result.stdout


@pytest.mark.django_db
def test_doctor_shows_connections_in_use_against_the_maximum():
    with connection.cursor() as cursor:
        cursor.execute("SHOW max_connections")
        maximum = int(cursor.fetchone()[0])
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'"
        )
        in_use = cursor.fetchone()[0]
    [check] = by_name(run_checks(), "connections")
    assert check.status == OK
    used, available = (int(word) for word in check.detail.split()[0:5:4])
    assert in_use - 2 <= used <= in_use + 2  # other sessions may come and go meanwhile
    assert available < maximum  # superusers' reserved slots are not the application's
    assert check.detail.endswith(f"(max_connections {maximum})")


def test_doctor_warns_when_connections_near_the_limit():
    from cadre.runtime.doctor import connections_verdict

    assert connections_verdict(237, 297, 300).status == OK
    near = connections_verdict(238, 297, 300)
    assert near.status == WARN
    assert near.detail == "238 in use of 297 available (max_connections 300)"
    assert "DATABASE_POOL_SIZE" in near.fix
    assert connections_verdict(297, 297, 300).status == WARN


@pytest.mark.django_db(transaction=True)
def test_doctor_names_another_installs_workers_on_this_installs_queues(worker, tmp_path):  # noqa: F811
    """A real worker answers the doctor over Redis with its data folder and queues: seen from
    this install it is one of ours; seen from an install in another folder, a stranger."""
    from cadre.runtime.doctor import check_queue_consumers

    ours = check_queue_consumers(timeout=2.0)
    assert ours.status == OK and "1 worker(s) of this install" in ours.detail

    other = check_queue_consumers(data_dir=tmp_path, timeout=2.0)
    assert other.status == WARN
    assert "workers of another install take this install's tasks" in other.detail
    assert f"data in {settings.DATA_DIR}" in other.detail and worker in other.detail
    assert f"delete {tmp_path}/redis_db" in other.fix


def test_doctor_asks_about_other_installs_only_on_the_machines_redis(settings, monkeypatch):
    from cadre.runtime import doctor

    asked = []
    monkeypatch.setattr(
        doctor, "check_queue_consumers", lambda: asked.append(1) or Check(OK, "queues", "")
    )
    monkeypatch.setattr(doctor, "check_database", lambda: Check(FAIL, "database", "skipped"))
    settings.REDIS_EMBEDDED = False  # REDIS_URL set: replicas share its queues on purpose
    assert by_name(run_checks(), "queues") == [] and asked == []
    settings.REDIS_EMBEDDED = True  # attached to the machine's Redis on its own
    assert by_name(run_checks(), "queues") and asked == [1]


def test_doctor_names_each_console_package_missing_from_node_modules(settings, tmp_path):
    from cadre.runtime.doctor import check_frontend

    settings.FRONTEND_DIR = tmp_path
    (tmp_path / "package.json").write_text(
        '{"dependencies": {"htmx.org": "2.0.11", "lucide-static": "1.62.0"}}'
    )
    (tmp_path / "node_modules" / "htmx.org").mkdir(parents=True)
    (tmp_path / "node_modules" / "htmx.org" / "package.json").write_text("{}")
    stale = check_frontend()  # installed before the icons were added
    assert stale.status == WARN
    assert stale.detail.startswith("lucide-static missing") and "make frontend" in stale.fix
    (tmp_path / "node_modules" / "lucide-static").mkdir()
    (tmp_path / "node_modules" / "lucide-static" / "package.json").write_text("{}")
    assert check_frontend().status == OK
