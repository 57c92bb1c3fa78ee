"""Cadre's settings: read only from environment variables (see deploy/.env.example).

With DATABASE_URL / REDIS_URL unset, the embedded services in cadre.runtime.embedded are
started (or attached to) so that a fresh checkout runs with no configuration at all.
"""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

from csp.constants import NONCE as CSP_NONCE
from django.core.exceptions import ImproperlyConfigured
from kombu import Exchange, Queue

from cadre.env import (
    env_bool,
    env_float,
    env_int,
    env_list,
    env_rate,
    env_secret,
    env_str,
    env_url,
)

BASE_DIR = Path(__file__).resolve().parent.parent.parent  # the repository root
DATA_DIR = Path(env_str("CADRE_DATA_DIR", str(BASE_DIR / "var"))).resolve()
DATA_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = env_bool("DEBUG", False)
TESTING = env_bool("CADRE_TESTING", False)
# Several machines run this installation (docs/operations.md): nothing may live on one machine's
# disk, so secrets must come from the environment and files go to object storage.
CLUSTER = env_bool("CADRE_CLUSTER", False)


# The secrets a single machine generates into CADRE_DATA_DIR when unset, and how to make one.
# In cluster mode each machine would make its own (sessions signed on one are refused by the
# next, values encrypted on one unreadable on the others), so settings refuse to start instead.
GENERATED_SECRETS = {
    "SECRET_KEY": 'python -c "import secrets; print(secrets.token_urlsafe(50))"',
    "CADRE_ENCRYPTION_KEY": (
        'python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"'
    ),
    "CADRE_SIGNING_KEY": "openssl genpkey -algorithm ed25519 (the PEM; or CADRE_SIGNING_KEY_FILE)",
}
if CLUSTER:
    _missing = [name for name in GENERATED_SECRETS if env_secret(name) is None]
    if _missing:
        raise ImproperlyConfigured(
            "CADRE_CLUSTER is on, so every machine must share these secrets through the "
            "environment (NAME or NAME_FILE), never generate its own; missing:\n"
            + "\n".join(f"  {name}: make one with {GENERATED_SECRETS[name]}" for name in _missing)
        )


def _generated_secret(file_name: str, make) -> str:
    """A secret generated once and kept under CADRE_DATA_DIR (single-node installs only)."""
    path = DATA_DIR / file_name
    if path.exists():
        return path.read_text(encoding="utf-8").strip()
    value = make()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(value)
    return value


def _fernet_key() -> str:
    from cryptography.fernet import Fernet

    return Fernet.generate_key().decode()


SECRET_KEY = env_secret("SECRET_KEY") or _generated_secret(
    "secret_key", lambda: secrets.token_urlsafe(50)
)
SECRET_KEY_GENERATED = env_secret("SECRET_KEY") is None

# Comma-separated Fernet keys; the first encrypts, all decrypt (rotation: prepend a new key,
# run `python manage.py encryption_rotate`, then drop the old one).
_encryption_keys = env_secret("CADRE_ENCRYPTION_KEY")
CADRE_ENCRYPTION_KEY_GENERATED = _encryption_keys is None
CADRE_ENCRYPTION_KEYS = [
    key.strip()
    for key in (_encryption_keys or _generated_secret("encryption_key", _fernet_key)).split(",")
    if key.strip()
]
try:
    from cryptography.fernet import Fernet

    for _key in CADRE_ENCRYPTION_KEYS:
        Fernet(_key)
except (ValueError, TypeError):
    raise ImproperlyConfigured(
        "CADRE_ENCRYPTION_KEY: each key must be a 32-byte url-safe base64 Fernet key "
        '(generate one with: python -c "from cryptography.fernet import Fernet; '
        'print(Fernet.generate_key().decode())")'
    ) from None

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"])
CADRE_BASE_URL = env_url(
    "CADRE_BASE_URL", "http://127.0.0.1:8000", schemes=("http", "https")
).rstrip("/")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [CADRE_BASE_URL])

# --- services -----------------------------------------------------------------------------

# The application connects as DATABASE_URL's role; DATABASE_OWNER_URL's role owns the schema
# and runs `migrate` (unset: DATABASE_URL's role does both, which `cadre doctor` warns about:
# an owner can disable the audit table's triggers). See docs/audit.md.
DATABASE_URL = env_url("DATABASE_URL", schemes=("postgres", "postgresql"))
DATABASE_OWNER_URL = env_url("DATABASE_OWNER_URL", schemes=("postgres", "postgresql"))
if DATABASE_URL is None:
    from cadre.runtime.embedded import app_role_url, start_postgres

    DATABASE_OWNER_URL = start_postgres(DATA_DIR)
    DATABASE_URL = app_role_url(DATABASE_OWNER_URL)
    DATABASE_EMBEDDED = True
else:
    DATABASE_EMBEDDED = False


# The web (ASGI) process runs each request's sync code on a thread of its own, and a persistent
# connection stays with its thread: without a pool it opens connections as new threads come and
# keeps them, until the server refuses more (FATAL: too many clients already). psycopg's pool
# holds at most DATABASE_POOL_SIZE per process; a request that waits DATABASE_POOL_TIMEOUT
# seconds for one gets 503 `database_busy` (cadre.api.errors). A connection whose request's
# thread ended without giving it back is returned by the next request, and /readyz reports the
# pool and what was reclaimed (cadre.api.database_pool). The web process is the one that
# imported cadre.asgi before these settings (uvicorn, as `cadre up` and the image run it).
# Celery workers (prefork: one task per process at a time), beat, management commands and tests
# use one thread each, so one persistent connection per process (DATABASE_CONN_MAX_AGE) is
# bounded already; DATABASE_POOL=true/false overrides the choice for every process.
WEB_PROCESS = "cadre.asgi" in sys.modules
DATABASE_POOL = env_bool("DATABASE_POOL", WEB_PROCESS)
DATABASE_POOL_OPTIONS = {
    "min_size": 1,
    "max_size": env_int("DATABASE_POOL_SIZE", 10, minimum=1),
    "timeout": env_int("DATABASE_POOL_TIMEOUT", 10, minimum=1),
}


def _database_from_url(url: str) -> dict:
    parts = urlsplit(url)
    query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
    host = query.pop("host", None) or unquote(parts.hostname or "")
    if DATABASE_POOL:
        options = {"pool": dict(DATABASE_POOL_OPTIONS)}
        conn_max_age = 0  # the pool takes a connection back when Django closes it
    else:
        options = {}
        conn_max_age = env_int("DATABASE_CONN_MAX_AGE", 60, minimum=0)
    options.update(query)
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": unquote(parts.path.lstrip("/")) or "cadre",
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": host,
        "PORT": str(parts.port or ""),
        "CONN_MAX_AGE": conn_max_age,
        "CONN_HEALTH_CHECKS": True,
        "OPTIONS": options,
        "TEST": {"NAME": env_str("DATABASE_TEST_NAME", None)},
    }


# Tests create their database and migrate it as the owner, and run as the owner.
DATABASES = {
    "default": _database_from_url(
        DATABASE_OWNER_URL if TESTING and DATABASE_OWNER_URL else DATABASE_URL
    )
}
# What `migrate` connects as (cadre.runtime's migrate command), and the role every migrate
# grants the application's privileges to (cadre.runtime.database_roles); None: one role.
DATABASE_OWNER = _database_from_url(DATABASE_OWNER_URL) if DATABASE_OWNER_URL else None
DATABASE_APP_ROLE = _database_from_url(DATABASE_URL)["USER"] if DATABASE_OWNER else None
if DATABASE_OWNER and DATABASE_OWNER["USER"] == DATABASE_APP_ROLE:
    DATABASE_OWNER = DATABASE_APP_ROLE = None

REDIS_URL = env_url("REDIS_URL", schemes=("redis", "rediss", "unix"))
if REDIS_URL is None:
    from cadre.runtime.embedded import start_redis

    REDIS_URL = start_redis(DATA_DIR)
    REDIS_EMBEDDED = True
else:
    REDIS_EMBEDDED = False


def _redis_db(url: str, db: int) -> str:
    """The same Redis with another database number (redis://h:p/N or unix://path?db=N)."""
    parts = urlsplit(url)
    if parts.scheme == "unix":
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()} | {"db": str(db)}
        return f"unix://{parts.path}?" + "&".join(f"{k}={v}" for k, v in query.items())
    return f"{parts.scheme}://{parts.netloc}/{db}" + (f"?{parts.query}" if parts.query else "")


# Parallel test workers (pytest-xdist) each get their own Redis database, so the cache, the
# channel layer and Celery queues of one worker never see another's.
_XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
if TESTING and _XDIST_WORKER.startswith("gw") and _XDIST_WORKER[2:].isdigit():
    REDIS_URL = _redis_db(REDIS_URL, 1 + int(_XDIST_WORKER[2:]))


def _kombu_url(url: str) -> str:
    """Kombu spells a unix-socket Redis as redis+socket:///path."""
    if url.startswith("unix://"):
        parts = urlsplit(url)
        return f"redis+socket://{parts.path}" + (f"?{parts.query}" if parts.query else "")
    return url


CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": env_str("CADRE_CACHE_PREFIX", "cadre"),
    },
    # Sign-in failures (django-axes) and API rate-limit history: shared by every web process.
    "throttle": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": env_str("CADRE_CACHE_PREFIX", "cadre") + "-throttle",
    },
}
# How long the Memory Viewer's timeline, heatmap and quality figures are served from cache
# (writes of memories, context records and maps start a new version at once); 0 = never.
MEMORY_VIEWER_CACHE_SECONDS = env_int("CADRE_MEMORY_VIEWER_CACHE_SECONDS", 30, minimum=0)
# Prefetch of the next turn's memories (runtime/lifecycle/prefetch.py): after a reply whose input's
# embedding is farther than CADRE_PREFETCH_TOPIC_SHIFT (cosine distance) from the previous
# turn's, the retrieval for it runs in the background; the next turn reuses those candidates
# when its input is at least CADRE_PREFETCH_MATCH similar. Both are on the usual scale
# (unrelated ≈ 0 similar, the same ≈ 1), whatever the embedding model: a model's own cosines
# are read on it (embeddings.calibrated_similarity). 0 seconds of TTL turns it off.
CADRE_PREFETCH_TOPIC_SHIFT = env_float("CADRE_PREFETCH_TOPIC_SHIFT", 0.35, minimum=0, maximum=2)
CADRE_PREFETCH_MATCH = env_float("CADRE_PREFETCH_MATCH", 0.65, minimum=0, maximum=1)
CADRE_PREFETCH_TTL_SECONDS = env_int("CADRE_PREFETCH_TTL_SECONDS", 600, minimum=0)

CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        # channels_redis waits for messages in 5 s blocking reads; redis-py's own default
        # socket timeout (5 s) would cut them and drop every idle websocket.
        "CONFIG": {
            "hosts": [{"address": REDIS_URL, "socket_timeout": 15}],
            "prefix": "cadre:channels",
        },
    }
}

CELERY_BROKER_URL = _kombu_url(REDIS_URL)
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
# A task a worker took but never acknowledged (its process or machine died: acks_late) goes
# back to its queue for another worker after CADRE_BROKER_VISIBILITY_TIMEOUT seconds; it must
# be longer than the longest task, which would otherwise run twice. The sweep that puts such
# tasks back runs every tenth of it, at most every 10 s (kombu's own default is 100 s).
CADRE_BROKER_VISIBILITY_TIMEOUT = env_int("CADRE_BROKER_VISIBILITY_TIMEOUT", 3600, minimum=10)
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": CADRE_BROKER_VISIBILITY_TIMEOUT,
    "unacked_restore_interval": max(1, min(10, CADRE_BROKER_VISIBILITY_TIMEOUT // 10)),
    "unacked_restore_throttle": 1,
}
# Celery's Django fixup closes every database connection before and after each task unless
# this is set; then it closes them every this many tasks instead. Workers keep their
# connections like the web process does, by DATABASES' CONN_MAX_AGE and health checks
# (cadre/celery.py runs Django's close_old_connections around each task): opening a
# connection per task cost a run about a fork of PostgreSQL, a login and a type lookup.
CELERY_DB_REUSE_MAX = 10_000
# One beat per installation, even when two are started: the schedule and a lock live in Redis
# (celery-redbeat). A beat that finds the lock held waits, trying again every
# CELERY_BEAT_MAX_LOOP_INTERVAL seconds; the holder renews it on every tick (at least that
# often), so a killed holder's lock lapses after CADRE_BEAT_LOCK_TIMEOUT seconds and the
# waiting beat takes over. The static entries are CELERY_BEAT_SCHEDULE's: each start writes
# their definitions (a changed interval counts from the entry's last run) and drops the ones
# removed. `cadre manage beat_health` tells whether a beat holds the lock and ticks. A beat that
# loses Redis keeps its process and tries again every CELERY_BEAT_MAX_LOOP_INTERVAL seconds
# (cadre.runtime.beat.Scheduler, celery-redbeat's scheduler that does not exit on it).
CELERY_BEAT_SCHEDULER = "cadre.runtime.beat.Scheduler"
CELERY_BEAT_MAX_LOOP_INTERVAL = 5
CELERY_REDBEAT_REDIS_URL = REDIS_URL
CELERY_REDBEAT_REDIS_OPTIONS: dict = {}
CELERY_REDBEAT_LOCK_TIMEOUT = env_int(
    "CADRE_BEAT_LOCK_TIMEOUT", 30, minimum=3 * CELERY_BEAT_MAX_LOOP_INTERVAL
)
# Installations sharing one Redis database keep apart by CADRE_CACHE_PREFIX (one started with
# REDIS_URL unset has a Redis database of its own: cadre.runtime.embedded).
CELERY_REDBEAT_KEY_PREFIX = f"{env_str('CADRE_CACHE_PREFIX', 'cadre')}:beat:"
# The signed audit chain-head digests of earlier releases, one JSON object per line (a relative
# path is under CADRE_DATA_DIR): still read, never written; new digests are objects in the
# "audit_anchors" storage (STORAGES below).
AUDIT_DIGEST_LOG = DATA_DIR / env_str("CADRE_AUDIT_DIGEST_LOG", "audit-digests.jsonl")
# A finished audit export's bundle is deleted from the "exports" storage this many days after it
# was written (the job stays listed, as expired).
AUDIT_EXPORT_RETENTION_DAYS = env_int("CADRE_AUDIT_EXPORT_RETENTION_DAYS", 30, minimum=1)
# The currency of the model providers' prices (an ISO 4217 code): costs and cost budgets are
# amounts in it, and the console shows them with its symbol (docs/budgets.md).
PRICE_CURRENCY = (env_str("CADRE_PRICE_CURRENCY", "USD") or "USD").strip().upper()
if not (len(PRICE_CURRENCY) == 3 and PRICE_CURRENCY.isalpha() and PRICE_CURRENCY.isascii()):
    raise ImproperlyConfigured(
        f"CADRE_PRICE_CURRENCY: a 3-letter ISO 4217 code (USD, CNY), not {PRICE_CURRENCY!r}"
    )
from celery.schedules import crontab  # noqa: E402

from cadre.memory.schedule import BEAT_SCHEDULE as MEMORY_BEAT_SCHEDULE  # noqa: E402
from cadre.skills.schedule import BEAT_SCHEDULE as SKILLS_BEAT_SCHEDULE  # noqa: E402

CELERY_BEAT_SCHEDULE: dict = {
    **MEMORY_BEAT_SCHEDULE,
    **SKILLS_BEAT_SCHEDULE,
    "connectors-prune": {"task": "connectors.tasks.inbound_events_prune", "schedule": 86400},
    "connectors-drain": {"task": "connectors.tasks.inbound_events_drain", "schedule": 60.0},
    # Nightly reconciliation of the IM contact directories (connectors with directory_sync on).
    "connectors-directory-reconcile": {
        "task": "connectors.tasks.directory_reconcile",
        "schedule": crontab(hour=2, minute=30),
    },
    "connectors-agent-messages": {
        "task": "connectors.tasks.agent_messages_deliver_queued",
        "schedule": 15.0,
    },
    "agents-waits-expire": {"task": "cadre.agents.tasks.waits_expire", "schedule": 60.0},
    "agents-runs-requeue": {"task": "cadre.agents.tasks.runs_requeue_stale", "schedule": 300.0},
    "governance-confirmations-expire": {
        "task": "cadre.governance.tasks.confirmations_expire",
        "schedule": 30.0,
    },
    "governance-alerts-evaluate": {
        "task": "cadre.governance.tasks.alerts_evaluate",
        "schedule": 60.0,
    },
    "governance-usage-release-stale": {
        "task": "cadre.governance.tasks.usage_release_stale",
        "schedule": 300.0,
    },
    # Safety net: seals audit events whose on-commit seal task never ran.
    "governance-audit-seal": {"task": "cadre.governance.audit_tasks.audit_seal", "schedule": 30.0},
    # Signed chain-head digests (docs/audit.md): what a rewrite after the last one is held to.
    "governance-audit-digest": {
        "task": "cadre.governance.audit_tasks.audit_digest",
        "schedule": float(env_int("CADRE_AUDIT_DIGEST_INTERVAL", 300, minimum=10)),
    },
    "governance-audit-exports-expire": {
        "task": "cadre.governance.tasks.audit_exports_expire",
        "schedule": 3600.0,
    },
    "hub-upload-tickets-purge": {"task": "hub.tasks.upload_tickets_purge", "schedule": 600.0},
    # SAML IdPs' metadata read again from their URLs (docs/sso.md, "Metadata refresh").
    "tenancy-saml-metadata-refresh": {
        "task": "cadre.tenancy.tasks.saml_metadata_refresh",
        "schedule": float(env_int("CADRE_SAML_METADATA_REFRESH_SECONDS", 3600, minimum=60)),
    },
}
# Celery queues by kind of work (docs/operations.md, "Workers and queues"). A person waits
# only for `runs` (agent runs and resumes, and the inbound drains that start IM turns);
# learning from a finished turn (`after`) and sending to IM platforms (`connectors`, whose
# retries hold a worker for the transport's timeouts while a platform is down) wait in their
# own lines, served by another worker pool; everything else goes to CELERY_TASK_DEFAULT_QUEUE.
CELERY_TASK_DEFAULT_QUEUE = "celery"
CADRE_QUEUES = {
    "runs": env_str("CADRE_AGENT_QUEUE", "runs"),
    "after": env_str("CADRE_AFTER_RUN_QUEUE", "after"),
    "connectors": env_str("CADRE_CONNECTOR_QUEUE", "connectors"),
}
# Which kind of work each task is (task name, or a glob over names; the first match wins).
# cadre.celery.route_task reads both tables when a task is sent.
CADRE_TASK_QUEUES = {
    "cadre.agents.tasks.run_execute": "runs",
    "connectors.tasks.inbound_events_drain": "runs",
    "cadre.agents.tasks.run_after": "after",
    "cadre.agents.tasks.prefetch_next_turn": "after",
    "cadre.memory.tasks.memory_*": "after",
    "skills.memory_distill": "after",
    "hub.tasks.package_embed": "after",
    "connectors.tasks.deliver_run_reply": "connectors",
    "connectors.tasks.agent_message_deliver": "connectors",
    "connectors.tasks.decision_refused_notice": "connectors",
    "cadre.governance.tasks.confirmation_notify": "connectors",
    "cadre.governance.tasks.alert_notify": "connectors",
    "skills.proposal_notify": "connectors",
}
CELERY_TASK_ROUTES = ("cadre.celery.route_task",)
# A worker started without -Q consumes every queue (one pool for everything).
CELERY_TASK_QUEUES = [
    Queue(name, Exchange(name, "direct"), routing_key=name)
    for name in dict.fromkeys([CELERY_TASK_DEFAULT_QUEUE, *CADRE_QUEUES.values()])
]
# Subscriptions between agents: runs one publish may start, and hops before a chain of
# publications stops (a cycle A -> B -> A ends there).
CADRE_SUBSCRIPTION_MAX_FANOUT = 10
CADRE_SUBSCRIPTION_MAX_HOPS = 4
CELERY_TIMEZONE = "UTC"

# --- Django -------------------------------------------------------------------------------

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "guardian",
    "axes",
    "csp",
    "django_htmx",
    "channels",
    "cadre.runtime",
    "cadre.api",
    "cadre.tenancy",
    "cadre.governance",
    "cadre.agents",
    "cadre.agents.evaluation",
    "cadre.memory",
    "cadre.skills",
    "cadre.console",
    "hub",
    "cadre.viewer",
    "cadre.compat",
    "connectors",
]

MIDDLEWARE = [
    "cadre.observability.RequestContextMiddleware",
    "cadre.api.middleware.BodySizeLimitMiddleware",
    "cadre.api.middleware.URLTextMiddleware",
    "cadre.api.errors.DatabaseBusyMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    # Async: under ASGI files stream from an async iterator (WhiteNoise's sync one made Django
    # warn "StreamingHttpResponse must consume synchronous iterators" on every file). ServeStatic,
    # with the finders' file list read once per process (cadre/runtime/static_files.py).
    "cadre.runtime.static_files.StaticFilesMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "cadre.tenancy.middleware.ActorMiddleware",
    # Activates the reader's language: member preference, browser, organization default.
    "cadre.tenancy.middleware.LanguageMiddleware",
    # Audits a request's reads of other people's personal memory, once per person read.
    "cadre.memory.personal_reads.PersonalReadsMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "cadre.urls"
ASGI_APPLICATION = "cadre.asgi.application"
WSGI_APPLICATION = None

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "django.template.context_processors.i18n",
                "cadre.console.context.console",
            ]
        },
    }
]

AUTH_USER_MODEL = "tenancy.User"
AUTHENTICATION_BACKENDS = [
    # First: refuses every password check for a locked account or address (django-axes).
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
    "guardian.backends.ObjectPermissionBackend",
]
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {
        "NAME": "django.contrib.auth.password_validation.MinimumLengthValidator",
        "OPTIONS": {"min_length": 10},
    },
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
if TESTING:
    PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
LOGIN_URL = "console:login"
LOGIN_REDIRECT_URL = "console:home"
LOGOUT_REDIRECT_URL = "console:login"
ANONYMOUS_USER_NAME = None  # django-guardian: no anonymous user row

SESSION_COOKIE_SECURE = CADRE_BASE_URL.startswith("https://")
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SESSION_COOKIE_AGE = env_int("CADRE_SESSION_AGE", 12 * 3600, minimum=300)
CADRE_BEHIND_PROXY = env_bool("CADRE_BEHIND_PROXY", False)
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if CADRE_BEHIND_PROXY else None
X_FRAME_OPTIONS = "DENY"
CSRF_FAILURE_VIEW = "cadre.api.views.csrf_failure"
SECURE_CONTENT_TYPE_NOSNIFF = True
# HSTS only when the instance is served over https: browsers then refuse plain http to this
# host for CADRE_HSTS_SECONDS (a year by default; 0 switches it off).
SECURE_HSTS_SECONDS = (
    env_int("CADRE_HSTS_SECONDS", 365 * 86400, minimum=0) if SESSION_COOKIE_SECURE else 0
)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("CADRE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = False
# Content-Security-Policy (django-csp): scripts only from this origin or carrying the
# response's nonce; no inline scripts or event handlers, no eval, no framing, no plugins.
# Styles allow inline: the console's style="" attributes cannot carry a nonce, and a browser
# ignores 'unsafe-inline' once a nonce is listed, so styles get no nonce (docs/operations.md).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'", CSP_NONCE],
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}

# Sign-in throttling (django-axes on the Redis "throttle" cache): CADRE_SIGNIN_FAILURE_LIMIT
# failed passwords for one account, or from one address, lock it for CADRE_SIGNIN_LOCK_MINUTES
# (counted from the last failure; attempts during the lock do not extend it).
AXES_HANDLER = "axes.handlers.cache.AxesCacheHandler"
AXES_CACHE = "throttle"
AXES_FAILURE_LIMIT = env_int("CADRE_SIGNIN_FAILURE_LIMIT", 10, minimum=1)
AXES_COOLOFF_TIME = env_int("CADRE_SIGNIN_LOCK_MINUTES", 15, minimum=1) / 60  # hours
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_RESET_ON_SUCCESS = False
AXES_USERNAME_FORM_FIELD = "username"
AXES_USERNAME_CALLABLE = "cadre.tenancy.services.signin.signin_username"
AXES_CLIENT_IP_CALLABLE = "cadre.api.throttles.client_ip"
AXES_VERBOSE = False
# The console's sign-in view answers a lock itself (429, Retry-After, in words), so axes'
# middleware, which would replace that page, is not installed.
SILENCED_SYSTEM_CHECKS = ["axes.W002"]

# The languages a person can read Cadre in (docs/i18n.md): English and Simplified Chinese.
from cadre.languages import LANGUAGES as CADRE_LANGUAGES  # noqa: E402 - a constant, no Django

# Catalogs in locale/, compiled by the install (`make messages`, cadre.runtime.messages).
LANGUAGE_CODE = "en"
LANGUAGES = CADRE_LANGUAGES
LOCALE_PATHS = [BASE_DIR / "locale"]
LANGUAGE_COOKIE_SAMESITE = "Lax"
LANGUAGE_COOKIE_SECURE = SESSION_COOKIE_SECURE
TIME_ZONE = env_str("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

STATIC_URL = "/static/"
STATIC_ROOT = DATA_DIR / "static"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
FRONTEND_DIR = BASE_DIR / "platform" / "cadre" / "console" / "frontend"
# Only the parts of the npm packages the console uses: lucide-static alone holds thousands of
# files (per-icon scripts, fonts) that would be scanned at every start and collected.
_NODE_MODULES = FRONTEND_DIR / "node_modules"
STATICFILES_DIRS = [
    ("vendor/htmx.org/dist", _NODE_MODULES / "htmx.org" / "dist"),
    ("vendor/lucide-static/icons", _NODE_MODULES / "lucide-static" / "icons"),
    ("vendor/echarts/dist", _NODE_MODULES / "echarts" / "dist"),
]
# Object storage (docs/operations.md#object-storage): export bundles ("exports") and the signed
# audit chain-head digests ("audit_anchors") are objects any machine reads. With no bucket they
# are files under CADRE_DATA_DIR, for one machine (`make up`); the anchors go to their own bucket
# or prefix, written once and never overwritten or deleted (cadre.object_storage).
S3_BUCKET = env_str("CADRE_S3_BUCKET")
S3_ANCHOR_BUCKET = env_str("CADRE_S3_ANCHOR_BUCKET") or S3_BUCKET
S3_PREFIX = (env_str("CADRE_S3_PREFIX", "") or "").strip("/")
_S3_ENDPOINT_URL = env_url("CADRE_S3_ENDPOINT_URL", schemes=("http", "https"))
_S3_OPTIONS = {
    "endpoint_url": _S3_ENDPOINT_URL,
    "region_name": env_str("CADRE_S3_REGION"),
    "access_key": env_secret("CADRE_S3_ACCESS_KEY_ID"),
    "secret_key": env_secret("CADRE_S3_SECRET_ACCESS_KEY"),
    # MinIO, Ceph and most S3-compatible servers answer on one host name, not one per bucket.
    "addressing_style": "path" if _S3_ENDPOINT_URL else None,
}


def _s3_location(*parts: str) -> str:
    return "/".join(part for part in (S3_PREFIX, *parts) if part)


STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    # Keys exports/<organization>/<export id>/<file> (AuditExport.bundle_path is the prefix).
    "exports": (
        {
            "BACKEND": "storages.backends.s3.S3Storage",
            "OPTIONS": {**_S3_OPTIONS, "bucket_name": S3_BUCKET, "location": _s3_location()},
        }
        if S3_BUCKET
        else {
            "BACKEND": "cadre.object_storage.DataDirStorage",
            "OPTIONS": {"allow_overwrite": True},
        }
    ),
    # Keys org-<organization id>/<day>/<time>-<position>-<hash>.json, one object per digest.
    "audit_anchors": (
        {
            "BACKEND": "cadre.object_storage.WriteOnceS3Storage",
            "OPTIONS": {
                **_S3_OPTIONS,
                "bucket_name": S3_ANCHOR_BUCKET,
                "location": _s3_location("audit-anchors"),
            },
        }
        if S3_ANCHOR_BUCKET
        else {
            "BACKEND": "cadre.object_storage.WriteOnceFileSystemStorage",
            "OPTIONS": {
                "location": str(DATA_DIR / env_str("CADRE_AUDIT_ANCHOR_DIR", "audit-anchors"))
            },
        }
    ),
}
SERVESTATIC_USE_FINDERS = True
MEDIA_ROOT = DATA_DIR / "media"

# Request bodies: API JSON up to CADRE_MAX_BODY_BYTES; larger requests get 413.
CADRE_MAX_BODY_BYTES = env_int("CADRE_MAX_BODY_BYTES", 2 * 1024 * 1024, minimum=1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = CADRE_MAX_BODY_BYTES

EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_secret("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "cadre@localhost")

CADRE_INVITATION_DAYS = env_int("CADRE_INVITATION_DAYS", 7, minimum=1)
# Alert webhooks never reach internal addresses (SSRF) except these host names, IP addresses or
# networks (comma-separated; "*" allows every internal destination).
CADRE_ALERT_WEBHOOK_ALLOWED_HOSTS = env_list("CADRE_ALERT_WEBHOOK_ALLOWED_HOSTS", [])
# The same guard for webhook connectors' callback URLs (their own allow-list).
CADRE_CONNECTOR_WEBHOOK_ALLOWED_HOSTS = env_list("CADRE_CONNECTOR_WEBHOOK_ALLOWED_HOSTS", [])
# …and for the IM platforms' APIs (connector api_base_url, directory, files, IM logins).
CADRE_CONNECTOR_ALLOWED_HOSTS = env_list("CADRE_CONNECTOR_ALLOWED_HOSTS", [])
# Seconds a stream connector's lease lives without renewal (cadre.runtime.streams): a dead
# holder's connections are taken over after about this long; shorter Redis outages drop nothing.
CADRE_STREAM_LEASE_SECONDS = env_int("CADRE_STREAM_LEASE_SECONDS", 10, minimum=3)
# A `cadre streams` replica keeps a prepared standby process for each stream connector another
# replica holds, so a takeover connects about when the lease expires (one process more each).
CADRE_STREAM_STANDBY = env_bool("CADRE_STREAM_STANDBY", True)
# …and for the agents' http_request tool (beside each tool rule's own allowed_hosts).
CADRE_AGENT_HTTP_ALLOWED_HOSTS = env_list("CADRE_AGENT_HTTP_ALLOWED_HOSTS", [])
# MCP servers agents call as tools (docs/integrations.md): Streamable HTTP URLs never reach
# internal addresses except these host names, IP addresses or networks ("*" allows all); stdio
# servers run only these commands on the workers (names or absolute paths; empty: no stdio).
CADRE_MCP_ALLOWED_HOSTS = env_list("CADRE_MCP_ALLOWED_HOSTS", [])
CADRE_MCP_STDIO_COMMANDS = env_list("CADRE_MCP_STDIO_COMMANDS", [])
# Hosts whose https:// DingTalk sessionWebhook Cadre replies to (".example.com" = subdomains);
# any other sessionWebhook in a callback is ignored and the reply goes through the API.
CADRE_DINGTALK_SESSION_WEBHOOK_HOSTS = env_list(
    "CADRE_DINGTALK_SESSION_WEBHOOK_HOSTS", ["oapi.dingtalk.com"]
)
# SAML 2.0 sign-in (docs/identity.md): how far the IdP's clock may be from ours when checking
# an assertion's NotBefore / NotOnOrAfter, the xmlsec1 binary that checks XML signatures, and
# the internal hosts an IdP metadata URL may reach (the outbound-URL guard of the webhooks).
CADRE_SAML_CLOCK_SKEW_SECONDS = env_int("CADRE_SAML_CLOCK_SKEW_SECONDS", 120, minimum=0)
CADRE_SAML_XMLSEC_BINARY = env_str("CADRE_SAML_XMLSEC_BINARY", "/usr/bin/xmlsec1")
CADRE_SAML_METADATA_ALLOWED_HOSTS = env_list("CADRE_SAML_METADATA_ALLOWED_HOSTS", [])
CADRE_API_KEY_LAST_USED_INTERVAL = 60  # seconds between last_used_at writes for one key

# --- the outbound guard (cadre/outbound.py) ------------------------------------------------
# The internal hosts OIDC discovery, JWKS and token endpoints may reach (host names, addresses
# or networks; "*" every internal address; link-local and metadata addresses never).
CADRE_OIDC_ALLOWED_HOSTS = env_list("CADRE_OIDC_ALLOWED_HOSTS", [])


def _url_host(name: str) -> str | None:
    try:
        return urlsplit(env_str(name, "")).hostname
    except ValueError:  # reported by the setting's own reader
        return None


# The same for model providers' base URLs (a self-hosted model: localhost, 10.20.0.0/16, …).
# The hosts of the model endpoints this environment names itself are allowed as well: the
# operator chose them.
CADRE_MODEL_PROVIDER_ALLOWED_HOSTS = env_list("CADRE_MODEL_PROVIDER_ALLOWED_HOSTS", []) + [
    host
    for host in map(
        _url_host,
        (
            "CADRE_MODEL_BASE_URL",
            "CADRE_MEMORY_PROVIDER_BASE_URL",
            "CADRE_MEMORY_LLM_BASE_URL",
            "CADRE_EMBEDDING_BASE_URL",
        ),
    )
    if host
]

# --- API ----------------------------------------------------------------------------------

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "cadre.tenancy.authentication.ApiKeyAuthentication",
        "cadre.tenancy.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["cadre.api.permissions.IsOrganizationActor"],
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_PAGINATION_CLASS": "cadre.api.pagination.PagePagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "cadre.api.errors.exception_handler",
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    # JSON nested past a bound, NUL characters and lone surrogates (in JSON, form and multipart
    # bodies alike) are a 400, never a RecursionError or a DataError deep inside a view.
    "DEFAULT_PARSER_CLASSES": [
        "cadre.api.parsers.BoundedJSONParser",
        "cadre.api.parsers.BoundedFormParser",
        "cadre.api.parsers.BoundedMultiPartParser",
    ],
    "UNAUTHENTICATED_USER": None,
    "DEFAULT_THROTTLE_CLASSES": [
        "cadre.api.throttles.ApiKeyRateThrottle",
        "cadre.api.throttles.UserRateThrottle",
        "cadre.api.throttles.AnonymousRateThrottle",
    ],
    # Behind a proxy the client is the address the proxy appended last to X-Forwarded-For.
    "NUM_PROXIES": 1 if CADRE_BEHIND_PROXY else 0,
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
}


# API rate limits (<count>/<period>: 600/minute, 20/5m, 10000/day); 429 + Retry-After beyond.
CADRE_API_THROTTLE_RATES = {
    "api_key": env_rate("CADRE_API_RATE_KEY", "1200/minute"),
    "user": env_rate("CADRE_API_RATE_USER", "1200/minute"),
    "anon": env_rate("CADRE_API_RATE_ANON", "120/minute"),
    "auth_failure": env_rate("CADRE_API_RATE_AUTH_FAILURE", "30/5m"),
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Cadre API",
    "DESCRIPTION": "Control plane for an enterprise's fleet of AI agents.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # Every operation documents its 4xx responses with the error envelope (docs/api.md).
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "cadre.api.schema.document_errors",
    ],
    # Two choice sets behind fields named "scope": each keeps a stable component name.
    "ENUM_NAME_OVERRIDES": {
        "ScopeEnum": "cadre.memory.models.Scope",
        "PolicyChainScopeEnum": "cadre.governance.models.PolicyChain.Scope",
        "BudgetScopeEnum": "cadre.governance.models.Budget.Scope",
        "ToolRiskEnum": "cadre.agents.tools.registry.RISKS",
    },
}

# --- observability ------------------------------------------------------------------------

OTEL_EXPORTER_OTLP_ENDPOINT = env_url("OTEL_EXPORTER_OTLP_ENDPOINT", schemes=("http", "https"))
OTEL_SERVICE_NAME = env_str("OTEL_SERVICE_NAME", "cadre")
CADRE_TRACE_CONSOLE = env_bool("CADRE_TRACE_CONSOLE", False)
LOG_LEVEL = env_str("LOG_LEVEL", "INFO").upper()
LOG_FORMAT = env_str("LOG_FORMAT", "json")
if LOG_FORMAT not in {"json", "text"}:
    raise ImproperlyConfigured(f"LOG_FORMAT: expected 'json' or 'text', got {LOG_FORMAT!r}")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"context": {"()": "cadre.observability.LogContextFilter"}},
    "formatters": {
        "json": {"()": "cadre.observability.JsonFormatter"},
        "text": {"format": "%(asctime)s %(levelname)s %(name)s [%(trace_id)s] %(message)s"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": LOG_FORMAT,
            "filters": ["context"],
        }
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        "django.db.backends": {"level": "INFO"},
        "pgserver": {"level": "WARNING"},
        "celery": {"level": LOG_LEVEL},
    },
}
