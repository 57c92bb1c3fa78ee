"""Loopback fake model servers speaking the documented wire formats (no network).

- OpenAI-compatible `POST /v1/chat/completions`: JSON answers with `tool_calls`, and SSE
  streaming (`data: {chunk}` lines, tool-call argument fragments by index, a final usage chunk
  when `stream_options.include_usage`, then `data: [DONE]`).
- Anthropic `POST /v1/messages`: JSON answers with `tool_use` blocks, and SSE streaming
  (`message_start`, `content_block_start/delta/stop` with `text_delta` / `input_json_delta`,
  `message_delta` with usage, `message_stop`).
Each server answers from a script of turns: {"text": ...} or {"tool_calls": [{"name",
"arguments"}]} (OpenAI turns may set "usage": {"prompt_tokens", "completion_tokens", and
"prompt_tokens_details"}), and records every request (headers and JSON body).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeModelServer:
    def __init__(self, script: list[dict] | None = None):
        self.script = list(script or [])
        self.requests: list[dict] = []
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

    # --- OpenAI chat completions --------------------------------------------------------

    def openai(self, handler, body: dict, turn: dict) -> None:
        model = body.get("model", "fake")
        calls = turn.get("tool_calls", [])
        text = turn.get("text", "")
        usage = turn.get("usage") or {"prompt_tokens": 11, "completion_tokens": 7}
        usage = {**usage, "total_tokens": usage["prompt_tokens"] + usage["completion_tokens"]}
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
                    "usage": {"input_tokens": 13, "output_tokens": 9},
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
                    "usage": {"input_tokens": 13, "output_tokens": 1},
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
            {"delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": 9}},
        )
        event("message_stop", {})
