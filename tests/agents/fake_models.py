"""Loopback fake model servers speaking the documented wire formats (no network).

- OpenAI-compatible `POST /v1/chat/completions`: JSON answers with `tool_calls`, and SSE
  streaming (`data: {chunk}` lines, tool-call argument fragments by index, a final usage chunk
  when `stream_options.include_usage`, then `data: [DONE]`).
- Anthropic `POST /v1/messages`: JSON answers with `tool_use` blocks, and SSE streaming
  (`message_start`, `content_block_start/delta/stop` with `text_delta` / `input_json_delta`,
  `message_delta` with usage, `message_stop`).
- `GET /v1/models`: the model list both APIs offer (`{"data": [{"id": ...}]}`).
Each server answers from a script of turns: {"text": ...} or {"tool_calls": [{"name",
"arguments"}]} (OpenAI turns may set "usage": {"prompt_tokens", "completion_tokens", and
"prompt_tokens_details"}), and records every request (headers and JSON body); `chunk_delay`
spaces the streamed chunks. Given `api_key`, it refuses any other key with a 401 in the API's
error shape. `blackhole()` is a port that accepts connections and never answers;
`closed_port()` one where nothing listens.

With `caching=True` usage is counted from the request (a token is 4 bytes of its canonical
JSON) and the servers cache prompts as the providers document:
- OpenAI: cached tokens are the longest prefix identical with an earlier request, in 128-token
  blocks, none below 1024 (`usage.prompt_tokens_details.cached_tokens`);
- Anthropic: a prefix is written at each `cache_control` breakpoint (tools, then system, then
  messages) and read back when a later breakpoint, or a block up to 20 before it, ends the
  same prefix; none below 1024 tokens (`cache_read_input_tokens`,
  `cache_creation_input_tokens`, and `input_tokens` for the rest).

`usage_format` names whose documented usage fields the OpenAI-compatible server answers in
(USAGE_FORMATS): "openai" (`prompt_tokens_details.cached_tokens`, also Qwen/DashScope's
compatible mode, Zhipu GLM and Kimi K2), "deepseek" (`prompt_cache_hit_tokens` /
`prompt_cache_miss_tokens`), "moonshot" (a top-level `cached_tokens`; streamed usage in the
last chunk's choice, as Moonshot sends it) or "plain" (no cache fields: Ollama, LM Studio).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODELS = ["fake-chat", "fake-large"]

MIN_CACHED_TOKENS = 1024
OPENAI_CACHE_BLOCK = 128
ANTHROPIC_LOOKBACK = 20
USAGE_FORMATS = ("openai", "deepseek", "moonshot", "plain")


def _tokens(text: str) -> int:
    return (len(text.encode()) + 3) // 4


def _canonical(value) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


class FakeModelServer:
    def __init__(
        self,
        script: list[dict] | None = None,
        *,
        api_key: str | None = None,
        models: list[str] | None = None,
        chunk_delay: float = 0.0,
        caching: bool = False,
        usage_format: str = "openai",
    ):
        assert usage_format in USAGE_FORMATS, usage_format
        self.script = list(script or [])
        self.caching = caching
        self.usage_format = usage_format
        self.requests: list[dict] = []
        self.usages: list[dict] = []  # what each answer reported, in order
        self._openai_prompts: list[str] = []
        self._anthropic_cache: set[str] = set()
        self.lock = threading.Lock()
        self.api_key = api_key
        self.models = list(MODELS if models is None else models)
        self.chunk_delay = chunk_delay  # seconds between streamed chunks (a model thinking)
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def _refused(self) -> bool:
                if server.api_key is None:
                    return False
                sent = self.headers.get("Authorization", "").removeprefix("Bearer ")
                if self.headers.get("x-api-key", sent) == server.api_key:
                    return False
                server._json(
                    self,
                    {
                        "error": {
                            "message": "Incorrect API key provided.",
                            "type": "invalid_request_error",
                            "code": "invalid_api_key",
                        }
                    },
                    status=401,
                )
                return True

            def do_GET(self):
                with server.lock:
                    headers = {k.lower(): v for k, v in self.headers.items()}
                    server.requests.append({"path": self.path, "headers": headers, "body": None})
                if self._refused():
                    return
                if self.path.rstrip("/") == "/v1/models":
                    server._json(
                        self,
                        {
                            "object": "list",
                            "data": [
                                {"id": name, "object": "model", "type": "model", "created": 1}
                                for name in server.models
                            ],
                            "has_more": False,
                        },
                    )
                else:
                    self.send_response(404)
                    self.end_headers()

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                with server.lock:
                    headers = {k.lower(): v for k, v in self.headers.items()}
                    server.requests.append({"path": self.path, "headers": headers, "body": body})
                if self._refused():
                    return
                with server.lock:
                    turn = server.script.pop(0) if server.script else {"text": "(no script)"}
                if self.path == "/v1/chat/completions":
                    server.openai(self, body, turn)
                elif self.path.startswith("/v1/") and self.path.endswith("/messages"):
                    server.anthropic(self, body, turn)
                else:
                    self.send_response(404)
                    self.end_headers()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()

    # --- helpers ---------------------------------------------------------------------

    @staticmethod
    def _json(handler, payload: dict, status: int = 200) -> None:
        data = json.dumps(payload).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    @staticmethod
    def _sse_start(handler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Cache-Control", "no-cache")
        handler.end_headers()

    @staticmethod
    def _pieces(text: str, size: int = 4) -> list[str]:
        return [text[i : i + size] for i in range(0, len(text), size)] or []

    # --- prompt caching ----------------------------------------------------------------

    def _openai_usage(self, body: dict, text: str) -> dict:
        prompt = "".join(
            _canonical(part) for part in [body.get("tools") or [], *body.get("messages", [])]
        )
        total = _tokens(prompt)
        with self.lock:
            common = max(
                (_common_prefix(prompt, earlier) for earlier in self._openai_prompts), default=0
            )
            self._openai_prompts.append(prompt)
        cached = min(common // 4, total) // OPENAI_CACHE_BLOCK * OPENAI_CACHE_BLOCK
        cached = cached if cached >= MIN_CACHED_TOKENS else 0
        output = max(_tokens(text), 1)
        return {
            "prompt_tokens": total,
            "completion_tokens": output,
            "total_tokens": total + output,
            "prompt_tokens_details": {"cached_tokens": cached},
        }

    def _in_format(self, usage: dict) -> dict:
        """The usage as the provider of `usage_format` documents it."""
        cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
        counts = {k: v for k, v in usage.items() if k != "prompt_tokens_details"}
        if self.usage_format == "deepseek":
            return {
                **counts,
                "prompt_cache_hit_tokens": cached,
                "prompt_cache_miss_tokens": usage["prompt_tokens"] - cached,
            }
        if self.usage_format == "moonshot":
            return {**counts, "cached_tokens": cached}
        if self.usage_format == "plain":
            return counts
        return usage

    def _anthropic_usage(self, body: dict, text: str) -> dict:
        blocks: list[tuple[str, bool]] = []  # (canonical block, is a breakpoint)
        for tool in body.get("tools") or []:
            blocks.append(
                (
                    _canonical({k: v for k, v in tool.items() if k != "cache_control"}),
                    "cache_control" in tool,
                )
            )
        system = body.get("system") or []
        for block in [{"type": "text", "text": system}] if isinstance(system, str) else system:
            blocks.append(
                (
                    _canonical({k: v for k, v in block.items() if k != "cache_control"}),
                    "cache_control" in block,
                )
            )
        for message in body.get("messages", []):
            content = message["content"]
            for index, block in enumerate(
                [{"type": "text", "text": content}] if isinstance(content, str) else content
            ):
                plain = {k: v for k, v in block.items() if k != "cache_control"}
                marker = message["role"] if index == 0 else ""
                blocks.append((marker + _canonical(plain), "cache_control" in block))
        ends, length, hashed = [], 0, hashlib.sha256()
        for canonical, _ in blocks:  # prefix hash and token count after each block
            hashed.update(canonical.encode())
            length += len(canonical.encode())
            ends.append((hashed.hexdigest(), (length + 3) // 4))
        total = ends[-1][1] if ends else 0
        breakpoints = [i for i, (_, marked) in enumerate(blocks) if marked]
        read = 0
        with self.lock:
            for point in breakpoints:
                for i in range(point, max(point - ANTHROPIC_LOOKBACK, -1), -1):
                    digest, tokens = ends[i]
                    if digest in self._anthropic_cache:
                        read = max(read, tokens)
                        break
            written = 0
            for point in breakpoints:
                digest, tokens = ends[point]
                if tokens >= MIN_CACHED_TOKENS:
                    self._anthropic_cache.add(digest)
                    written = max(written, tokens)
        creation = max(written - read, 0)
        return {
            "input_tokens": total - read - creation,
            "output_tokens": max(_tokens(text), 1),
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": creation,
        }

    # --- OpenAI chat completions --------------------------------------------------------

    def openai(self, handler, body: dict, turn: dict) -> None:
        model = body.get("model", "fake")
        calls = turn.get("tool_calls", [])
        text = turn.get("text", "")
        usage = turn.get("usage") or {"prompt_tokens": 11, "completion_tokens": 7}
        usage = {**usage, "total_tokens": usage["prompt_tokens"] + usage["completion_tokens"]}
        if self.caching:
            usage = self._openai_usage(body, text)
        usage = self._in_format(usage)
        with self.lock:
            self.usages.append(usage)
        finish = "tool_calls" if calls else "stop"
        if not body.get("stream"):
            message = {"role": "assistant", "content": text or None}
            if calls:
                message["tool_calls"] = [
                    {
                        "id": f"call_{i}",
                        "type": "function",
                        "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])},
                    }
                    for i, c in enumerate(calls)
                ]
            self._json(
                handler,
                {
                    "id": "chatcmpl-1",
                    "object": "chat.completion",
                    "created": 1,
                    "model": model,
                    "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                    "usage": usage,
                },
            )
            return
        self._sse_start(handler)

        def chunk(delta: dict | None, finish_reason=None, with_usage=False) -> None:
            payload = {
                "id": "chatcmpl-1",
                "object": "chat.completion.chunk",
                "created": 1,
                "model": model,
                "choices": []
                if delta is None
                else [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
            }
            if with_usage and delta is not None:
                payload["choices"][0]["usage"] = usage  # Moonshot: in the last choice
            elif with_usage:
                payload["usage"] = usage
            handler.wfile.write(f"data: {json.dumps(payload)}\n\n".encode())
            handler.wfile.flush()
            if self.chunk_delay:
                time.sleep(self.chunk_delay)

        chunk({"role": "assistant", "content": ""})
        for piece in self._pieces(text):
            chunk({"content": piece})
        for index, call in enumerate(calls):
            arguments = json.dumps(call["arguments"])
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": f"call_{index}",
                            "type": "function",
                            "function": {"name": call["name"], "arguments": ""},
                        }
                    ]
                }
            )
            for piece in self._pieces(arguments, 5):
                chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
        moonshot = self.usage_format == "moonshot"
        chunk({}, finish_reason=finish, with_usage=moonshot)
        if not moonshot and (body.get("stream_options") or {}).get("include_usage"):
            chunk(None, with_usage=True)
        handler.wfile.write(b"data: [DONE]\n\n")
        handler.wfile.flush()

    # --- Anthropic messages -----------------------------------------------------------

    def anthropic(self, handler, body: dict, turn: dict) -> None:
        model = body.get("model", "fake")
        calls = turn.get("tool_calls", [])
        text = turn.get("text", "")
        stop = "tool_use" if calls else "end_turn"
        usage = {"input_tokens": 13, "output_tokens": 9}
        if self.caching:
            usage = self._anthropic_usage(body, text)
        with self.lock:
            self.usages.append(usage)
        blocks = ([{"type": "text", "text": text}] if text else []) + [
            {"type": "tool_use", "id": f"toolu_{i}", "name": c["name"], "input": c["arguments"]}
            for i, c in enumerate(calls)
        ]
        if not body.get("stream"):
            self._json(
                handler,
                {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": blocks,
                    "stop_reason": stop,
                    "stop_sequence": None,
                    "usage": usage,
                },
            )
            return
        self._sse_start(handler)

        def event(kind: str, data: dict) -> None:
            handler.wfile.write(
                f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()
            )
            handler.wfile.flush()

        event(
            "message_start",
            {
                "message": {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {**usage, "output_tokens": 1},
                }
            },
        )
        for index, block in enumerate(blocks):
            if block["type"] == "text":
                event(
                    "content_block_start",
                    {"index": index, "content_block": {"type": "text", "text": ""}},
                )
                for piece in self._pieces(block["text"]):
                    event(
                        "content_block_delta",
                        {"index": index, "delta": {"type": "text_delta", "text": piece}},
                    )
            else:
                event(
                    "content_block_start",
                    {
                        "index": index,
                        "content_block": {
                            "type": "tool_use",
                            "id": block["id"],
                            "name": block["name"],
                            "input": {},
                        },
                    },
                )
                for piece in self._pieces(json.dumps(block["input"]), 5):
                    event(
                        "content_block_delta",
                        {
                            "index": index,
                            "delta": {"type": "input_json_delta", "partial_json": piece},
                        },
                    )
            event("content_block_stop", {"index": index})
        event(
            "message_delta",
            {
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": usage["output_tokens"]},
            },
        )
        event("message_stop", {})


@contextlib.contextmanager
def blackhole():
    """A base URL whose server accepts connections (the kernel's backlog does) and never
    answers: a request to it waits for its timeout."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    finally:
        listener.close()


def closed_port() -> str:
    """A base URL on a loopback port nothing listens on: connecting is refused at once."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return f"http://127.0.0.1:{port}/v1"


def _common_prefix(a: str, b: str) -> int:
    """Length in bytes of the longest common prefix of two strings."""
    a_bytes, b_bytes = a.encode(), b.encode()
    low, high = 0, min(len(a_bytes), len(b_bytes))
    while low < high:  # binary search on prefix equality: bytes compare in C
        middle = (low + high + 1) // 2
        if a_bytes[:middle] == b_bytes[:middle]:
            low = middle
        else:
            high = middle - 1
    return low
