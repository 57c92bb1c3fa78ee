"""The request handler the loopback identity-provider fakes share: silent, and one way to answer."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler


class QuietHandler(BaseHTTPRequestHandler):
    content_type = "application/json"  # what _send answers unless told otherwise

    def log_message(self, *args):
        pass

    def _send(self, status, body=b"", content_type=None, headers=None):
        self.send_response(status)
        self.send_header("Content-Type", content_type or self.content_type)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
