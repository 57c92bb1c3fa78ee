"""The tool registry: name, JSON-schema parameters, risk level and side-effect class.

`side_effect` says what a retried call could repeat: "none" (reads), "internal" (rows in this
database, written in the same transaction as the idempotency record, so exactly once) and
"external" (another system: the idempotency key is sent along, e.g. as an Idempotency-Key
header, and the call is recorded as soon as it returns).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

RISKS = ("low", "medium", "high")


class ToolFailed(Exception):
    """The call could not be done (bad recipient, host not allowed…); the model is told why.
    `details` go to the failure's audit event: names and classes, never the message (it may
    quote the arguments or the far side's answer)."""

    def __init__(self, code: str, message: str, *, details: dict | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details or {}


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict
    risk: str = "low"
    side_effect: str = "none"  # none | internal | external
    handler: Callable | None = None
    # Risk that depends on the arguments (e.g. many recipients = high); never lowers `risk`.
    risk_for: Callable[[dict], str] | None = None
    # Handled by the runtime itself (pauses the run): await_event, delegate.
    control: bool = False
    # What the effect was done to, for its audit event (`tool.<name>`, `tool.<name>.failed`):
    # called with the tool's context, the arguments and the result (None when it failed).
    # A tool whose handler's service audits the effect itself (memory_write, im_send) has none.
    audit_target: Callable[[object, dict, dict | None], dict] | None = None
    # The action of that event when not `tool.<name>` (every MCP tool: `tool.mcp_call`).
    audit_action: str | None = None
    # Whether the call can succeed, checked before anyone is asked to confirm it: called with
    # the run's context and the (re-identified) arguments, raises ToolFailed when it cannot
    # (nothing is asked, nothing done), else returns the call's reach for the confirmation
    # ({"recipients": 12, "groups": [...]}: see governance.risk.blast_radius_sentence).
    preflight: Callable[[object, dict], dict] | None = None
    extra: dict = field(default_factory=dict)

    def spec(self) -> dict:
        return {"name": self.name, "description": self.description, "parameters": self.parameters}

    def risk_of(self, arguments: dict, template_risk: str | None = None) -> str:
        levels = [self.risk, template_risk or "low"]
        if self.risk_for is not None:
            levels.append(self.risk_for(arguments))
        return max(levels, key=RISKS.index)


_REGISTRY: dict[str, Tool] = {}


def register(tool: Tool) -> Tool:
    if tool.name in _REGISTRY and _REGISTRY[tool.name] is not tool:
        raise ValueError(f"tool {tool.name!r} is already registered")
    if tool.risk not in RISKS:
        raise ValueError(f"tool {tool.name!r}: risk must be one of {RISKS}")
    _REGISTRY[tool.name] = tool
    return tool


def get(name: str) -> Tool | None:
    return _REGISTRY.get(name)


def tool_names() -> set[str]:
    return set(_REGISTRY)


def all_tools() -> list[Tool]:
    return sorted(_REGISTRY.values(), key=lambda tool: tool.name)
