"""Fixtures for runtime tests: private data folders for embedded servers."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest


@pytest.fixture
def data_dir():
    """A CADRE_DATA_DIR outside pytest's tmp_path.

    pytest resets its base temporary folder to mode 0700 whenever a session starts, and the
    embedded PostgreSQL runs as another system user when tests run as root: a concurrent
    session would lock it out of a folder under tmp_path mid-test.
    """
    folder = Path(tempfile.mkdtemp(prefix="cadre-test-")).resolve()
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


MODEL_VARIABLES = (
    "CADRE_MODEL_BASE_URL",
    "CADRE_MODEL_API_KEY",
    "CADRE_MODEL_NAME",
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
)


@pytest.fixture(autouse=True)
def no_model_from_the_environment(monkeypatch):
    """The demo set-up reads these on first start: a developer's own key must not leak in."""
    for name in MODEL_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(f"{name}_FILE", raising=False)
