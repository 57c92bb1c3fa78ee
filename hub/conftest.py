"""Fixtures for the Hub tests: the shared cast and a throw-away instance signing key."""

from __future__ import annotations

import pytest
from django.utils import translation

from cadre import signing
from tests.conftest import (  # noqa: F401 - the shared cast, re-exported as fixtures
    _fresh_throttles,
    alice,
    bob,
    charlie,
    client_for,
    key_client,
    make_member,
    org_a,
    org_b,
)


@pytest.fixture(autouse=True)
def _instance_signing_key(settings, tmp_path_factory, monkeypatch):
    """Each test signs with a fresh key generated under its own DATA_DIR."""
    monkeypatch.delenv("CADRE_SIGNING_KEY", raising=False)
    monkeypatch.delenv("CADRE_SIGNING_KEY_FILE", raising=False)
    settings.DATA_DIR = tmp_path_factory.mktemp("data")
    signing.forget_key()
    yield
    signing.forget_key()


@pytest.fixture(autouse=True)
def _english_thread():
    """A request activates its reader's language on the thread that served it; what a test
    does after a Chinese request starts in English again (tests/conftest.py has the same)."""
    translation.deactivate()
    yield
    translation.deactivate()
