"""The hook registry and each template's ordered, individually enabled hook lists.

Points and when they run:
  on_init, assemble_context          sync, inside the run, each hook a persisted step
  process_memory, compact, post_process   async (Celery), after the run, each hook a step
  on_spawn                           when a run starts a subagent; its result is intersected
                                     with the parent's grants, so it can only narrow them
A template's `hooks` field lists, per point, [{"name", "enabled", "config"}] in order; a point
the template does not mention runs the registered default hooks in registration order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cadre.agents.models import HOOK_POINTS

SYNC_POINTS = ("on_init", "assemble_context")
ASYNC_POINTS = ("process_memory", "compact", "post_process")


@dataclass(frozen=True)
class Hook:
    point: str
    name: str
    fn: Callable
    default: bool = True  # runs when the template does not configure the point
    description: str = ""


_REGISTRY: dict[str, dict[str, Hook]] = {point: {} for point in HOOK_POINTS}


def hook(point: str, name: str, *, default: bool = True, description: str = ""):
    """Register a hook function at a point."""
    if point not in HOOK_POINTS:
        raise ValueError(f"unknown hook point {point!r}")

    def decorate(fn: Callable) -> Callable:
        existing = _REGISTRY[point].get(name)
        if existing is not None and existing.fn is not fn:
            raise ValueError(f"hook {point}:{name} is already registered")
        _REGISTRY[point][name] = Hook(point, name, fn, default, description or (fn.__doc__ or ""))
        return fn

    return decorate


def hook_names(point: str) -> set[str]:
    return set(_REGISTRY.get(point, {}))


def registered(point: str) -> list[Hook]:
    return list(_REGISTRY[point].values())


def hooks_for(configured: dict, point: str) -> list[tuple[Hook, dict]]:
    """The enabled hooks of one point, in the template's order, with their config."""
    entries = (configured or {}).get(point)
    if entries is None:
        return [(h, {}) for h in _REGISTRY[point].values() if h.default]
    chosen = []
    for entry in entries:
        found = _REGISTRY[point].get(entry.get("name"))
        if found is not None and entry.get("enabled", True):
            chosen.append((found, entry.get("config") or {}))
    return chosen
