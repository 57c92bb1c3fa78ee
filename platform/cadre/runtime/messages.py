"""Compile the translation catalogs (locale/*/LC_MESSAGES/*.po → .mo) without GNU gettext.

The install runs it (`make install`, the image's build): compiled catalogs are never committed.
`python -m cadre.runtime.messages` compiles the catalogs whose .mo is missing or older."""

from __future__ import annotations

import sys
from pathlib import Path

import polib

ROOT = Path(__file__).resolve().parents[3]
LOCALE = ROOT / "locale"


def compile_catalogs(locale: Path = LOCALE, *, force: bool = False) -> list[Path]:
    written = []
    for po_path in sorted(locale.glob("*/LC_MESSAGES/*.po")):
        mo_path = po_path.with_suffix(".mo")
        if not force and mo_path.exists() and mo_path.stat().st_mtime >= po_path.stat().st_mtime:
            continue
        polib.pofile(str(po_path)).save_as_mofile(str(mo_path))
        written.append(mo_path)
    return written


def main() -> int:
    written = compile_catalogs(force="--force" in sys.argv)
    for path in written:
        print(f"compiled {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
