#!/usr/bin/env python
"""Django's command-line utility for Cadre: puts platform/ on sys.path and runs a command."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def main() -> None:
    root = Path(__file__).resolve().parent
    # platform/ is a source root, never a package: appended after the standard library
    # so that `import platform` keeps resolving to the standard library module.
    for path in (str(root), str(root / "platform")):
        if path not in sys.path:
            sys.path.append(path)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cadre.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
