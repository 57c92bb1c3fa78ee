"""The policy plugin interface: a plugin sees a payload at a stage and returns a Decision.

    class MyPlugin(Plugin):
        name = "my_plugin"
        stages = ("input", "output")
        description = "What it checks"

        def evaluate(self, context: PolicyContext) -> Decision:
            ...
            return Decision.deny("why")

    register(MyPlugin())  # in a module that the app's `ready()` imports

Stages: "input" (model input: the inbound message), "retrieved" (memories, documents and tool
results about to enter the context), "tool_call" (a tool call the model asked for, payload
{"tool", "arguments"}), "output" (model output before it is sent).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

STAGES = ("input", "retrieved", "tool_call", "output")

ALLOW = "allow"
MODIFY = "modify"
REQUIRE_CONFIRMATION = "require_confirmation"
DENY = "deny"
ACTIONS = (ALLOW, MODIFY, REQUIRE_CONFIRMATION, DENY)
# Strictest wins when a chain combines decisions.
STRICTNESS = {ALLOW: 0, MODIFY: 1, REQUIRE_CONFIRMATION: 2, DENY: 3}


@dataclass
class Decision:
    action: str
    reason: str = ""
    payload: Any = None  # the modified payload (MODIFY)
    details: dict = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)  # allowed, but worth auditing
    retry_after: int | None = None  # rate limits: seconds until allowed again (HTTP 429)
    plugin: str = ""

    def __post_init__(self):
        if self.action not in ACTIONS:
            raise ValueError(f"unknown policy action {self.action!r}")

    @classmethod
    def allow(cls, **kwargs) -> Decision:
        return cls(ALLOW, **kwargs)

    @classmethod
    def modify(cls, payload, reason: str, **kwargs) -> Decision:
        return cls(MODIFY, reason, payload=payload, **kwargs)

    @classmethod
    def require_confirmation(cls, reason: str, **kwargs) -> Decision:
        return cls(REQUIRE_CONFIRMATION, reason, **kwargs)

    @classmethod
    def deny(cls, reason: str, **kwargs) -> Decision:
        return cls(DENY, reason, **kwargs)

    @property
    def audited(self) -> bool:
        return self.action != ALLOW or bool(self.flags)


@dataclass
class PolicyContext:
    """What a plugin may look at. `payload` is a str (input, retrieved, output) or a dict
    {"tool": name, "arguments": {...}, "risk": level} (tool_call)."""

    organization: Any
    stage: str
    payload: Any
    config: dict = field(default_factory=dict)
    member_id: int | None = None
    agent_id: int | None = None
    run_id: int | None = None
    step_index: int | None = None
    conversation_key: str = ""  # masking pseudonyms are scoped to it
    trace_id: str = ""
    extra: dict = field(default_factory=dict)


class Plugin:
    """Base class of policy plugins. Subclasses set `name`, `stages` and `evaluate`."""

    name: str = ""
    stages: tuple[str, ...] = ()
    description: str = ""
    # JSON schema of `config` (shown in the API; validated on save).
    config_schema: dict = {"type": "object"}

    def validate_config(self, config: dict) -> None:
        """Raise ValueError with a readable message for an unusable configuration."""
        import jsonschema

        try:
            jsonschema.validate(config, self.config_schema)
        except jsonschema.ValidationError as error:
            raise ValueError(error.message) from None

    def evaluate(self, context: PolicyContext) -> Decision:  # pragma: no cover - interface
        raise NotImplementedError


_REGISTRY: dict[str, Plugin] = {}


def register(plugin: Plugin) -> Plugin:
    """Add a plugin to the registry (at import time of the module that defines it)."""
    if not plugin.name or not plugin.stages:
        raise ValueError("a policy plugin needs a name and at least one stage")
    unknown = set(plugin.stages) - set(STAGES)
    if unknown:
        raise ValueError(f"plugin {plugin.name!r}: unknown stages {sorted(unknown)}")
    existing = _REGISTRY.get(plugin.name)
    if existing is not None and type(existing) is not type(plugin):
        raise ValueError(f"policy plugin {plugin.name!r} is already registered")
    _REGISTRY[plugin.name] = plugin
    return plugin


def unregister(name: str) -> None:
    _REGISTRY.pop(name, None)


def get(name: str) -> Plugin | None:
    return _REGISTRY.get(name)


def all_plugins() -> list[Plugin]:
    return sorted(_REGISTRY.values(), key=lambda plugin: plugin.name)
