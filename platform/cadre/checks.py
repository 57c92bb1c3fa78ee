"""Installation checks that `cadre doctor` prints, and the registry where apps add their own.

An app registers a function returning a list of `Check` under its name in `APP_CHECKS` (in its
`AppConfig.ready()`); doctor runs each once the database is reachable and migrated, since app
checks read the app's tables. Nothing registered means doctor checks the platform only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cadre.ports import Registry

OK, WARN, FAIL = "OK", "WARN", "FAIL"


@dataclass(frozen=True)
class Check:
    """One finding: `status` is OK, WARN (works, not as it should in production) or FAIL."""

    status: str
    name: str
    detail: str
    fix: str = ""


APP_CHECKS: Registry[Callable[[], list[Check]]] = Registry("doctor checks")
