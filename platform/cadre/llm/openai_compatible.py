"""OpenAI-compatible chat completions (OpenAI, Azure, vLLM, Ollama, DeepSeek, Qwen endpoints)
through the openai SDK with a base URL."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import openai
from openai.types.chat import ChatCompletion, ChatCompletionChunk

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

# What a call may raise: the SDK's errors, httpx's (a stream broken after its headers), and the
# outbound guard's refusal of the destination (raised in the connection, passed through as is).
_FAILURES = (openai.OpenAIError, httpx.HTTPError, OutboundRefused)

# Parameters passed through to the endpoint; anything else in a template is ignored.
_PASSED = {
    "temperature",
    "top_p",
    "max_tokens",
    "max_completion_tokens",
    "stop",
    "seed",
    "presence_penalty",
    "frequency_penalty",
    "response_format",
    # Routes calls sharing a prompt prefix to the same cache (OpenAI); the runtime sets it per
    # template and session.
    "prompt_cache_key",
}


def to_openai_messages(messages: list[dict]) -> list[dict]:
    converted = []
    for message in messages:
        role = message["role"]
        if role == "assistant" and message.get("tool_calls"):
            converted.append(
                {
                    "role": "assistant",
                    "content": message.get("content") or None,
                    "tool_calls": [
                        {
                            "id": call["id"],
                            "type": "function",
                            "function": {
                                "name": call["name"],
                                "arguments": json.dumps(call["arguments"], ensure_ascii=False),
                            },
                        }
                        for call in message["tool_calls"]
                    ],
                }
            )
        elif role == "tool":
            converted.append(
                {
                    "role": "tool",
                    "tool_call_id": message["tool_call_id"],
                    "content": message["content"],
                }
            )
        else:
            converted.append({"role": role, "content": message.get("content", "")})
    return converted


def to_openai_tools(tools: list[dict]) -> list[dict]:
    return [
        {
            "type": "function",
            "function": {
                "name": tool["name"],
                "description": tool.get("description", ""),
                "parameters": tool.get("parameters") or {"type": "object", "properties": {}},
            },
        }
        for tool in tools
    ]


def _field(value, name: str):
    """A field of a usage object the SDK parsed, or of a dict (fields the SDK does not declare
    come through as they were sent)."""
    if value is None:
        return None
    if isinstance(value, dict):
        return value.get(name)
    return getattr(value, name, None)


def _count(value, name: str) -> int:
    number = _field(value, name)
    return number if isinstance(number, int) and number > 0 else 0


def _usage(usage) -> Usage:
    """Usage from an answer's `usage`, read in each provider's own fields (docs/models.md):
    prompt tokens served from the endpoint's prefix cache are
    `prompt_tokens_details.cached_tokens` (OpenAI, Azure, Qwen/DashScope, Zhipu GLM, Kimi K2,
    vLLM), `prompt_cache_hit_tokens` (DeepSeek, beside `prompt_cache_miss_tokens`) or a
    top-level `cached_tokens` (Moonshot's context cache); prompt tokens written to an explicit
    cache are `prompt_tokens_details.cache_creation_input_tokens` (DashScope). Every one of
    them is part of `prompt_tokens`."""
    if usage is None:
        return Usage()
    prompt = _count(usage, "prompt_tokens")
    details = _field(usage, "prompt_tokens_details")
    cached = max(
        _count(details, "cached_tokens"),
        _count(usage, "prompt_cache_hit_tokens"),
        _count(usage, "cached_tokens"),
    )
    miss = _field(usage, "prompt_cache_miss_tokens")
    if not prompt and isinstance(miss, int):
        prompt = cached + max(miss, 0)  # hits and misses are the whole prompt (DeepSeek)
    cached = min(cached, prompt)
    written = min(_count(details, "cache_creation_input_tokens"), prompt - cached)
    return Usage(
        prompt,
        _count(usage, "completion_tokens"),
        cached_input_tokens=cached,
        cache_write_tokens=written,
    )


def _arguments(raw: str | None) -> dict:
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {"_unparsed": raw}
    return value if isinstance(value, dict) else {"_value": value}


class OpenAICompatibleProvider(ModelProvider):
    kind = "openai_compatible"
    caches_prompts = True

    def _client(self) -> openai.OpenAI:
        # No SDK retries: ModelProvider.chat retries within the call's total budget. Every
        # connection goes through the outbound guard (CADRE_MODEL_PROVIDER_ALLOWED_HOSTS).
        return openai.OpenAI(
            api_key=self.api_key or "not-needed",
            base_url=self.base_url or None,
            timeout=self.attempt_timeout(),
            max_retries=0,
            http_client=self.guarded_http_client("httpx"),
        )

    def _host(self) -> str:
        return failures.host_of(self.base_url, "api.openai.com")

    def _error(self, error: Exception) -> ProviderError:
        return failures.from_sdk(
            error,
            sdk=openai,
            host=self._host(),
            model=self.model,
            timeout=self.timeout,
        )

    def list_models(self) -> list[str] | None:
        try:
            return sorted(str(model.id) for model in self._client().models.list())
        except openai.NotFoundError:
            return None  # endpoints without /models (some gateways) are still usable
        except _FAILURES as error:
            raise self._error(error) from error
        except (AttributeError, TypeError, ValueError):
            raise failures.bad_response(self._host()) from None

    def _request(self, messages, tools, params) -> dict:
        request = {"model": self.model, "messages": to_openai_messages(messages)}
        if tools:
            request["tools"] = to_openai_tools(tools)
        request.update({key: value for key, value in params.items() if key in _PASSED})
        return request

    def complete(self, messages: list[dict], tools: list[dict], **params) -> ChatResult:
        try:
            response = self._client().chat.completions.create(
                **self._request(messages, tools, params)
            )
        except _FAILURES as error:
            raise self._error(error) from error
        except ValueError:  # declared JSON, and is not
            raise failures.bad_response(self._host()) from None
        if not isinstance(response, ChatCompletion):
            # A 200 that is not JSON comes back as text (an HTML page, a proxy's notice).
            raise failures.bad_response(self._host())
        if not response.choices:
            raise ProviderError("openai-compatible endpoint: no choices in the answer")
        choice = response.choices[0]
        calls = [
            ToolCall(
                id=call.id, name=call.function.name, arguments=_arguments(call.function.arguments)
            )
            for call in (choice.message.tool_calls or [])
        ]
        return ChatResult(
            text=choice.message.content or "",
            tool_calls=calls,
            usage=_usage(response.usage),
            model=response.model or self.model,
            finish_reason=choice.finish_reason or "",
        )

    def stream(self, messages: list[dict], tools: list[dict], **params) -> Iterator[ChatDelta]:
        request = self._request(messages, tools, params)
        request["stream"] = True
        request["stream_options"] = {"include_usage": True}
        text: list[str] = []
        calls: dict[int, dict] = {}
        usage = Usage()
        model, finish = self.model, ""
        try:
            for chunk in self._client().chat.completions.create(**request):
                if not isinstance(chunk, ChatCompletionChunk):
                    raise failures.bad_response(self._host())
                model = chunk.model or model
                if chunk.usage is not None:
                    usage = _usage(chunk.usage)
                for choice in chunk.choices or []:
                    if chunk.usage is None and _field(choice, "usage") is not None:
                        # Moonshot streams its usage in the last chunk's choice
                        usage = _usage(_field(choice, "usage"))
                    delta = choice.delta
                    if choice.finish_reason:
                        finish = choice.finish_reason
                    if delta is None:
                        continue
                    if delta.content:
                        text.append(delta.content)
                        yield ChatDelta(text=delta.content)
                    for part in delta.tool_calls or []:
                        slot = calls.setdefault(part.index, {"id": "", "name": "", "args": ""})
                        if part.id:
                            slot["id"] = part.id
                        if part.function is not None:
                            slot["name"] += part.function.name or ""
                            slot["args"] += part.function.arguments or ""
        except _FAILURES as error:
            raise self._error(error) from error
        yield ChatDelta(
            result=ChatResult(
                text="".join(text),
                tool_calls=[
                    ToolCall(id=slot["id"], name=slot["name"], arguments=_arguments(slot["args"]))
                    for _, slot in sorted(calls.items())
                ],
                usage=usage,
                model=model,
                finish_reason=finish,
            )
        )
