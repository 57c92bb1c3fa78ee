"""The one model-provider interface: chat with tools, streaming deltas, token usage.

Messages use one neutral shape, translated by each adapter:
  {"role": "system" | "user", "content": str}
  {"role": "assistant", "content": str, "tool_calls": [{"id", "name", "arguments": dict}]}
  {"role": "tool", "tool_call_id": str, "name": str, "content": str}
Any message may carry `"cache_break": True`: the prompt up to and including it is stable across
calls (context assembly marks its boundaries); adapters with explicit caching put a breakpoint
there, the others ignore it (their caching needs only a byte-identical prefix).
Tools are {"name", "description", "parameters": <JSON schema>}.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal

from cadre.ports import Registry


class ProviderError(Exception):
    """The model endpoint failed (network, status, malformed answer); the step may retry."""


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: dict

    def as_dict(self) -> dict:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}


@dataclass(frozen=True)
class Usage:
    """Tokens of one call. `input_tokens` counts every prompt token, read from the provider's
    cache (`cached_input_tokens`) or written to it (`cache_write_tokens`) included."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_tokens: int = 0

    def cost(self, prices: dict | None) -> Decimal:
        """Cost from prices per million tokens ({"input": "0.5", "output": "1.5",
        "cached_input": "0.05", "cache_write": "0.625"}); cached tokens without a price of
        their own are priced as input."""
        if not prices:
            return Decimal(0)
        million = Decimal(1_000_000)
        price = {key: Decimal(str(prices.get(key, 0))) for key in ("input", "output")}
        cached = Decimal(str(prices.get("cached_input", price["input"])))
        write = Decimal(str(prices.get("cache_write", price["input"])))
        fresh = max(self.input_tokens - self.cached_input_tokens - self.cache_write_tokens, 0)
        return (
            (
                price["input"] * fresh
                + cached * self.cached_input_tokens
                + write * self.cache_write_tokens
                + price["output"] * self.output_tokens
            )
            / million
        ).quantize(Decimal("0.000001"))

    def as_dict(self) -> dict:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cached_input_tokens": self.cached_input_tokens,
            "cache_write_tokens": self.cache_write_tokens,
        }


@dataclass
class ChatResult:
    text: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    finish_reason: str = ""
    offline: bool = False

    def as_dict(self) -> dict:
        return {
            "text": self.text,
            "tool_calls": [call.as_dict() for call in self.tool_calls],
            "usage": self.usage.as_dict(),
            "model": self.model,
            "finish_reason": self.finish_reason,
            "offline": self.offline,
        }

    @classmethod
    def from_dict(cls, data: dict) -> ChatResult:
        return cls(
            text=data.get("text", ""),
            tool_calls=[ToolCall(**call) for call in data.get("tool_calls", [])],
            usage=Usage(**data.get("usage", {})),
            model=data.get("model", ""),
            finish_reason=data.get("finish_reason", ""),
            offline=data.get("offline", False),
        )


@dataclass(frozen=True)
class ChatDelta:
    """A piece of a streamed answer; the last one carries the complete `result`."""

    text: str = ""
    result: ChatResult | None = None


class ModelProvider:
    """Base class: adapters implement `stream` (and may override `chat` for a non-stream call)."""

    kind = ""

    def __init__(
        self,
        *,
        model: str,
        base_url: str = "",
        api_key: str = "",
        timeout: float = 60.0,
        parameters: dict | None = None,
    ):
        self.model = model
        self.base_url = base_url
        self.api_key = api_key
        self.timeout = timeout
        self.parameters = parameters or {}

    def stream(self, messages: list[dict], tools: list[dict], **params) -> Iterator[ChatDelta]:
        raise NotImplementedError

    def complete(self, messages: list[dict], tools: list[dict], **params) -> ChatResult:
        result = None
        for delta in self.stream(messages, tools, **params):
            result = delta.result or result
        if result is None:
            raise ProviderError("the stream ended without a result")
        return result

    def chat(
        self,
        messages: list[dict],
        tools: list[dict] | None = None,
        *,
        stream: bool = False,
        on_delta: Callable[[str], None] | None = None,
        **params,
    ) -> ChatResult:
        params = {**self.parameters, **params}
        if not stream:
            return self.complete(messages, tools or [], **params)
        result = None
        for delta in self.stream(messages, tools or [], **params):
            if delta.text and on_delta is not None:
                on_delta(delta.text)
            result = delta.result or result
        if result is None:
            raise ProviderError("the stream ended without a result")
        return result


# Provider kinds by name. The built-in adapters load their SDK on first use; a deployment (or a
# test) may register another kind, a callable taking ModelProvider's keyword arguments.
PROVIDERS: Registry[Callable[..., ModelProvider]] = Registry("model providers")


def _offline(**options) -> ModelProvider:
    from cadre.llm.offline import OfflineProvider

    return OfflineProvider(**options)


def _openai_compatible(**options) -> ModelProvider:
    from cadre.llm.openai_compatible import OpenAICompatibleProvider

    return OpenAICompatibleProvider(**options)


def _anthropic(**options) -> ModelProvider:
    from cadre.llm.anthropic import AnthropicProvider

    return AnthropicProvider(**options)


PROVIDERS.register("offline", _offline)
PROVIDERS.register("openai_compatible", _openai_compatible)
PROVIDERS.register("anthropic", _anthropic)


@dataclass(frozen=True)
class ProviderConfig:
    """A model endpoint: what an organization's ModelProviderConfig row holds, for code that
    has no row (memory's model, read from the environment). `provider_for` takes either."""

    kind: str
    base_url: str = ""
    api_key: str = ""
    default_model: str = ""
    parameters: dict = field(default_factory=dict)
    timeout_seconds: float = 60


def provider_for(model_settings: dict, config=None) -> ModelProvider:
    """The provider for model settings ({"provider", "model", "parameters"}) and an optional
    provider configuration (a ProviderConfig or an agents ModelProviderConfig row)."""
    kind = config.kind if config is not None else model_settings.get("provider", "offline")
    factory = PROVIDERS.get(kind)
    if factory is None:
        raise ProviderError(f"unknown provider kind {kind!r}")
    parameters = {**(config.parameters if config else {}), **model_settings.get("parameters", {})}
    return factory(
        model=model_settings.get("model")
        or (config.default_model if config else "")
        or "offline-1",
        base_url=config.base_url if config else "",
        api_key=config.api_key if config else "",
        timeout=float(config.timeout_seconds) if config else 60.0,
        parameters=parameters,
    )
