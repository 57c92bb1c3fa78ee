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
from cadre.llm.presets import ProviderPreset, provider_presets
from cadre.llm.probe import ConnectionReport, connection_test
from cadre.llm.structured import chat_json
from cadre.llm.tokens import estimate_tokens

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
