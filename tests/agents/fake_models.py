"""Loopback fake model servers speaking the documented wire formats (no network).

- OpenAI-compatible `POST /v1/chat/completions`: JSON answers with `tool_calls`, and SSE
  streaming (`data: {chunk}` lines, tool-call argument fragments by index, a final usage chunk
  when `stream_options.include_usage`, then `data: [DONE]`).
- Anthropic `POST /v1/messages`: JSON answers with `tool_use` blocks, and SSE streaming
  (`message_start`, `content_block_start/delta/stop` with `text_delta` / `input_json_delta`,
  `message_delta` with usage, `message_stop`).
Each server answers from a script of turns: {"text": ...} or {"tool_calls": [{"name",
"arguments"}]}, and records every request (headers and JSON body).

With `caching=True` usage is counted from the request (a token is 4 bytes of its canonical
JSON) and the servers cache prompts as the providers document:
- OpenAI: cached tokens are the longest prefix identical with an earlier request, in 128-token
  blocks, none below 1024 (`usage.prompt_tokens_details.cached_tokens`);
- Anthropic: a prefix is written at each `cache_control` breakpoint (tools, then system, then
  messages) and read back when a later breakpoint, or a block up to 20 before it, ends the
  same prefix; none below 1024 tokens (`cache_read_input_tokens`,
  `cache_creation_input_tokens`, and `input_tokens` for the rest).
"""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MIN_CACHED_TOKENS = 1024
OPENAI_CACHE_BLOCK = 128
ANTHROPIC_LOOKBACK = 20


def _tokens(text: str) -> int:
    return (len(text.encode()) + 3) // 4


def _canonical(value) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


class FakeModelServer:
    def __init__(self, script: list[dict] | None = None, *, caching: bool = False):
        self.script = list(script or [])
        self.caching = caching
        self.requests: list[dict] = []
        self.usages: list[dict] = []  # what each answer reported, in order
        self._openai_prompts: list[str] = []
        self._anthropic_cache: set[str] = set()
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                with server.lock:
                    headers = {k.lower(): v for k, v in self.headers.items()}
                    server.requests.append({"path": self.path, "headers": headers, "body": body})
                    turn = server.script.pop(0) if server.script else {"text": "(no script)"}
                if self.path.endswith("/chat/completions"):
                    server.openai(self, body, turn)
                elif self.path.endswith("/messages"):
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
        usage = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
        if self.caching:
            usage = self._openai_usage(body, text)
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
            if with_usage:
                payload["usage"] = usage
            handler.wfile.write(f"data: {json.dumps(payload)}\n\n".encode())
            handler.wfile.flush()

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
        chunk({}, finish_reason=finish)
        if (body.get("stream_options") or {}).get("include_usage"):
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
