"""Encryption of secrets at rest (connector credentials, provider keys) with rotating keys.

CADRE_ENCRYPTION_KEY lists Fernet keys: the first encrypts, every one decrypts, so a new key is
prepended, `python manage.py encryption_rotate` re-encrypts stored values, and the old key is
then removed.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.db import connection, models, transaction


@cache
def _cipher_for(keys: tuple[str, ...]) -> MultiFernet:
    return MultiFernet([Fernet(key) for key in keys])


def cipher() -> MultiFernet:
    return _cipher_for(tuple(settings.CADRE_ENCRYPTION_KEYS))


def encrypt(plaintext: str) -> str:
    return cipher().encrypt(plaintext.encode()).decode()


def decrypt(token: str) -> str:
    try:
        return cipher().decrypt(token.encode()).decode()
    except InvalidToken:
        raise ValueError(
            "stored secret cannot be decrypted with any key in CADRE_ENCRYPTION_KEY"
        ) from None


def rotate(token: str) -> str:
    """Re-encrypt a token under the first (newest) key."""
    return cipher().rotate(token.encode()).decode()


class EncryptedTextField(models.TextField):
    """A text column stored encrypted; reads give the plaintext back."""

    def get_prep_value(self, value):
        if value is None or value == "":
            return value
        return encrypt(str(value))

    def from_db_value(self, value, expression, connection):
        if value is None or value == "":
            return value
        return decrypt(value)


def encrypted_fields():
    """Every (model, field) stored encrypted, for rotation and checks."""
    from django.apps import apps

    for model in apps.get_models():
        for field in model._meta.get_fields():
            if isinstance(field, EncryptedTextField):
                yield model, field


# --- stored values: checks and rotation ---------------------------------------------------

_BATCH = 500


@dataclass
class StoredValues:
    """What the keys can do with one encrypted column's stored values."""

    label: str  # "app_label.Model.field"
    current: int = 0  # encrypted under the first (newest) key
    older: int = 0  # readable, but under an older key: rotate
    unreadable: int = 0  # no configured key decrypts them
    unreadable_ids: list = dataclasses.field(default_factory=list)  # a sample, for errors
    rotated: int = 0


def key_index(token: str) -> int | None:
    """Position in CADRE_ENCRYPTION_KEY of the key that decrypts `token` (None: no key does)."""
    for index, key in enumerate(settings.CADRE_ENCRYPTION_KEYS):
        try:
            Fernet(key).decrypt(token.encode())
        except InvalidToken:
            continue
        return index
    return None


def _stored_tokens(model, column_field):
    """(pk, token) of every non-empty stored value, read raw (no decryption), in pk batches."""
    table = connection.ops.quote_name(model._meta.db_table)
    pk = connection.ops.quote_name(model._meta.pk.column)
    column = connection.ops.quote_name(column_field.column)
    last = None
    while True:
        where = f"{column} IS NOT NULL AND {column} <> ''"
        params: list = []
        if last is not None:
            where += f" AND {pk} > %s"
            params.append(last)
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT {pk}, {column} FROM {table} WHERE {where} "  # noqa: S608 - quoted names
                f"ORDER BY {pk} LIMIT {_BATCH}",
                params,
            )
            rows = cursor.fetchall()
        yield from rows
        if len(rows) < _BATCH:
            return
        last = rows[-1][0]


def _label(model, column_field) -> str:
    return f"{model._meta.label}.{column_field.name}"


def _stored_fields():
    """Encrypted fields whose table exists (an app not migrated yet has nothing stored)."""
    tables = set(connection.introspection.table_names())
    for model, column_field in encrypted_fields():
        if model._meta.db_table in tables:
            yield model, column_field


def stored_values_report() -> list[StoredValues]:
    """For each encrypted column: how many values each key state covers (used by doctor)."""
    reports = []
    for model, column_field in _stored_fields():
        report = StoredValues(label=_label(model, column_field))
        for pk, token in _stored_tokens(model, column_field):
            index = key_index(token)
            if index == 0:
                report.current += 1
            elif index is None:
                report.unreadable += 1
                if len(report.unreadable_ids) < 10:
                    report.unreadable_ids.append(pk)
            else:
                report.older += 1
        reports.append(report)
    return reports


def rotate_stored_values() -> list[StoredValues]:
    """Re-encrypt every stored value that is not under the newest key.

    Each update is conditional on the old token still being there, so a value changed by the
    application meanwhile (already written under the newest key) is never overwritten.
    """
    reports = []
    for model, column_field in _stored_fields():
        report = StoredValues(label=_label(model, column_field))
        table = connection.ops.quote_name(model._meta.db_table)
        pk_column = connection.ops.quote_name(model._meta.pk.column)
        column = connection.ops.quote_name(column_field.column)
        for pk, token in list(_stored_tokens(model, column_field)):
            index = key_index(token)
            if index == 0:
                report.current += 1
                continue
            if index is None:
                report.unreadable += 1
                if len(report.unreadable_ids) < 10:
                    report.unreadable_ids.append(pk)
                continue
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(
                    f"UPDATE {table} SET {column} = %s "  # noqa: S608 - quoted names
                    f"WHERE {pk_column} = %s AND {column} = %s",
                    [rotate(token), pk, token],
                )
                report.rotated += cursor.rowcount
        reports.append(report)
    return reports
