"""The port that may hold back switching search to a new embedding model, and what a finished
re-embed tells the apps above memory.

Memory cannot judge whether retrieval under a new model is as good as under the old one:
evaluation (in the agents layer) can. It registers here in its AppConfig.ready():

- `GATES`: an `ActivationGate` per subsystem. `held(organization)` says whether the
  organization wants a person to switch (a re-embed then fills the vectors but does not
  activate); `check(actor=, model=, override_reason=)` raises a CadreError to refuse an
  activation, or records why it is allowed anyway.
- `REEMBED_FILLED`: told `(task, model)` when a held re-embed has every vector under `model`
  (evaluation replays the organization's retrieval suite old vs new then); each listener's
  result (ids and numbers) is kept on the task's `result["checks"]`.

With nothing registered, nothing is held and activation is never refused.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cadre.ports import Listeners, Registry


@dataclass(frozen=True)
class ActivationGate:
    held: Callable[[object], bool]
    check: Callable[..., None]


GATES: Registry[ActivationGate] = Registry("embedding activation gates")
REEMBED_FILLED: Listeners[Callable[[object, object], dict | None]] = Listeners("re-embed filled")


def activation_held(organization) -> bool:
    return any(gate.held(organization) for _, gate in GATES.items())


def activation_check(*, actor, model, override_reason: str = "") -> None:
    for _, gate in GATES.items():
        gate.check(actor=actor, model=model, override_reason=override_reason)
