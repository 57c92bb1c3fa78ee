"""Anthropic Messages API (tool_use, streaming events) through the anthropic SDK."""

from __future__ import annotations

import json
from collections.abc import Iterator

import anthropic
import httpx

from cadre.llm import failures
from cadre.llm.base import (
    ChatDelta,
    ChatResult,
    ModelProvider,
    ProviderError,
    ToolCall,
    Usage,
)

_PASSED = {"temperature", "top_p", "top_k", "stop_sequences"}
DEFAULT_MAX_TOKENS = 1024


def to_anthropic(messages: list[dict]) -> tuple[str, list[dict]]:
    """(system prompt, messages) in the Messages API shape; tool results become user turns
    and consecutive turns of one role are merged (the API requires alternation)."""
    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
    converted: list[dict] = []
    for message in messages:
        role = message["role"]
        if role == "system":
            continue
        if role == "tool":
            blocks = [
                {
                    "type": "tool_result",
                    "tool_use_id": message["tool_call_id"],
                    "content": message["content"],
                }
            ]
            role = "user"
        elif role == "assistant":
            blocks = (
                [{"type": "text", "text": message["content"]}] if message.get("content") else []
            )
            blocks += [
                {
                    "type": "tool_use",
                    "id": call["id"],
                    "name": call["name"],
                    "input": call["arguments"],
                }
                for call in message.get("tool_calls", [])
            ]
        else:
            blocks = [{"type": "text", "text": message.get("content", "")}]
        if converted and converted[-1]["role"] == role:
            converted[-1]["content"].extend(blocks)
        else:
            converted.append({"role": role, "content": blocks})
    return system, converted


def to_anthropic_tools(tools: list[dict]) -> list[dict]:
    return [
        {
            "name": tool["name"],
            "description": tool.get("description", ""),
            "input_schema": tool.get("parameters") or {"type": "object", "properties": {}},
        }
        for tool in tools
    ]


def _usage(usage) -> Usage:
    """Anthropic counts prompt-cache reads and writes apart from `input_tokens`: all of them
    are input here, the reads also as cached input (priced apart, see Usage.cost)."""
    cached = getattr(usage, "cache_read_input_tokens", 0) or 0
    written = getattr(usage, "cache_creation_input_tokens", 0) or 0
    return Usage((usage.input_tokens or 0) + cached + written, usage.output_tokens or 0, cached)


def _result(message, model: str) -> ChatResult:
    text, calls = [], []
    for block in message.content:
        if block.type == "text":
            text.append(block.text)
        elif block.type == "tool_use":
            arguments = (
                block.input if isinstance(block.input, dict) else json.loads(block.input or "{}")
            )
            calls.append(ToolCall(id=block.id, name=block.name, arguments=arguments))
    return ChatResult(
        text="".join(text),
        tool_calls=calls,
        usage=_usage(message.usage),
        model=message.model or model,
        finish_reason=message.stop_reason or "",
    )


class AnthropicProvider(ModelProvider):
    kind = "anthropic"

    def _client(self) -> anthropic.Anthropic:
        # No SDK retries: ModelProvider.chat retries within the call's total budget.
        return anthropic.Anthropic(
            api_key=self.api_key or "not-needed",
            base_url=self.base_url or None,
            timeout=self.attempt_timeout(),
            max_retries=0,
        )

    def _error(self, error: Exception) -> ProviderError:
        return failures.from_sdk(
            error,
            sdk=anthropic,
            host=failures.host_of(self.base_url, "api.anthropic.com"),
            model=self.model,
            timeout=self.timeout,
        )

    def list_models(self) -> list[str] | None:
        try:
            return sorted(model.id for model in self._client().models.list())
        except anthropic.NotFoundError:
            return None
        except (anthropic.AnthropicError, httpx.HTTPError) as error:
            raise self._error(error) from error

    def _request(self, messages, tools, params) -> dict:
        system, converted = to_anthropic(messages)
        request = {
            "model": self.model,
            "max_tokens": int(params.get("max_tokens", DEFAULT_MAX_TOKENS)),
            "messages": converted,
        }
        if system:
            request["system"] = system
        if tools:
            request["tools"] = to_anthropic_tools(tools)
        request.update({key: value for key, value in params.items() if key in _PASSED})
        return request

    def complete(self, messages: list[dict], tools: list[dict], **params) -> ChatResult:
        try:
            message = self._client().messages.create(**self._request(messages, tools, params))
        except (anthropic.AnthropicError, httpx.HTTPError) as error:
            raise self._error(error) from error
        return _result(message, self.model)

    def stream(self, messages: list[dict], tools: list[dict], **params) -> Iterator[ChatDelta]:
        try:
            with self._client().messages.stream(**self._request(messages, tools, params)) as s:
                for event in s:
                    if event.type == "text":
                        yield ChatDelta(text=event.text)
                final = s.get_final_message()
        except (anthropic.AnthropicError, httpx.HTTPError) as error:
            raise self._error(error) from error
        yield ChatDelta(result=_result(final, self.model))
