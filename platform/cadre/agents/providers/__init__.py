"""Model providers behind one interface: OpenAI-compatible, Anthropic and offline."""

from __future__ import annotations

from cadre.agents.providers.base import (
    ChatDelta,
    ChatResult,
    ModelProvider,
    ProviderError,
    ToolCall,
    Usage,
    provider_for,
)

__all__ = [
    "ChatDelta",
    "ChatResult",
    "ModelProvider",
    "ProviderError",
    "ToolCall",
    "Usage",
    "provider_for",
]
