"""The matrix's known deviations: cells of tests/authorization/matrix.py that answer otherwise
today, grouped by the bug that makes them so.

tests/authorization/test_matrix.py skips nothing: the sweep checks that each listed cell still
answers otherwise (a fixed cell fails it with "remove it"), and each group is a strict xfail
test asserting the declared outcome. Fix the bug, then delete its cells here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Deviation:
    """Cells that answer otherwise today: a bug for the owning app, named once."""

    reason: str
    cells: dict[str, tuple[str, ...]]  # principal -> Declaration.id values

    def pairs(self):
        return {(p, d) for p, ids in self.cells.items() for d in ids}


REASONS: dict[str, str] = {}

# Each entry is a bug the matrix found; fixing it makes its cells agree, which fails the sweep
# ("remove it") and XPASSes its strict xfail below. Remove the cells with the fix.
KNOWN_DEVIATIONS: dict[str, Deviation] = {}
