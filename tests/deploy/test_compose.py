"""deploy/compose.yaml validates against the Compose Specification and keeps its invariants.

No Docker daemon runs where the suite runs, so the file is checked, not started: against the
Compose Specification's JSON schema (vendored in the `check-jsonschema` package: nothing is
downloaded), then for what the schema cannot say: a healthcheck on every long-running service,
the migration alone as the schema owner, exactly one beat, the stream process present, every
process running cadre.runtime.processes' command line, every variable it needs documented in
deploy/.env.example. The application role's script runs for real against the test server.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import uuid
from importlib import resources
from pathlib import Path

import jsonschema
import psycopg
import pytest
import yaml
from django.db import connection
from psycopg import sql

from cadre.celery import task_queues
from cadre.runtime import processes

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
COMPOSE = DEPLOY / "compose.yaml"
OWNER_USER = "cadre"  # POSTGRES_USER of the db service
APP_USER = "cadre_app"
ONE_SHOTS = {"db-roles", "buckets", "migrate"}
CADRE_SERVICES = {"migrate", *processes.KINDS}
# ${NAME}, ${NAME:-default}, ${NAME:?error}, ... ($$ is a literal dollar).
VARIABLE = re.compile(r"(?<!\$)\$\{([A-Za-z_][A-Za-z0-9_]*)")


@pytest.fixture(scope="module")
def compose() -> dict:
    # safe_load resolves the `<<` merge keys as Compose does.
    return yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def services(compose) -> dict[str, dict]:
    return compose["services"]


def _compose_schema() -> dict:
    schema = resources.files("check_jsonschema.builtin_schemas.vendor") / "compose-spec.json"
    return json.loads(schema.read_text(encoding="utf-8"))


def _environment(service: dict) -> dict[str, str]:
    environment = service.get("environment", {})
    if isinstance(environment, list):
        environment = dict(item.split("=", 1) for item in environment)
    return {name: "" if value is None else str(value) for name, value in environment.items()}


def _user_of(url: str) -> str:
    return url.split("://", 1)[1].split(":", 1)[0]


def _long_running(services: dict[str, dict]) -> dict[str, dict]:
    return {name: s for name, s in services.items() if s.get("restart") != "no"}


def test_compose_file_validates_against_the_compose_specification(compose):
    schema = _compose_schema()
    validator_class = jsonschema.validators.validator_for(schema)
    validator_class.check_schema(schema)
    errors = sorted(validator_class(schema).iter_errors(compose), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors)


def test_the_schema_catches_a_misspelt_field(compose):
    """The validation above is not vacuous: a typo in a service is an error."""
    schema = _compose_schema()
    broken = json.loads(json.dumps(compose))
    broken["services"]["web"]["helthcheck"] = broken["services"]["web"].pop("healthcheck")
    validator = jsonschema.validators.validator_for(schema)(schema)
    assert any("helthcheck" in error.message for error in validator.iter_errors(broken))


def test_every_long_running_service_has_a_healthcheck(services):
    long_running = _long_running(services)
    assert set(long_running) == {"db", "redis", "object-storage", *processes.KINDS}
    for name, service in long_running.items():
        check = service.get("healthcheck", {})
        assert check.get("test") and not check.get("disable"), name
        assert service.get("restart") == "unless-stopped", name


def test_one_shots_run_to_completion_before_what_needs_them(services):
    for name in ONE_SHOTS:
        assert services[name]["restart"] == "no", name
    assert services["migrate"]["depends_on"]["db-roles"] == {
        "condition": "service_completed_successfully"
    }
    assert services["migrate"]["depends_on"]["buckets"] == {
        "condition": "service_completed_successfully"
    }
    for name in processes.KINDS:
        depends = services[name]["depends_on"]
        assert depends["migrate"] == {"condition": "service_completed_successfully"}, name
        for needed in ("db", "redis", "object-storage"):
            assert depends[needed] == {"condition": "service_healthy"}, (name, needed)


def test_migration_runs_as_the_owner_and_nothing_else_does(services):
    migrate = _environment(services["migrate"])
    assert services["migrate"]["command"] == processes.MIGRATE
    assert _user_of(migrate["DATABASE_OWNER_URL"]) == OWNER_USER
    assert _user_of(migrate["DATABASE_URL"]) == APP_USER
    assert services["db"]["environment"]["POSTGRES_USER"] == OWNER_USER
    assert services["db-roles"]["environment"]["CADRE_APP_ROLE"] == APP_USER
    for name in processes.KINDS:
        environment = _environment(services[name])
        # Set, and empty: a DATABASE_OWNER_URL in .env (env_file) is overridden.
        assert environment["DATABASE_OWNER_URL"] == "", name
        assert _user_of(environment["DATABASE_URL"]) == APP_USER, name
        assert "POSTGRES_PASSWORD" not in environment, name
        assert "POSTGRES_PASSWORD" not in environment["DATABASE_URL"], name


def test_processes_run_the_shared_command_lines(services, settings):
    expected = processes.commands(settings)
    assert set(expected) == set(processes.KINDS)
    for kind in processes.KINDS:
        if kind == processes.WEB:
            # The image's default command.
            assert "command" not in services[kind] and "entrypoint" not in services[kind]
        else:
            assert services[kind]["command"] == expected[kind], kind


def test_the_image_default_command_is_the_web_process(settings):
    dockerfile = (DEPLOY / "Dockerfile").read_text(encoding="utf-8")
    (cmd,) = re.findall(r"^CMD (\[.*?\])\s*$", dockerfile.replace("\\\n", " "), re.M | re.S)
    assert json.loads(cmd) == processes.commands(settings)[processes.WEB]


def test_exactly_one_beat_and_a_stream_process(services):
    beats = [
        name
        for name, service in services.items()
        if service.get("command", [])[:4] == ["celery", "-A", "cadre", "beat"]
    ]
    assert beats == ["beat"]
    beat = services["beat"]
    assert "scale" not in beat and beat.get("deploy", {}).get("replicas", 1) == 1
    assert "--schedule" not in beat["command"], "beat's schedule lives in Redis, not a file"
    assert services["streams"]["command"] == ["cadre", "streams"]


def test_workers_consume_every_queue_exactly_once(services):
    consumed = []
    for service in services.values():
        command = service.get("command", [])
        if command[:4] == ["celery", "-A", "cadre", "worker"]:
            consumed += command[command.index("-Q") + 1].split(",")
    assert sorted(consumed) == sorted(task_queues())
    assert services["worker-runs"]["command"][-2:] == ["-Q", "runs"]


def test_every_cadre_process_is_a_cluster_member_with_shared_secrets(services, compose):
    for name in CADRE_SERVICES:
        environment = _environment(services[name])
        assert environment["CADRE_CLUSTER"] == "true", name
        for secret in ("SECRET_KEY", "CADRE_ENCRYPTION_KEY"):
            assert environment[secret].startswith(f"${{{secret}:?"), (name, secret)
        assert environment["CADRE_SIGNING_KEY_FILE"] == "/run/secrets/cadre_signing_key", name
        assert "cadre_signing_key" in services[name]["secrets"], name
        for variable in (
            "CADRE_S3_BUCKET",
            "CADRE_S3_ANCHOR_BUCKET",
            "CADRE_S3_ENDPOINT_URL",
            "CADRE_S3_ACCESS_KEY_ID",
            "CADRE_S3_SECRET_ACCESS_KEY",
        ):
            assert environment[variable], (name, variable)
        assert environment["CADRE_S3_BUCKET"] != environment["CADRE_S3_ANCHOR_BUCKET"]
    assert "cadre_signing_key" in compose["secrets"]
    assert services["redis"]["command"] == ["redis-server", "--appendonly", "yes"]


def test_every_variable_compose_reads_is_documented_in_env_example():
    used = set(VARIABLE.findall(COMPOSE.read_text(encoding="utf-8")))
    example = (DEPLOY / ".env.example").read_text(encoding="utf-8")
    documented = set(re.findall(r"^#?\s*([A-Z][A-Z0-9_]*)=", example, re.M))
    assert used, "compose.yaml reads no variable?"
    assert used <= documented, f"not in deploy/.env.example: {sorted(used - documented)}"


def test_mounted_scripts_exist_and_are_posix_shell(services):
    for name in ("db-roles", "buckets"):
        (mount,) = services[name]["volumes"]
        source = DEPLOY / mount.split(":", 1)[0]
        assert source.is_file(), mount
        result = subprocess.run(["sh", "-n", str(source)], capture_output=True, text=True)
        assert result.returncode == 0, result.stderr


# --- the application role's script, against the test's PostgreSQL --------------------------


def _psql_environment(role: str, password: str) -> dict[str, str]:
    from pgserver._commands import POSTGRES_BIN_PATH

    params = connection.settings_dict
    return {
        **os.environ,
        "PATH": f"{POSTGRES_BIN_PATH}{os.pathsep}{os.environ['PATH']}",
        "PGHOST": params["HOST"],
        "PGPORT": str(params["PORT"] or 5432),
        "PGUSER": params["USER"],
        "PGPASSWORD": params["PASSWORD"] or "",
        "PGDATABASE": params["NAME"],
        "CADRE_APP_ROLE": role,
        "POSTGRES_APP_PASSWORD": password,
    }


def _run_role_script(environment: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["sh", str(DEPLOY / "postgres" / "application-role.sh")],
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.django_db
def test_application_role_script_makes_a_role_that_owns_nothing():
    role = f"cadre_app_compose_{uuid.uuid4().hex[:8]}"
    # A quote in the password must reach the server as data, never as SQL.
    environment = _psql_environment(role, "pa'ss; DROP ROLE postgres; --")
    params = connection.settings_dict
    owner = psycopg.connect(
        host=params["HOST"],
        port=params["PORT"] or 5432,
        user=params["USER"],
        password=params["PASSWORD"] or "",
        dbname=params["NAME"],
        autocommit=True,
    )
    table = sql.Identifier(f"owned_by_{role}")
    try:
        for _ in range(2):  # every `up` runs it: the second run changes nothing
            result = _run_role_script(environment)
            assert result.returncode == 0, result.stderr
        row = owner.execute(
            "SELECT rolsuper, rolinherit, rolcreatedb, rolcreaterole, rolcanlogin, rolbypassrls "
            "FROM pg_roles WHERE rolname = %s",
            [role],
        ).fetchone()
        assert row == (False, False, False, False, True, False)
        owned = owner.execute(
            "SELECT count(*) FROM pg_class c JOIN pg_roles r ON r.oid = c.relowner "
            "WHERE r.rolname = %s",
            [role],
        ).fetchone()
        assert owned == (0,)

        # A role that owns a table could disable the audit triggers: the script refuses.
        owner.execute(sql.SQL("CREATE TABLE {} (id int)").format(table))
        owner.execute(sql.SQL("ALTER TABLE {} OWNER TO {}").format(table, sql.Identifier(role)))
        result = _run_role_script(environment)
        assert result.returncode != 0
        assert "owns tables" in result.stderr
    finally:
        owner.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(table))
        owner.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))
        owner.close()
