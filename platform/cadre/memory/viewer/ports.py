"""Ports through which higher apps (hub, skills) give the viewer figures memory cannot compute."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from cadre.ports import Registry

# (organization id, run ids) -> {run id: "success" | "failure"} for the runs a person rated.
RUN_OUTCOMES: Registry[Callable[[int, list[str]], dict[str, str]]] = Registry(
    "memory viewer run outcomes"
)
# (actor, since) -> [{"skill", "version", "uses", "successes", "failures", "success_rate",
#                     "series": [{"day", "successes", "failures"}]}]
SKILL_OUTCOMES: Registry[Callable[[object, datetime], list[dict]]] = Registry(
    "memory viewer skill outcomes"
)
# (organization id, memory id) -> [{"kind", "id", "name", "status", "created_at"}]
DERIVED_SKILLS: Registry[Callable[[int, int], list[dict]]] = Registry(
    "memory viewer derived skills"
)
