"""A backup restores (issue 35, item 6): the procedure of docs/operations.md ("Backups"), run
for real. An organization with audited activity, a sealed and signed audit chain, an encrypted
connector credential and an embedded memory is dumped with `pg_dump` as the schema owner,
beside a copy of the audit anchors taken before the dump; the dump is restored with
`pg_restore` into a fresh database, and a new process (another machine's: an empty data folder,
only the secrets in its environment, connected as the application role) verifies the audit
trail, decrypts the credential and finds the memory by its vector. Anchors that do not belong
to this backup and a row edited after the restore are caught."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from io import StringIO
from pathlib import Path

import psycopg
import pytest
from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.conf import settings
from django.core.management import CommandError, call_command
from django.db import connection

from cadre import signing
from cadre.memory import embeddings
from cadre.memory import services as memory_services
from cadre.memory.models import MemoryEmbedding
from cadre.tenancy.actors import member_actor
from connectors.base.services import connector_create

ROOT = Path(__file__).resolve().parents[2]
CREDENTIALS = {"app_id": "cli_backup", "app_secret": "restored-secret-7"}
MEMORY = "The quarterly board pack goes to the CFO as a PDF on the first Monday"
UNRELATED = "The office in Shenzhen closes early on Fridays in August"

# What the restored installation runs: Cadre's own code reading through the application role.
CHECK = """
import json
from io import StringIO
from django.core.management import CommandError, call_command
from cadre.memory.selectors import memory_search
from cadre.tenancy.actors import member_actor
from cadre.tenancy.models import Member
from connectors.models import Connector
report = StringIO()
try:
    call_command("audit_verify", "--all", stdout=report)
    verified = True
except CommandError:
    verified = False
member = Member.objects.get(pk=facts["member"])
hits = memory_search(
    actor=member_actor(member), query=facts["query"], query_vector=facts["vector"],
    mode="vector", top_k=3,
).hits
print(json.dumps({
    "verified": verified,
    "report": report.getvalue(),
    "credentials": Connector.objects.get(pk=facts["connector"]).credentials,
    "hits": [hit.memory.pk for hit in hits],
}))
"""


def pg_binary(name: str) -> str:
    """The PostgreSQL client the test server ships with (pgserver's), else the system's."""
    from pgserver._commands import POSTGRES_BIN_PATH

    shipped = POSTGRES_BIN_PATH / name
    found = str(shipped) if shipped.exists() else shutil.which(name)
    if not found:
        pytest.skip(f"{name} not found")
    return found


def database_url(user: str, name: str) -> str:
    params = connection.settings_dict
    if params["HOST"].startswith("/"):
        return f"postgresql://{user}:@/{name}?host={params['HOST']}"
    password = params["PASSWORD"] if user == params["USER"] else ""
    return f"postgresql://{user}:{password}@{params['HOST']}:{params['PORT']}/{name}"


def owner_connection(name: str) -> psycopg.Connection:
    return psycopg.connect(database_url(connection.settings_dict["USER"], name), autocommit=True)


def private_pem(key: Ed25519PrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


def digests_of(organization, anchors: Path) -> int:
    """The signed digests of the organization in an anchor directory (one object each)."""
    return len(list(anchors.glob(f"org-{organization.pk}/*/*.json")))


def cadre(arguments: list[str], env: dict, *extra) -> subprocess.CompletedProcess:
    """`cadre <arguments>` in a new process, as an operator on the restored machine runs it."""
    return subprocess.run(
        [sys.executable, "-m", "cadre.runtime.cli", *arguments, *extra],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


# What the application role may do on the audit events (insert; not update, not truncate) and
# on an ordinary table (update), and how many relations it owns.
APP_PRIVILEGES = (True, False, False, True, 0)


def app_privileges(name: str, role: str) -> tuple:
    with owner_connection(name) as owner:
        return owner.execute(
            "SELECT has_table_privilege(%(role)s, 'governance_auditevent', 'INSERT'), "
            "has_table_privilege(%(role)s, 'governance_auditevent', 'UPDATE'), "
            "has_table_privilege(%(role)s, 'governance_auditevent', 'TRUNCATE'), "
            "has_table_privilege(%(role)s, 'connectors_connector', 'UPDATE'), "
            "(SELECT count(*) FROM pg_class c JOIN pg_roles r ON r.oid = c.relowner "
            " WHERE r.rolname = %(role)s)",
            {"role": role},
        ).fetchone()


def anchor_storage(directory: Path) -> dict:
    return {
        "BACKEND": "cadre.object_storage.WriteOnceFileSystemStorage",
        "OPTIONS": {"location": str(directory / "audit-anchors")},
    }


def verify_restored(name: str) -> str:
    """`audit_verify --all` on database `name` (this process's connection, pointed there for
    the call); its report, once it has failed."""
    saved = connection.settings_dict["NAME"]
    connection.close()
    connection.settings_dict["NAME"] = name
    report = StringIO()
    try:
        with pytest.raises(CommandError, match="verification failed"):
            call_command("audit_verify", "--all", stdout=report)
    finally:
        connection.close()
        connection.settings_dict["NAME"] = saved
    return report.getvalue()


@pytest.fixture
def installation(monkeypatch, settings, tmp_path):
    """This installation's signing key (in the environment, as on a cluster) and its anchors."""
    monkeypatch.setenv("CADRE_SIGNING_KEY", private_pem(Ed25519PrivateKey.generate()))
    signing.forget_key()
    settings.STORAGES = {**settings.STORAGES, "audit_anchors": anchor_storage(tmp_path / "live")}
    settings.AUDIT_DIGEST_LOG = tmp_path / "live" / "audit-digests.jsonl"  # none: new layout
    yield
    signing.forget_key()


@pytest.fixture
def restored_database():
    """The name of a fresh database on the test server, dropped at the end."""
    name = f"{connection.settings_dict['NAME']}_restored_{uuid.uuid4().hex[:8]}"
    with owner_connection("postgres") as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield name
    finally:
        with owner_connection("postgres") as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.django_db(transaction=True)
def test_backup_restores_into_a_fresh_database_and_its_audit_trail_verifies(
    installation, restored_database, org_a, alice, bob, tmp_path, settings
):
    app_role = settings.DATABASE_APP_ROLE
    if not app_role:
        pytest.skip("no separate application role configured (DATABASE_OWNER_URL unset)")

    # --- an installation with history --------------------------------------------------------
    connector = connector_create(
        actor=member_actor(alice), platform="feishu", name="Feishu", credentials=CREDENTIALS
    )
    memory = memory_services.memory_add(
        actor=member_actor(bob),
        scope="user",
        kind="preference",
        content=MEMORY,
        source_kind="user_statement",
    )
    other = memory_services.memory_add(
        actor=member_actor(bob),
        scope="user",
        kind="fact",
        content=UNRELATED,
        source_kind="user_statement",
    )
    assert embeddings.embed_memories([memory, other]) == 2
    model = embeddings.active_model(org_a)
    query = "Who gets the board pack, and in what format?"
    query_vector = [float(x) for x in embeddings.provider_for(model).embed([query], query=True)[0]]
    call_command("audit_seal", "--all", stdout=StringIO())
    call_command("audit_digest", stdout=StringIO())
    live_anchors = tmp_path / "live" / "audit-anchors"
    assert digests_of(org_a, live_anchors) == 1

    # --- the backup: the anchors first, then the database as its owner -------------------------
    backup = tmp_path / "backup"
    backup.mkdir()
    shutil.copytree(live_anchors, backup / "audit-anchors")
    source = connection.settings_dict["NAME"]
    dump = backup / "cadre.dump"
    environment = {key: value for key, value in os.environ.items() if key != "PGOPTIONS"}
    subprocess.run(
        [pg_binary("pg_dump"), "-Fc", "-f", str(dump), "-d", database_url("postgres", source)],
        check=True,
        env=environment,
        timeout=60,
    )
    # Life goes on after the backup: one more audited change, sealed and signed.
    connector_create(
        actor=member_actor(alice), platform="feishu", name="Later", credentials=CREDENTIALS
    )
    call_command("audit_digest", stdout=StringIO())
    assert digests_of(org_a, live_anchors) == 2

    # --- the restore: into a fresh database, as the owner ---------------------------------------
    restore = subprocess.run(
        [pg_binary("pg_restore"), "--no-owner", "--exit-on-error", "-d",
         database_url("postgres", restored_database), str(dump)],
        env=environment, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert restore.returncode == 0, restore.stderr

    # The application role existed on this server: the dump's GRANTs and REVOKEs carried its
    # privileges over, and it still owns nothing (it cannot switch the audit triggers off).
    assert app_privileges(restored_database, app_role) == APP_PRIVILEGES

    # A new machine: an empty data folder, the same secrets in the environment, the restored
    # database through the application role (migrations through the owner).
    restored_env = {
        **environment,
        "CADRE_TESTING": "0",
        "CADRE_DATA_DIR": str(tmp_path / "restored-machine"),
        "DATABASE_URL": database_url(app_role, restored_database),
        "DATABASE_OWNER_URL": database_url("postgres", restored_database),
        "REDIS_URL": settings.REDIS_URL,
        "SECRET_KEY": settings.SECRET_KEY,
        "CADRE_ENCRYPTION_KEY": ",".join(settings.CADRE_ENCRYPTION_KEYS),
        "CADRE_SIGNING_KEY": os.environ["CADRE_SIGNING_KEY"],
        "CADRE_AUDIT_ANCHOR_DIR": str(backup / "audit-anchors"),
    }

    # Where the restore could not grant them (another role name, --no-privileges), the owner's
    # migrate grants them again: the restore procedure's third step.
    with owner_connection(restored_database) as owner:
        owner.execute(f'REVOKE ALL ON ALL TABLES IN SCHEMA public FROM "{app_role}"')
        owner.execute(f'REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM "{app_role}"')
    assert app_privileges(restored_database, app_role) == (False, False, False, False, 0)
    migrated = cadre(["manage", "migrate", "--no-input"], restored_env)
    assert migrated.returncode == 0, migrated.stdout + migrated.stderr
    assert "No migrations to apply" in migrated.stdout, migrated.stdout
    assert app_privileges(restored_database, app_role) == APP_PRIVILEGES

    # What an operator runs there, `cadre manage audit_verify --all`, then what the app reads.
    facts = {"member": bob.pk, "connector": connector.pk, "query": query, "vector": query_vector}
    checked = cadre(["manage", "shell", "-c", f"facts = {facts!r}\n{CHECK}"], restored_env)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    found = json.loads(checked.stdout.strip().splitlines()[-1])
    line = next(text for text in found["report"].splitlines() if text.startswith("acme:"))
    assert found["verified"] and "acme: OK," in line, found["report"]
    assert "1 signed digest(s) match" in line, line
    assert found["credentials"] == CREDENTIALS
    assert found["hits"][:1] == [memory.pk], found["hits"]
    # ...by its restored vector, through the restored HNSW index of its embedding model.
    with owner_connection(restored_database) as owner:
        vectors = owner.execute(
            f"SELECT count(*) FROM {MemoryEmbedding._meta.db_table} WHERE memory_id = ANY(%s)",
            [[memory.pk, other.pk]],
        ).fetchone()[0]
        index = owner.execute(
            "SELECT count(*) FROM pg_indexes WHERE indexname = %s AND indexdef ILIKE %s",
            [embeddings.index_name(model), "%hnsw%"],
        ).fetchone()[0]
    assert (vectors, index) == (2, 1)

    # Without the same encryption key the credential is lost: its ciphertext opens for no other.
    with owner_connection(restored_database) as owner:
        (stored,) = owner.execute(
            "SELECT credentials_encrypted FROM connectors_connector WHERE id = %s", [connector.pk]
        ).fetchone()
    assert CREDENTIALS["app_secret"] not in stored
    with pytest.raises(InvalidToken):
        Fernet(Fernet.generate_key()).decrypt(stored.encode())

    # --- anchors that are not this backup's, a row edited after the restore -------------------
    # (the same command in this process, on the restored database: a new process costs seconds)
    # The live anchors, newer than the dump, hold the head of a chain the restore no longer has:
    # the event written after the backup is reported lost, not silently forgotten.
    newer = verify_restored(restored_database)
    assert "acme: BROKEN" in newer and "events were removed" in newer, newer

    with owner_connection(restored_database) as owner:
        owner.execute(
            "ALTER TABLE governance_auditevent DISABLE TRIGGER governance_auditevent_append_only"
        )
        owner.execute(
            "UPDATE governance_auditevent SET reason = 'nothing happened' "
            "WHERE organization_id = %s AND sequence = 1",
            [org_a.pk],
        )
        owner.execute(
            "ALTER TABLE governance_auditevent ENABLE TRIGGER governance_auditevent_append_only"
        )
    settings.STORAGES = {**settings.STORAGES, "audit_anchors": anchor_storage(backup)}
    tampered = verify_restored(restored_database)
    assert "acme: BROKEN at position 1" in tampered, tampered
    assert "content does not match its hash" in tampered, tampered


@pytest.mark.django_db
def test_anchors_of_another_installation_fail_audit_verify(
    installation, org_a, alice, monkeypatch, tmp_path
):
    connector_create(
        actor=member_actor(alice), platform="feishu", name="Feishu", credentials=CREDENTIALS
    )
    call_command("audit_seal", "--all", stdout=StringIO())
    ours = os.environ["CADRE_SIGNING_KEY"]
    # The other installation signs this chain's head into the anchors with its own key.
    monkeypatch.setenv("CADRE_SIGNING_KEY", private_pem(Ed25519PrivateKey.generate()))
    signing.forget_key()
    call_command("audit_digest", stdout=StringIO())
    assert digests_of(org_a, tmp_path / "live" / "audit-anchors") == 1
    monkeypatch.setenv("CADRE_SIGNING_KEY", ours)
    signing.forget_key()
    # The restored chain is older than a few digest intervals (here: intervals of a millisecond).
    schedule = {**settings.CELERY_BEAT_SCHEDULE}
    schedule["governance-audit-digest"] = {**schedule["governance-audit-digest"], "schedule": 0.001}
    monkeypatch.setattr(settings, "CELERY_BEAT_SCHEDULE", schedule)
    out = StringIO()
    with pytest.raises(CommandError):
        call_command("audit_verify", "--all", stdout=out)
    assert f"{org_a.slug}: UNANCHORED (1 digest(s) are signed by another key" in out.getvalue()
