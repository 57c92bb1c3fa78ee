"""Run ratings: the sources that say how a run went ("success" | "failure"), asked at once.

RUN_OUTCOMES holds lookups ``(organization id, run ids) -> {run id: outcome}`` for the runs a
person rated; the agents app registers the runs' own ratings (`selectors.rated_runs`) in its
AppConfig.ready(). The retrieval suite (`evaluation/recall.py`) and the Memory Viewer's recall
hit rate (`cadre.viewer.quality`) read them through `run_outcomes`.
"""

from __future__ import annotations

from collections.abc import Callable

from cadre.ports import Registry

RUN_OUTCOMES: Registry[Callable[[int, list[str]], dict[str, str]]] = Registry("run outcomes")


def run_outcomes(organization_id: int, run_ids: list[str]) -> dict[str, str]:
    """{run id: "success" | "failure"} for the runs among `run_ids` that a person rated."""
    outcomes: dict[str, str] = {}
    for _, lookup in RUN_OUTCOMES.items():
        outcomes.update(lookup(organization_id, run_ids))
    return outcomes
