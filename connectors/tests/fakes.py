"""A fake platform API on loopback: real HTTP, recorded requests, scripted 429/5xx failures.

Each platform's tests define the routes of its documented API (token endpoint, send, update
card) on a `FakePlatformServer`; tests assert on `server.requests` and script failures with
`server.fail_next(path, status, headers, times)`. `host` binds it elsewhere than loopback
(bench/cluster.py serves it on its stand-in IM machine's address).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit


@dataclass
class Recorded:
    method: str
    path: str
    query: dict
    headers: dict
    body: bytes

    def json(self):
        return json.loads(self.body or b"null")


@dataclass
class Failure:
    status: int
    headers: dict = field(default_factory=dict)
    body: bytes = b"{}"
    remaining: int = 1


Handler = Callable[[Recorded], tuple[int, dict]]


class FakePlatformServer:
    def __init__(self, host: str = "127.0.0.1"):
        self.routes: dict[tuple[str, str], Handler] = {}
        self.requests: list[Recorded] = []
        self.failures: dict[str, list[Failure]] = {}
        self.lock = threading.Lock()
        server = self

        class RequestHandler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output quiet
                pass

            def _handle(self):
                parts = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                recorded = Recorded(
                    self.command,
                    parts.path,
                    {k: v[-1] for k, v in parse_qs(parts.query).items()},
                    {k.lower(): v for k, v in self.headers.items()},
                    body,
                )
                status, headers, payload = server.dispatch(recorded)
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PUT = do_PATCH = _handle

        self.httpd = ThreadingHTTPServer((host, 0), RequestHandler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakePlatformServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def route(self, method: str, path: str, handler: Handler) -> None:
        self.routes[(method, path)] = handler

    def fail_next(
        self,
        path: str,
        status: int,
        *,
        headers: dict | None = None,
        body: dict | None = None,
        times: int = 1,
    ) -> None:
        with self.lock:
            self.failures.setdefault(path, []).append(
                Failure(status, headers or {}, json.dumps(body or {}).encode(), times)
            )

    def dispatch(self, recorded: Recorded) -> tuple[int, dict, bytes]:
        with self.lock:
            self.requests.append(recorded)
            queue = self.failures.get(recorded.path)
            if queue:
                failure = queue[0]
                failure.remaining -= 1
                if failure.remaining <= 0:
                    queue.pop(0)
                return failure.status, failure.headers, failure.body
        handler = self.routes.get((recorded.method, recorded.path))
        if handler is None:  # "/prefix/*" routes match any path below the prefix
            for (method, path), candidate in self.routes.items():
                if (
                    path.endswith("*")
                    and method == recorded.method
                    and recorded.path.startswith(path[:-1])
                ):
                    handler = candidate
                    break
        if handler is None:
            return 404, {}, b'{"error": "no such route"}'
        status, data = handler(recorded)
        if isinstance(data, bytes):  # a file download: the raw bytes
            return status, {}, data
        return status, {}, json.dumps(data).encode()

    def calls(self, path: str) -> list[Recorded]:
        return [r for r in self.requests if r.path == path]
