"""Anthropic Messages API (tool_use, streaming events) through the anthropic SDK."""

from __future__ import annotations

import json
from collections.abc import Iterator

import anthropic
import httpx2
from anthropic.types import Message

from cadre.llm import failures
from cadre.llm.base import (
    ChatDelta,
    ChatResult,
    ModelProvider,
    ProviderError,
    ToolCall,
    Usage,
)
from cadre.outbound import OutboundRefused

# What a call may raise: the SDK's errors, httpx2's (the SDK's HTTP client: a stream broken after
# its headers), and the outbound guard's refusal of the destination (raised in the connection,
# passed through as is).
_FAILURES = (anthropic.AnthropicError, httpx2.HTTPError, OutboundRefused)
_PASSED = {"temperature", "top_p", "top_k", "stop_sequences"}
DEFAULT_MAX_TOKENS = 1024
MAX_CACHE_BREAKPOINTS = 4  # the Messages API accepts at most four cache_control blocks
_EPHEMERAL = {"type": "ephemeral"}


def to_anthropic(messages: list[dict]) -> tuple[str | list[dict], list[dict]]:
    """(system prompt, messages) in the Messages API shape; tool results become user turns
    and consecutive turns of one role are merged (the API requires alternation).

    Without cache breaks the system prompt is one string. With them (messages marked
    `cache_break`, see cadre.llm.base) it is a list of text blocks, the leading system messages
    in order; a system message after the conversation started (per-request context) becomes a
    user text block, since the system prompt precedes every turn and would move the cached
    prefix; the last MAX_CACHE_BREAKPOINTS marked messages get `cache_control`."""
    caching = any(m.get("cache_break") for m in messages)
    if not caching:
        system: str | list[dict] = "\n\n".join(
            m["content"] for m in messages if m["role"] == "system"
        )
    else:
        system = []
    marked: list[dict] = []  # the last block of each message marked as a cache break
    converted: list[dict] = []
    for message in messages:
        role = message["role"]
        if role == "system" and (not caching or not converted):
            if caching and message.get("content"):
                system.append({"type": "text", "text": message["content"]})
                if message.get("cache_break"):
                    marked.append(system[-1])
            continue
        if role == "system":
            role = "user"
            blocks = [{"type": "text", "text": message.get("content", "")}]
        elif role == "tool":
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
        if message.get("cache_break") and blocks:
            marked.append(blocks[-1])
        if converted and converted[-1]["role"] == role:
            converted[-1]["content"].extend(blocks)
        else:
            converted.append({"role": role, "content": blocks})
    for block in marked[-MAX_CACHE_BREAKPOINTS:]:
        block["cache_control"] = dict(_EPHEMERAL)
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
    """Anthropic reports uncached input, cache reads and cache writes apart; Usage counts all
    three as input tokens, with the reads and writes named."""
    read = getattr(usage, "cache_read_input_tokens", 0) or 0
    write = getattr(usage, "cache_creation_input_tokens", 0) or 0
    return Usage(
        (usage.input_tokens or 0) + read + write,
        usage.output_tokens or 0,
        cached_input_tokens=read,
        cache_write_tokens=write,
    )


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
    caches_prompts = True

    def _client(self) -> anthropic.Anthropic:
        # No SDK retries: ModelProvider.chat retries within the call's total budget. Every
        # connection goes through the outbound guard (CADRE_MODEL_PROVIDER_ALLOWED_HOSTS).
        return anthropic.Anthropic(
            api_key=self.api_key or "not-needed",
            base_url=self.base_url or None,
            timeout=self.attempt_timeout(),
            max_retries=0,
            http_client=self.guarded_http_client("httpx2"),
        )

    def _host(self) -> str:
        return failures.host_of(self.base_url, "api.anthropic.com")

    def _error(self, error: Exception) -> ProviderError:
        return failures.from_sdk(
            error,
            sdk=anthropic,
            host=self._host(),
            model=self.model,
            timeout=self.timeout,
        )

    def list_models(self) -> list[str] | None:
        try:
            return sorted(str(model.id) for model in self._client().models.list())
        except anthropic.NotFoundError:
            return None
        except _FAILURES as error:
            raise self._error(error) from error
        except (AttributeError, TypeError, ValueError):
            raise failures.bad_response(self._host()) from None

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
        except _FAILURES as error:
            raise self._error(error) from error
        except ValueError:  # declared JSON, and is not
            raise failures.bad_response(self._host()) from None
        if not isinstance(message, Message):
            # A 200 that is not JSON comes back as text (an HTML page, a proxy's notice).
            raise failures.bad_response(self._host())
        return _result(message, self.model)

    def stream(self, messages: list[dict], tools: list[dict], **params) -> Iterator[ChatDelta]:
        try:
            with self._client().messages.stream(**self._request(messages, tools, params)) as s:
                for event in s:
                    if event.type == "text":
                        yield ChatDelta(text=event.text)
                final = s.get_final_message()
        except _FAILURES as error:
            raise self._error(error) from error
        yield ChatDelta(result=_result(final, self.model))
