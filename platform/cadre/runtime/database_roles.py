"""Two database roles: the owner migrates, the application's role only reads and writes rows.

The application role must not own the audit tables: an owner (or a superuser) can disable their
triggers, truncate them and rewrite the chain. So `migrate` connects as the owner
(settings.DATABASE_OWNER, through cadre.runtime's `migrate` command) and, after every migrate,
grants the application's role (settings.DATABASE_APP_ROLE) what the running app needs:

- SELECT, INSERT, UPDATE, DELETE on every table, and the sequences behind their ids;
- on the audit events, SELECT and INSERT only, plus UPDATE of the three chain columns (sealing,
  which the append-only trigger lets through once per event); on the chain head, no DELETE;
- no TRUNCATE, TRIGGER or REFERENCES anywhere, and SELECT only on django_migrations.

It owns nothing, so `ALTER TABLE ... DISABLE TRIGGER` and DDL are refused to it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections, transaction

from cadre.memory.embeddings import ensure_index
from cadre.memory.models import EmbeddingModel

logger = logging.getLogger(__name__)

AUDIT_EVENTS = "governance_auditevent"
AUDIT_HEAD = "governance_auditchainhead"
SEAL_COLUMNS = ("sequence", "prev_hash", "hash")
_CREDENTIALS = ("USER", "PASSWORD", "HOST", "PORT")


@contextmanager
def as_owner(alias: str = DEFAULT_DB_ALIAS) -> Iterator[None]:
    """Connect `alias` as the schema owner for the duration (no-op when one role does both).

    The connection is swapped rather than a second alias used, so that everything a migration
    runs (RunPython through the default manager included) goes through the owner's connection
    and sees its uncommitted DDL.
    """
    owner = getattr(settings, "DATABASE_OWNER", None)
    wrapper = connections[alias]
    if alias != DEFAULT_DB_ALIAS or not owner or wrapper.settings_dict["USER"] == owner["USER"]:
        yield
        return
    saved = {key: wrapper.settings_dict[key] for key in (*_CREDENTIALS, "OPTIONS")}
    _reconnect(wrapper)
    wrapper.settings_dict.update({key: owner[key] for key in _CREDENTIALS})
    # The owner connects once for the migration, outside any pool of the application's role.
    wrapper.settings_dict["OPTIONS"] = {
        key: value for key, value in saved["OPTIONS"].items() if key != "pool"
    }
    try:
        yield
    finally:
        _reconnect(wrapper)
        wrapper.settings_dict.update(saved)


def _reconnect(wrapper) -> None:
    wrapper.close()
    close_pool = getattr(wrapper, "close_pool", None)
    if close_pool is not None and getattr(wrapper, "_pool", None) is not None:
        close_pool()


def grant_app_role(*, using: str = DEFAULT_DB_ALIAS, role: str | None = None) -> bool:
    """Give the application's role its privileges on every table of the schema. Idempotent;
    returns False (and does nothing) when no separate application role is configured."""
    role = role or getattr(settings, "DATABASE_APP_ROLE", None)
    wrapper = connections[using]
    if not role or wrapper.settings_dict["USER"] == role:
        return False
    quote = wrapper.ops.quote_name
    grantee = quote(role)
    events, head = quote(AUDIT_EVENTS), quote(AUDIT_HEAD)
    seal_columns = ", ".join(quote(column) for column in SEAL_COLUMNS)
    statements = [
        f"GRANT USAGE ON SCHEMA public TO {grantee}",
        f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {grantee}",
        f"GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA public TO {grantee}",
        f"REVOKE TRUNCATE, REFERENCES, TRIGGER ON ALL TABLES IN SCHEMA public FROM {grantee}",
        f"REVOKE UPDATE, DELETE ON {events} FROM {grantee}",
        f"GRANT UPDATE ({seal_columns}) ON {events} TO {grantee}",
        f"REVOKE DELETE ON {head} FROM {grantee}",
        f"REVOKE INSERT, UPDATE, DELETE ON django_migrations FROM {grantee}",
    ]
    with transaction.atomic(using=using), wrapper.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)
    logger.info("database: privileges of the application role %s granted", role)
    return True


def build_owner_indexes(*, using: str = DEFAULT_DB_ALIAS) -> None:
    """Build what only the owner can: the HNSW index of each registered embedding model (the
    application role's own attempt, for a model it registers, is refused and logged)."""
    for model in EmbeddingModel.objects.using(using).order_by("pk"):
        ensure_index(model)


def on_post_migrate(sender, using: str = DEFAULT_DB_ALIAS, **kwargs) -> None:
    """post_migrate (sent once per app after every migration ran): act once, on the last."""
    if sender.label == _last_app_label() and grant_app_role(using=using):
        build_owner_indexes(using=using)


def _last_app_label() -> str:
    from django.apps import apps

    return [config for config in apps.get_app_configs() if config.models_module][-1].label
