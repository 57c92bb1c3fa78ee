"""The translation catalogs are complete and safe (docs/i18n.md).

`makemessages` run over the code as it is now leaves no new, untranslated or fuzzy entry in
the committed Simplified Chinese catalogs, and every translation keeps its message's
placeholders (a lost `%(name)s` is a KeyError in the reader's language only)."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import polib
import pytest
from django.conf import settings
from django.core.management import call_command
from django.test import override_settings
from django.utils import translation

ROOT = Path(settings.BASE_DIR)
LOCALE = ROOT / "locale"
DOMAINS = ("django", "djangojs")
# What makemessages reads: the code people's strings live in (as `make messages` runs it).
IGNORE = [
    ".venv/*",
    "var/*",
    "tests/*",
    "*/tests/*",
    "bench/*",
    "*/node_modules/*",
    "deploy/*",
    "docs/*",
    "*/migrations/*",
    "build/*",
    "locale/*",
    "*/vendor/*",
    "*/frontend/*",
]
# Where people's strings live.
SOURCES = ("platform", "hub", "connectors", "templates")
PYTHON_FORMAT = re.compile(r"%\((\w+)\)[sdrfi]|%[sdrfi]")
BRACE_FORMAT = re.compile(r"\{(\w*)\}")


def _catalog(directory: Path, domain: str) -> polib.POFile:
    return polib.pofile(str(directory / "zh_Hans" / "LC_MESSAGES" / f"{domain}.po"))


def _translation(entry: polib.POEntry) -> str:
    return entry.msgstr_plural.get(0, "") if entry.msgid_plural else entry.msgstr


def _key(entry: polib.POEntry) -> tuple[str | None, str]:
    return entry.msgctxt, entry.msgid


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory) -> Path:
    """The catalogs as makemessages leaves them when run over today's code: in a tree of links
    to the code with a copy of the catalogs (makemessages writes into the `locale` folder next
    to the code it reads; the committed catalogs stay as they are)."""
    tree = tmp_path_factory.mktemp("tree")
    for name in SOURCES:
        (tree / name).symlink_to(ROOT / name)
    shutil.copytree(LOCALE, tree / "locale")
    cwd = Path.cwd()
    try:
        os.chdir(tree)
        with override_settings(LOCALE_PATHS=[tree / "locale"]):
            for domain, extensions in (("django", ["html", "txt", "py"]), ("djangojs", ["js"])):
                call_command(
                    "makemessages",
                    locale=["zh_Hans"],
                    domain=domain,
                    extensions=extensions,
                    ignore_patterns=IGNORE,
                    add_location="file",
                    no_obsolete=True,
                    symlinks=True,
                    verbosity=0,
                )
    finally:
        os.chdir(cwd)
    return tree / "locale"


@pytest.mark.parametrize("domain", DOMAINS)
def test_makemessages_leaves_nothing_new_or_untranslated(regenerated, domain):
    committed = {_key(e) for e in _catalog(LOCALE, domain) if not e.obsolete}
    fresh = _catalog(regenerated, domain)
    new = [e.msgid for e in fresh if not e.obsolete and _key(e) not in committed]
    assert not new, (
        f"{len(new)} message(s) are not in locale/zh_Hans/LC_MESSAGES/{domain}.po: run "
        f"`make messages-update` and translate them: {new[:20]}"
    )
    untranslated = [
        e.msgid for e in fresh if not e.obsolete and (not _translation(e) or "fuzzy" in e.flags)
    ]
    assert not untranslated, f"{len(untranslated)} untranslated or fuzzy: {untranslated[:20]}"


@pytest.mark.parametrize("domain", DOMAINS)
def test_every_message_in_the_catalog_is_still_used(regenerated, domain):
    fresh = {_key(e) for e in _catalog(regenerated, domain) if not e.obsolete}
    stale = [e.msgid for e in _catalog(LOCALE, domain) if _key(e) not in fresh]
    assert not stale, f"{len(stale)} message(s) no longer in the code: {stale[:20]}"


@pytest.mark.parametrize("domain", DOMAINS)
def test_translations_keep_their_placeholders(domain):
    broken = []
    for entry in _catalog(LOCALE, domain):
        text = _translation(entry)
        if not text:
            continue
        for pattern in (PYTHON_FORMAT, BRACE_FORMAT):
            if "python-format" not in entry.flags and pattern is PYTHON_FORMAT:
                continue
            wanted = sorted(pattern.findall(entry.msgid))
            if entry.msgid_plural:
                wanted = sorted(set(wanted) | set(pattern.findall(entry.msgid_plural)))
                if sorted(set(pattern.findall(text))) != sorted(set(wanted)):
                    broken.append((entry.msgid, text))
            elif sorted(pattern.findall(text)) != wanted:
                broken.append((entry.msgid, text))
    assert not broken, f"translations that lose or add placeholders: {broken[:10]}"


def test_the_compiled_catalog_is_the_committed_one():
    """The install compiles the catalogs; a stale .mo would show last release's words."""
    for domain in DOMAINS:
        po_path = LOCALE / "zh_Hans" / "LC_MESSAGES" / f"{domain}.po"
        mo_path = po_path.with_suffix(".mo")
        assert mo_path.exists(), f"{mo_path} missing: `make install` compiles the catalogs"
        assert mo_path.stat().st_mtime >= po_path.stat().st_mtime, f"{mo_path} is stale"


def test_chinese_is_served_from_the_catalog():
    with translation.override("zh-hans"):
        assert translation.gettext("Sign out") != "Sign out"
    with translation.override("en"):
        assert translation.gettext("Sign out") == "Sign out"
