"""The layers contract (`[tool.importlinter]` in pyproject.toml, docs/architecture.md).

The contract only checks the modules it lists, so these tests check that nothing escapes it:
every first-party app and every first-party module is inside a layer; then that it is kept.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import grimp
from django.apps import apps

ROOT = Path(__file__).resolve().parent.parent
ROOT_PACKAGES = ("cadre", "hub", "connectors")
# Packages whose modules are split across layers: only their own (empty) `__init__` is unlisted.
# `cadre/__init__.py` loads the Celery app (Celery's convention for Django projects).
SPLIT_PACKAGES = {"cadre", "cadre.tenancy", "cadre.governance"}
TESTS = re.compile(r"(^|\.)(tests|conftest)(\.|$)")


def contract() -> dict:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (layers,) = [c for c in config["contracts"] if c.get("id") == "layers"]
    return layers


def listed_modules() -> set[str]:
    names = set()
    for layer in contract()["layers"]:
        for name in re.split(r"[|:]", layer):
            names.add(name.strip().strip("()"))
    return names


def in_a_layer(module: str, listed: set[str]) -> bool:
    parts = module.split(".")
    return any(".".join(parts[:i]) in listed for i in range(1, len(parts) + 1))


def unlisted(module: str, listed: set[str], graph) -> list[str]:
    """The modules of `module` (itself, or its children if it is split) outside every layer."""
    if module in SPLIT_PACKAGES:
        return [m for child in graph.find_children(module) for m in unlisted(child, listed, graph)]
    return [] if in_a_layer(module, listed) else [module]


def test_the_contract_lists_every_app():
    listed = listed_modules()
    first_party = [
        config.name
        for config in apps.get_app_configs()
        if config.name.split(".")[0] in ROOT_PACKAGES
    ]
    assert first_party
    graph = grimp.build_graph(*ROOT_PACKAGES, cache_dir=None)
    for name in [*first_party, *ROOT_PACKAGES]:
        missing = sorted(unlisted(name, listed, graph))
        assert not missing, f"{name}: not in the layers contract: {missing}"


def test_every_first_party_module_is_in_a_layer():
    listed = listed_modules()
    graph = grimp.build_graph(*ROOT_PACKAGES, cache_dir=None)
    outside = sorted(
        module
        for module in graph.modules
        if module not in SPLIT_PACKAGES
        and not TESTS.search(module)
        and not in_a_layer(module, listed)
    )
    assert not outside, f"add these modules to a layer in pyproject.toml: {outside}"


def test_the_contract_is_kept():
    # As `make contract` runs it: platform/ is a source root, found through PYTHONPATH.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(["platform", "."])}
    lint_imports = Path(sys.executable).parent / "lint-imports"
    result = subprocess.run(
        [str(lint_imports), "--no-cache"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
