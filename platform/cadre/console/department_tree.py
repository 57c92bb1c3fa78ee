"""Departments in tree order with their depth, for the tree page and for choice lists."""

from __future__ import annotations

from collections.abc import Iterable


def tree_order(departments: Iterable) -> list[tuple[object, int]]:
    """(department, depth) pairs, parents before children, siblings by name.

    A department whose parent is not in the list (filtered out, or not visible to the actor)
    is shown as a root, so nothing the actor may see is ever hidden by the ordering.
    """
    departments = list(departments)
    present = {department.pk for department in departments}
    children: dict[int | None, list] = {}
    for department in departments:
        parent_id = department.parent_id if department.parent_id in present else None
        children.setdefault(parent_id, []).append(department)
    ordered: list[tuple[object, int]] = []

    def walk(parent_id: int | None, depth: int) -> None:
        for department in sorted(children.get(parent_id, []), key=lambda d: d.name.lower()):
            ordered.append((department, depth))
            walk(department.pk, depth + 1)

    walk(None, 0)
    return ordered


def department_choices(departments: Iterable, empty_label: str) -> list[tuple[object, str]]:
    """Choices for a department select, indented to show the tree (no-break spaces)."""
    return [("", empty_label)] + [
        (department.pk, "\u00a0\u00a0\u00a0" * depth + department.name)
        for department, depth in tree_order(departments)
    ]
