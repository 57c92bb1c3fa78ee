"""Settings helpers accept good values and reject bad ones naming the variable."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from cadre.env import env_bool, env_int, env_list, env_secret, env_str, env_url

ROOT = Path(__file__).resolve().parents[2]
NAME = "CADRE_TEST_VARIABLE"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("1", True), ("true", True), ("YES", True), (" on ", True), ("0", False), ("off", False),
     ("No", False), ("", False)],
)  # fmt: skip
def test_env_bool_accepts_the_usual_spellings(monkeypatch, raw, expected):
    monkeypatch.setenv(NAME, raw)
    assert env_bool(NAME, not expected) is expected


def test_env_bool_uses_the_default_when_unset(monkeypatch):
    monkeypatch.delenv(NAME, raising=False)
    assert env_bool(NAME, True) is True


def test_env_bool_rejects_other_words_naming_the_variable(monkeypatch):
    monkeypatch.setenv(NAME, "maybe")
    with pytest.raises(ImproperlyConfigured, match=rf"^{NAME}: .*'maybe'"):
        env_bool(NAME)


def test_env_int_parses_and_defaults(monkeypatch):
    monkeypatch.setenv(NAME, " 42 ")
    assert env_int(NAME, 7) == 42
    monkeypatch.setenv(NAME, "")
    assert env_int(NAME, 7) == 7


@pytest.mark.parametrize("raw", ["ten", "1.5", "0x10"])
def test_env_int_rejects_non_integers_naming_the_variable(monkeypatch, raw):
    monkeypatch.setenv(NAME, raw)
    with pytest.raises(ImproperlyConfigured, match=rf"^{NAME}: expected an integer"):
        env_int(NAME, 1)


def test_env_int_enforces_the_minimum_naming_the_variable(monkeypatch):
    monkeypatch.setenv(NAME, "3")
    assert env_int(NAME, 1, minimum=3) == 3
    monkeypatch.setenv(NAME, "2")
    with pytest.raises(ImproperlyConfigured, match=rf"^{NAME}: must be at least 3, got 2"):
        env_int(NAME, 1, minimum=3)


def test_env_list_splits_on_commas_and_drops_blanks(monkeypatch):
    monkeypatch.setenv(NAME, " a.example, b.example ,,")
    assert env_list(NAME) == ["a.example", "b.example"]
    monkeypatch.delenv(NAME)
    assert env_list(NAME, ["x"]) == ["x"]


def test_env_url_accepts_a_url_with_an_allowed_scheme(monkeypatch):
    monkeypatch.setenv(NAME, "https://cadre.example.com")
    assert env_url(NAME, schemes=("http", "https")) == "https://cadre.example.com"
    monkeypatch.delenv(NAME)
    assert env_url(NAME) is None


@pytest.mark.parametrize(
    ("raw", "problem"),
    [("notaurl", "expected a URL"), ("ftp://files.example", "URL scheme must be one of")],
)
def test_env_url_rejects_bad_urls_naming_the_variable(monkeypatch, raw, problem):
    monkeypatch.setenv(NAME, raw)
    with pytest.raises(ImproperlyConfigured, match=rf"^{NAME}: {problem}"):
        env_url(NAME, schemes=("http", "https"))


def test_env_str_treats_empty_as_unset(monkeypatch):
    monkeypatch.setenv(NAME, "  ")
    assert env_str(NAME, "fallback") == "fallback"


def test_env_secret_reads_the_variable_or_its_file(monkeypatch, tmp_path):
    monkeypatch.setenv(NAME, "direct-secret")
    monkeypatch.delenv(f"{NAME}_FILE", raising=False)
    assert env_secret(NAME) == "direct-secret"
    secret_file = tmp_path / "secret"
    secret_file.write_text("from-a-file\n")
    monkeypatch.delenv(NAME)
    monkeypatch.setenv(f"{NAME}_FILE", str(secret_file))
    assert env_secret(NAME) == "from-a-file"


def test_env_secret_rejects_both_forms_at_once(monkeypatch, tmp_path):
    secret_file = tmp_path / "secret"
    secret_file.write_text("x")
    monkeypatch.setenv(NAME, "y")
    monkeypatch.setenv(f"{NAME}_FILE", str(secret_file))
    with pytest.raises(ImproperlyConfigured, match=rf"^{NAME}: set either"):
        env_secret(NAME)


def test_env_secret_rejects_a_missing_or_empty_file_naming_the_file_variable(monkeypatch, tmp_path):
    monkeypatch.delenv(NAME, raising=False)
    monkeypatch.setenv(f"{NAME}_FILE", str(tmp_path / "absent"))
    with pytest.raises(ImproperlyConfigured, match=rf"^{NAME}_FILE: cannot read"):
        env_secret(NAME)
    empty = tmp_path / "empty"
    empty.write_text("\n")
    monkeypatch.setenv(f"{NAME}_FILE", str(empty))
    with pytest.raises(ImproperlyConfigured, match=rf"^{NAME}_FILE: file .* is empty"):
        env_secret(NAME)


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("DEBUG", "maybe"),
        ("CADRE_BASE_URL", "notaurl"),
        ("CADRE_ENCRYPTION_KEY", "not-a-fernet-key"),
        ("DATABASE_URL", "mysql://db.example/cadre"),
        ("CADRE_SESSION_AGE", "forever"),
    ],
)
def test_manage_check_fails_naming_the_bad_variable(tmp_path, variable, value):
    env = {key: val for key, val in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}
    # Valid but unused service URLs: settings never connect at import, so nothing starts.
    env.update(
        {
            "CADRE_DATA_DIR": str(tmp_path),
            "DATABASE_URL": "postgresql://cadre@127.0.0.1:9/cadre",
            "REDIS_URL": "redis://127.0.0.1:9/0",
            variable: value,
        }
    )
    result = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert f"{variable}: " in result.stderr


def test_cadre_up_stops_at_a_bad_variable_naming_it(tmp_path):
    env = {key: val for key, val in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}
    env.update({"CADRE_DATA_DIR": str(tmp_path), "DEBUG": "maybe"})
    result = subprocess.run(
        [sys.executable, "-m", "cadre.runtime.cli", "up", "--port", "1"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1
    assert "cadre: DEBUG: expected a boolean" in result.stderr
    assert "Traceback" not in result.stderr
