"""Encryption of secrets at rest (connector credentials, provider keys) with rotating keys.

CADRE_ENCRYPTION_KEY lists Fernet keys: the first encrypts, every one decrypts, so a new key is
prepended, `python manage.py encryption_rotate` re-encrypts stored values, and the old key is
then removed.
"""

from __future__ import annotations

from functools import cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.db import models


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
