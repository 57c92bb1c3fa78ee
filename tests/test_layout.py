"""Guards on the layout: platform/ is a source root, never a package shadowing the stdlib."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIRST_PARTY = ("cadre", "hub", "connectors")


def test_platform_has_no_init_file():
    assert not (ROOT / "platform" / "__init__.py").exists()


def test_import_platform_gives_the_standard_library():
    module = importlib.import_module("platform")
    assert hasattr(module, "python_version")
    assert "site-packages" not in (module.__file__ or "")
    assert Path(module.__file__).resolve().parent != ROOT / "platform"


def test_first_party_names_do_not_collide_with_the_standard_library():
    for name in FIRST_PARTY:
        assert name not in sys.stdlib_module_names, name
        assert importlib.import_module(name).__file__.startswith(str(ROOT))


def test_top_level_layout_is_exactly_the_documented_one():
    expected = {
        "manage.py",
        "pyproject.toml",
        "Makefile",
        "README.md",
        "README.zh-CN.md",
        "platform",
        "hub",
        "connectors",
        "templates",
        "locale",
        "tests",
        "deploy",
        "bench",
        "docs",
        ".ci",
    }
    present = {p.name for p in ROOT.iterdir() if not p.name.startswith(".") or p.name == ".ci"}
    tracked_noise = {"var", "build", "dist", "node_modules"}
    assert expected <= present
    present = {name for name in present if not name.endswith(".egg-info")}
    assert present - expected - tracked_noise == set()
