"""The one model client (kernel): providers behind one interface — OpenAI-compatible,
Anthropic, offline — their configuration and presets, connection tests, JSON answers and the
token estimator."""

from __future__ import annotations

from cadre.llm.base import (
    PROVIDERS,
    BudgetExceeded,
    ChatDelta,
    ChatResult,
    ModelProvider,
    ProviderConfig,
    ProviderError,
    ToolCall,
    Usage,
    prices_clean,
    prices_for_model,
    provider_for,
)
from cadre.llm.config import provider_config_from_env
from cadre.llm.offline import OfflineProvider
from cadre.llm.presets import ProviderPreset, provider_presets
from cadre.llm.probe import ConnectionReport, connection_test
from cadre.llm.structured import chat_json
from cadre.llm.tokens import estimate_tokens


def openai_compatible_provider(**options) -> ModelProvider:
    """The `openai_compatible` kind: an OpenAI-compatible endpoint (OpenAI, vLLM, Ollama …)."""
    # lazy: heavy — the openai SDK takes about half a second to import; a process that never
    # calls such a model does not pay it.
    from cadre.llm.openai_compatible import OpenAICompatibleProvider

    return OpenAICompatibleProvider(**options)


def anthropic_provider(**options) -> ModelProvider:
    """The `anthropic` kind: the Anthropic Messages API."""
    # lazy: heavy — the anthropic SDK takes over a second to import; a process that never
    # calls such a model does not pay it.
    from cadre.llm.anthropic import AnthropicProvider

    return AnthropicProvider(**options)


# The built-in kinds (see PROVIDERS); registered here, above the adapters, which import base.
PROVIDERS.register("offline", OfflineProvider)
PROVIDERS.register("openai_compatible", openai_compatible_provider)
PROVIDERS.register("anthropic", anthropic_provider)

__all__ = [
    "PROVIDERS",
    "BudgetExceeded",
    "ChatDelta",
    "ChatResult",
    "ConnectionReport",
    "ModelProvider",
    "ProviderConfig",
    "ProviderError",
    "ProviderPreset",
    "ToolCall",
    "Usage",
    "chat_json",
    "connection_test",
    "estimate_tokens",
    "prices_clean",
    "prices_for_model",
    "provider_config_from_env",
    "provider_for",
    "provider_presets",
]
