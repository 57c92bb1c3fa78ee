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

import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal

from cadre import outbound
from cadre.llm import metering
from cadre.llm.reasons import TRANSIENT
from cadre.ports import Registry


class ProviderError(Exception):
    """The model endpoint failed (network, status, malformed answer). `reason` names the kind
    of failure (cadre.llm.reasons); transient ones are retried within the call's budget."""

    def __init__(
        self,
        message: str,
        *,
        reason: str = "error",
        status: int | None = None,
        summary: str = "",
    ):
        super().__init__(message)
        self.reason = reason
        self.status = status
        # The message without anything the endpoint wrote: what a connection test shows.
        self.summary = summary or message

    @property
    def transient(self) -> bool:
        return self.reason in TRANSIENT


# Retries of one model call: at most RETRY_ATTEMPTS tries, waiting about RETRY_BASE_SECONDS,
# then twice as long each time (with jitter), all within the call's total timeout.
RETRY_ATTEMPTS = 4
RETRY_BASE_SECONDS = 0.5


class BudgetExceeded(ProviderError):
    """A hard budget refused the call before it was sent (see metering). A ProviderError, so
    callers that fall back to rules when the model fails (memory extraction, dedup) do so."""

    code = "budget_exceeded"

    def __init__(self, message: str, *, details: dict | None = None):
        super().__init__(message)
        self.message = message
        self.details = details or {}


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: dict

    def as_dict(self) -> dict:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}


PRICE_KEYS = ("input", "output", "cached_input", "cache_write")


def prices_for_model(prices: dict | None, model: str = "") -> dict:
    """The prices per million tokens that apply to `model`: a provider's prices are
    {"input", "output", "cached_input", "models": {"<model>": {the same keys}}}; a model's own
    entry wins key by key over the provider's defaults."""
    prices = prices or {}
    own = (prices.get("models") or {}).get(model) or {}
    return {key: own.get(key, prices.get(key)) for key in PRICE_KEYS if key in own or key in prices}


def prices_clean(prices: dict | None) -> dict:
    """Prices as stored: amounts per million tokens as exact decimal strings, keys among
    PRICE_KEYS (and "models" with the same keys per model); ValueError names what is wrong."""
    if not prices:
        return {}
    if not isinstance(prices, dict):
        raise ValueError("prices must be an object")

    def amounts(entry, where: str) -> dict:
        if not isinstance(entry, dict):
            raise ValueError(f"{where} must be an object")
        cleaned = {}
        for key, value in entry.items():
            if key not in PRICE_KEYS:
                raise ValueError(f"{where}: unknown price {key!r} (one of {', '.join(PRICE_KEYS)})")
            try:
                amount = Decimal(str(value))
            except ArithmeticError:
                raise ValueError(f"{where}.{key}: not a number") from None
            if not amount.is_finite() or amount < 0:
                raise ValueError(f"{where}.{key}: must be 0 or more")
            cleaned[key] = format(amount.normalize(), "f")
        return cleaned

    models = prices.get("models") or {}
    if not isinstance(models, dict):
        raise ValueError("prices.models must be an object of model name -> prices")
    cleaned = amounts({k: v for k, v in prices.items() if k != "models"}, "prices")
    if models:
        cleaned["models"] = {
            str(name)[:200]: amounts(entry, f"prices.models.{name}")
            for name, entry in models.items()
        }
    return cleaned


@dataclass(frozen=True)
class Usage:
    """Tokens of one call. `input_tokens` counts every prompt token, read from the provider's
    cache (`cached_input_tokens`) or written to it (`cache_write_tokens`) included."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def cost(self, prices: dict | None, model: str = "") -> Decimal:
        """Cost from prices per million tokens (see prices_for_model): {"input", "output",
        "cached_input", "cache_write"}; cached tokens without a price of their own are priced
        as input."""
        applied = prices_for_model(prices, model)
        if not applied:
            return Decimal(0)
        million = Decimal(1_000_000)
        price = {key: Decimal(str(applied.get(key) or 0)) for key in ("input", "output")}
        cached = Decimal(str(applied.get("cached_input") or price["input"]))
        write = Decimal(str(applied.get("cache_write") or price["input"]))
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
    # Whether the endpoint caches prompt prefixes (a repeated prefix is read, cheaper, from its
    # cache): what makes warming that cache ahead of a turn worth a request.
    caches_prompts = False

    def __init__(
        self,
        *,
        model: str,
        base_url: str = "",
        api_key: str = "",
        timeout: float = 60.0,
        parameters: dict | None = None,
        prices: dict | None = None,
        label: str = "",
    ):
        self.model = model
        self.base_url = base_url
        self.api_key = api_key
        # The total time one call may take, retries included (the SDK's own retries are off).
        self.timeout = timeout
        self.parameters = parameters or {}
        self._deadline: float | None = None
        self._http_clients: dict = {}
        # Prices per million tokens (see prices_for_model) and the configuration's name, for
        # the meter's per-call records.
        self.prices = prices or {}
        self.label = label or self.kind

    def guarded_http_client(self, library: str):
        """The HTTP client the SDK sends through: every connection checked by the outbound
        guard (CADRE_MODEL_PROVIDER_ALLOWED_HOSTS) and opened to the checked address; one per
        provider object, so its connections are reused across calls and retries."""
        client = self._http_clients.get(library)
        if client is None:
            client = outbound.http_client(
                allow_setting=outbound.MODEL_PROVIDERS, library=library, timeout=self.timeout
            )
            self._http_clients[library] = client
        return client

    def attempt_timeout(self) -> float:
        """How long the current attempt may wait: what is left of the call's budget."""
        if self._deadline is None:
            return self.timeout
        return max(0.1, min(self.timeout, self._deadline - time.monotonic()))

    def list_models(self) -> list[str] | None:
        """The model names the endpoint offers, or None where its API has no such list."""
        return None

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
        """One model call, charged to the current account (see metering; refused with none,
        or inside a database transaction): reserved before anything is sent — a hard budget it
        could exceed raises BudgetExceeded — and settled with its real usage after."""
        params = {**self.parameters, **params}
        metering.check_call()
        active = metering.meter()
        if active is None:
            return self._chat(messages, tools, stream=stream, on_delta=on_delta, **params)
        handle = active.reserve(
            metering.current_account(), provider=self, messages=messages, params=params
        )
        try:
            result = self._chat(messages, tools, stream=stream, on_delta=on_delta, **params)
        except BaseException:
            active.settle(handle, None)
            raise
        active.settle(handle, result)
        return result

    def _chat(self, messages, tools, *, stream, on_delta, **params) -> ChatResult:
        started = time.monotonic()
        self._deadline = started + self.timeout
        attempt = 0
        try:
            while True:
                attempt += 1
                streamed = False
                try:
                    if not stream:
                        return self.complete(messages, tools or [], **params)
                    result = None
                    for delta in self.stream(messages, tools or [], **params):
                        if delta.text and on_delta is not None:
                            streamed = True
                            on_delta(delta.text)
                        result = delta.result or result
                    if result is None:
                        raise ProviderError("the stream ended without a result")
                    return result
                except ProviderError as error:
                    # Text already shown cannot be taken back: a broken stream is not retried.
                    pause = RETRY_BASE_SECONDS * 2 ** (attempt - 1) * random.uniform(0.8, 1.2)
                    if (
                        not error.transient
                        or streamed
                        or attempt >= RETRY_ATTEMPTS
                        or time.monotonic() + pause >= self._deadline
                    ):
                        if attempt == 1:
                            raise
                        raise _spent(error, attempt, started) from error
                    time.sleep(pause)
        finally:
            self._deadline = None


def _spent(error: ProviderError, attempts: int, started: float) -> ProviderError:
    elapsed = time.monotonic() - started
    return ProviderError(
        f"{error} ({attempts} attempts in {elapsed:.1f} s)",
        reason=error.reason,
        status=error.status,
    )


# Provider kinds by name, filled with the built-in adapters by the package (cadre.llm, whose
# adapters load their SDK on first use); a deployment (or a test) may register another kind, a
# callable taking ModelProvider's keyword arguments.
PROVIDERS: Registry[Callable[..., ModelProvider]] = Registry("model providers")


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
    prices: dict = field(default_factory=dict)
    name: str = ""


def _object_or_empty(value) -> dict:
    return value if isinstance(value, dict) else {}


def provider_for(model_settings: dict, config=None) -> ModelProvider:
    """The provider for model settings ({"provider", "model", "parameters", "timeout_seconds"})
    and an optional provider configuration (a ProviderConfig or an agents ModelProviderConfig
    row). The settings' timeout, when given, bounds each call (retries included) instead of the
    configuration's."""
    kind = config.kind if config is not None else model_settings.get("provider", "offline")
    factory = PROVIDERS.get(kind)
    if factory is None:
        raise ProviderError(f"unknown provider kind {kind!r}")
    # Parameters that are not an object (a list, a string in a stored row) are read as absent:
    # spread into every request, one such row would fail each run of its organization.
    parameters = {
        **_object_or_empty(config.parameters if config else None),
        **_object_or_empty(model_settings.get("parameters")),
    }
    return factory(
        model=model_settings.get("model")
        or (config.default_model if config else "")
        or "offline-1",
        base_url=config.base_url if config else "",
        api_key=config.api_key if config else "",
        timeout=float(
            model_settings.get("timeout_seconds") or (config.timeout_seconds if config else 60)
        ),
        parameters=parameters,
        prices=(getattr(config, "prices", None) or {}) if config else {},
        label=(getattr(config, "name", "") or config.kind) if config else "",
    )
