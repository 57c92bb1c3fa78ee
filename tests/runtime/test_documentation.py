"""Every variable the settings read is documented in deploy/.env.example and the README."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = ROOT / "platform" / "cadre" / "settings.py"
# env_str("NAME"...), env_bool("NAME"...), ... as cadre.env spells them
READ = re.compile(r"\benv_(?:str|bool|int|float|list|url|secret)\(\s*[\"']([A-Z][A-Z0-9_]*)[\"']")


def settings_variables() -> set[str]:
    return set(READ.findall(SETTINGS.read_text()))


def test_the_settings_read_the_variables_the_issue_requires():
    assert {
        "DATABASE_URL",
        "REDIS_URL",
        "SECRET_KEY",
        "ALLOWED_HOSTS",
        "CADRE_DATA_DIR",
        "CADRE_BASE_URL",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "CADRE_ENCRYPTION_KEY",
    } <= settings_variables()


def test_every_settings_variable_is_in_the_env_example():
    text = (ROOT / "deploy" / ".env.example").read_text()
    missing = sorted(name for name in settings_variables() if not re.search(rf"\b{name}\b", text))
    assert missing == [], f"document these in deploy/.env.example: {missing}"


def test_every_settings_variable_is_in_the_readme():
    text = (ROOT / "README.md").read_text()
    missing = sorted(name for name in settings_variables() if not re.search(rf"\b{name}\b", text))
    assert missing == [], f"document these in README.md: {missing}"


def test_the_readme_opens_with_the_two_commands():
    text = (ROOT / "README.md").read_text()
    first_heading = text.index("\n## ")
    assert text.index("make up") < text.index("make test")
    assert text.index("make up") < text.index("## Requirements")
    assert "make up" in text[: first_heading + 400]
