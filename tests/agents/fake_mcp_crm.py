"""A fake CRM as an MCP server, written with the official SDK: a read tool (`get_contact`,
annotated read-only) and a destructive write tool (`delete_contact`, annotated
`destructiveHint`). It counts every call it receives and keeps what each call was sent
(arguments, the `Idempotency-Key` header where HTTP carries one, the request's `_meta`).

Served two ways:
- `serve_crm()`: Streamable HTTP on a free loopback port (uvicorn in a thread); the counts are
  this process's `CALLS`.
- `python tests/agents/fake_mcp_crm.py` speaks stdio; it appends each call as a JSON line to the
  file named by FAKE_CRM_LOG.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import threading
import time

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations

CONTACTS = {
    "zhang.san@example.com": {"name": "Zhang San", "phone": "13812345678", "stage": "lead"},
    "li.si@example.com": {"name": "Li Si", "phone": "13900001111", "stage": "customer"},
}

CALLS: list[dict] = []  # every call this process served: {"tool", "arguments", "headers", "meta"}

crm = MCPServer("fake-crm", instructions="A fake CRM for Cadre's tests.")


def _record(tool: str, arguments: dict, ctx: Context) -> None:
    request = getattr(ctx.request_context, "request", None)
    headers = dict(getattr(request, "headers", {}) or {})
    meta = getattr(ctx.request_context, "meta", None)
    meta = meta.model_dump(by_alias=True) if hasattr(meta, "model_dump") else (meta or {})
    entry = {
        "tool": tool,
        "arguments": arguments,
        "idempotency_key": headers.get("idempotency-key"),
        "meta": meta,
    }
    CALLS.append(entry)
    log = os.environ.get("FAKE_CRM_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry, default=str) + "\n")


@crm.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def get_contact(email: str, ctx: Context) -> dict:
    """Look up a contact by e-mail address."""
    _record("get_contact", {"email": email}, ctx)
    contact = CONTACTS.get(email)
    if contact is None:
        return {"found": False}
    return {"found": True, "email": email, **contact}


@crm.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True))
async def delete_contact(email: str, ctx: Context, reason: str = "") -> dict:
    """Delete a contact and its history from the CRM."""
    _record("delete_contact", {"email": email, "reason": reason}, ctx)
    return {"deleted": email in CONTACTS, "email": email}


def calls_of(tool: str) -> list[dict]:
    return [call for call in CALLS if call["tool"] == tool]


@contextlib.contextmanager
def serve_crm(app: MCPServer = crm):
    """Yield the URL of the fake CRM's (or another SDK server's) Streamable HTTP endpoint on
    loopback; stopped on exit."""
    import uvicorn

    CALLS.clear()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    server = uvicorn.Server(
        uvicorn.Config(
            app.streamable_http_app(),
            lifespan="on",
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=2,
        )
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the fake CRM did not start"
        time.sleep(0.01)
    host, port = listener.getsockname()
    try:
        yield f"http://{host}:{port}/mcp"
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        listener.close()


if __name__ == "__main__":
    sys.exit(crm.run(transport="stdio") or 0)
