"""Cadre's MCP server at /mcp/: Streamable HTTP, Cadre API keys, every call audited."""

from __future__ import annotations

import time
import uuid
from typing import Annotated, Any, Literal

import anyio
from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import ObjectDoesNotExist
from django.db import close_old_connections, transaction
from django.http import Http404, HttpRequest
from django.utils import translation
from django.utils.translation import gettext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp_types import ToolAnnotations
from pydantic import Field

from cadre.api.parsers import json_body_problem
from cadre.api.throttles import AuthFailureThrottle, blocked_message, record_auth_failure
from cadre.errors import CadreError, InvalidInput
from cadre.governance import audit
from cadre.languages import asked_language
from cadre.mcp_server import tools
from cadre.observability import RequestContext, bind_request_context, tracer
from cadre.tenancy.actors import api_key_actor
from cadre.tenancy.authentication import KeyRefused, api_key_resolve
from cadre.tenancy.languages import chosen_language
from cadre.tenancy.models import ApiKey
from cadre.tenancy.services import api_key_touch

SCOPE_KEY = "cadre.api_key_id"
# The longest a confirmation_request call holds its HTTP request open waiting for a decision.
MAX_WAIT_SECONDS = 60
POLL_SECONDS = 0.5

mcp = MCPServer(
    "cadre",
    instructions=(
        "Cadre's governed memory, skills Hub and human confirmations. Every call is scoped to "
        "the organization and the scopes of the API key you connect with, and audited."
    ),
)


class _Envelope(ToolError):
    """A refusal in Cadre's error shape, as the tool result's text."""


def _envelope(error: Exception) -> _Envelope:
    import json

    if isinstance(error, (Http404, ObjectDoesNotExist)):
        code, message, details = "not_found", str(error) or gettext("Not found."), {}
    else:
        code, message = getattr(error, "code", "error"), str(getattr(error, "message", error))
        details = getattr(error, "details", None) or {}
    return _Envelope(json.dumps({"error": {"code": code, "message": message, "details": details}}))


def _origin(ctx: Context) -> tuple[int, RequestContext]:
    request = ctx.request_context.request
    scope = getattr(request, "scope", None) or {}
    key_id = scope.get(SCOPE_KEY)
    if key_id is None:  # only reachable if the app is mounted without its edge
        raise ToolError(gettext("Not authenticated."))
    headers = dict(getattr(request, "headers", {}) or {})
    client = scope.get("client") or (None, None)
    return key_id, RequestContext(
        request_id=scope.get("cadre.request_id", uuid.uuid4().hex),
        ip=client[0],
        user_agent=(headers.get("user-agent") or "")[:400] or None,
    )


def _accept_language(ctx: Context) -> str:
    request = ctx.request_context.request
    headers = getattr(request, "headers", None) or {}
    return str(headers.get("accept-language") or "")[:1000]


def _call_sync(
    key_id: int,
    origin: RequestContext,
    tool_name: str,
    fn,
    arguments: dict,
    accept_language: str = "",
) -> Any:
    """One tool call: a span, the key's actor, the service, and its audit event in the same
    transaction; a refusal is audited too (nothing of the call is kept). Refusals speak the
    key member's language, else the caller's Accept-Language, else the organization's."""
    try:
        with (
            bind_request_context(origin),
            tracer().start_as_current_span(f"mcp.{tool_name}"),
        ):
            key = ApiKey.objects.select_related("organization", "created_by").get(pk=key_id)
            actor = api_key_actor(key)
            language = chosen_language(
                asked_language(None, accept_language), key.created_by, key.organization
            )
            with translation.override(language):
                return _call_actor(actor, tool_name, fn, arguments)
    finally:
        close_old_connections()


def _call_actor(actor, tool_name: str, fn, arguments: dict) -> Any:
    try:
        # The same text rules as every JSON body (NUL, lone surrogates, infinity, depth):
        # a tool's arguments reach PostgreSQL and the masking engine as they came.
        problem = json_body_problem(arguments)
        if problem:
            raise InvalidInput(problem.replace("body", "arguments", 1))
        with transaction.atomic():
            result = fn(actor, **arguments)
            audit.record(
                actor=actor,
                action="mcp.call",
                target=("mcp_tool", tool_name, tool_name),
                changes={"tool": tool_name, "outcome": "ok"},
            )
        return result
    except (CadreError, Http404, ObjectDoesNotExist) as error:
        refused = _envelope(tools.not_found_from(error))
        with transaction.atomic():
            audit.record(
                actor=actor,
                action="mcp.call",
                target=("mcp_tool", tool_name, tool_name),
                changes={"tool": tool_name, "outcome": getattr(error, "code", "not_found")},
            )
        raise refused from None


async def _call(ctx: Context, tool_name: str, fn, **arguments) -> Any:
    key_id, origin = _origin(ctx)
    return await sync_to_async(_call_sync, thread_sensitive=False)(
        key_id, origin, tool_name, fn, arguments, _accept_language(ctx)
    )


# --- tools ----------------------------------------------------------------------------------

READ = ToolAnnotations(readOnlyHint=True, openWorldHint=False)
WRITE = ToolAnnotations(readOnlyHint=False, destructiveHint=False, openWorldHint=False)


@mcp.tool(annotations=READ)
async def memory_search(
    query: Annotated[str, Field(description="What to recall, in natural language")],
    ctx: Context,
    top_k: Annotated[int, Field(ge=1, le=100)] = 10,
    scopes: Annotated[
        list[str] | None, Field(description="Narrow to these scope keys (never widens)")
    ] = None,
    kinds: list[str] | None = None,
    tags: list[str] | None = None,
    conversation_id: str | None = None,
) -> dict:
    """Hybrid search over the memories this key may read (scopes computed by Cadre)."""
    return await _call(
        ctx,
        "memory_search",
        tools.memory_search,
        query=query,
        top_k=top_k,
        scopes=scopes,
        kinds=kinds,
        tags=tags,
        conversation_id=conversation_id,
    )


@mcp.tool(annotations=WRITE)
async def memory_add(
    content: Annotated[str, Field(description="One self-contained statement to remember")],
    ctx: Context,
    scope: Annotated[str, Field(description="user, agent, department, position, organization")] = (
        "user"
    ),
    scope_id: int | None = None,
    kind: str = "fact",
    tags: list[str] | None = None,
    conversation_id: str | None = None,
) -> dict:
    """Write one memory (masking, dedup, provenance and audit as Cadre's own API)."""
    # Stateless: no initialize handshake per request, so the client names itself by User-Agent.
    client = (ctx.headers or {}).get("user-agent", "")
    return await _call(
        ctx,
        "memory_add",
        tools.memory_add,
        client=client,
        content=content,
        scope=scope,
        scope_id=scope_id,
        kind=kind,
        tags=tags,
        conversation_id=conversation_id,
    )


@mcp.tool(annotations=WRITE)
async def memory_feedback(
    text: Annotated[str, Field(description="A correction, e.g. 'No, I prefer tea now'")],
    ctx: Context,
    scopes: list[str] | None = None,
    conversation_id: str | None = None,
) -> dict:
    """A natural-language correction: contradicted memories are superseded (history kept)."""
    return await _call(
        ctx,
        "memory_feedback",
        tools.memory_feedback,
        text=text,
        scopes=scopes,
        conversation_id=conversation_id,
    )


@mcp.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True))
async def memory_delete(memory_id: int, ctx: Context, reason: str = "") -> dict:
    """Delete a memory this key may change; its content is purged by Cadre's purge task."""
    return await _call(
        ctx, "memory_delete", tools.memory_delete, memory_id=memory_id, reason=reason
    )


@mcp.tool(annotations=READ)
async def skill_search(query: str, ctx: Context, limit: Annotated[int, Field(ge=1, le=50)] = 10):
    """Search the skills Hub for published skills this key may see."""
    return await _call(ctx, "skill_search", tools.skill_search, query=query, limit=limit)


@mcp.tool(annotations=READ)
async def skill_get(
    name: Annotated[str, Field(description="@namespace/name")],
    ctx: Context,
    version: Annotated[str, Field(description="exact version, dist-tag or range")] = "latest",
) -> dict:
    """A published skill version's SKILL.md and files, signature-verified by Cadre."""
    return await _call(ctx, "skill_get", tools.skill_get, name=name, version=version)


@mcp.tool(annotations=WRITE)
async def confirmation_request(
    action: Annotated[str, Field(description="The action a person must approve")],
    ctx: Context,
    arguments: dict | None = None,
    risk: Literal["medium", "high", "critical"] = "high",
    reason: str = "",
    request_key: Annotated[
        str,
        Field(
            description="Your key for this request: call again with the same key to poll "
            "(the same confirmation is returned, never a second one)"
        ),
    ] = "",
    wait_seconds: Annotated[int, Field(ge=0, le=MAX_WAIT_SECONDS)] = 30,
) -> dict:
    """Ask a person to approve a high-risk action. Waits up to wait_seconds for the decision;
    if none came, returns status 'pending' — call again with the same request_key to poll."""
    result = await _call(
        ctx,
        "confirmation_request",
        tools.confirmation_request,
        action=action,
        arguments=arguments,
        risk=risk,
        reason=reason,
        request_key=request_key,
    )
    deadline = time.monotonic() + min(max(wait_seconds, 0), MAX_WAIT_SECONDS)
    key_id, origin = _origin(ctx)
    while result["status"] == "pending" and time.monotonic() < deadline:
        await anyio.sleep(POLL_SECONDS)
        result = await sync_to_async(_status_sync, thread_sensitive=False)(
            key_id, origin, result["request_key"]
        )
    return result


def _status_sync(key_id: int, origin: RequestContext, request_key: str) -> dict:
    try:
        key = ApiKey.objects.select_related("organization", "created_by").get(pk=key_id)
        return tools.confirmation_status(api_key_actor(key), request_key=request_key)
    finally:
        close_old_connections()


# --- resources ------------------------------------------------------------------------------


def _resource(document: str):
    async def read(agent_id: str, ctx: Context) -> str:
        try:
            return await _call(
                ctx,
                f"resource.{document}",
                tools.agent_document,
                agent_id=agent_id,
                document=document,
            )
        except ToolError as refused:
            raise ResourceError(str(refused)) from None

    return read


mcp.resource(
    "cadre://agents/{agent_id}/sop",
    name="sop",
    description="The agent's template SOP",
    mime_type="text/markdown",
)(_resource("sop"))
mcp.resource(
    "cadre://agents/{agent_id}/agent.md",
    name="agent_md",
    description="The agent's AGENT.md",
    mime_type="text/markdown",
)(_resource("agent_md"))
mcp.resource(
    "cadre://agents/{agent_id}/user.md",
    name="user_md",
    description="The agent's USER.md (its member's, else the template's)",
    mime_type="text/markdown",
)(_resource("user_md"))


# --- the ASGI edge ----------------------------------------------------------------------------


def _authenticate_sync(
    header: str, ip: str | None, accept_language: str = ""
) -> tuple[int | None, int, str]:
    """(key id, status, message): the REST API's key lookup and failed-auth throttle. The
    message speaks the caller's Accept-Language (no key, so no member to ask)."""
    with translation.override(chosen_language(asked_language(None, accept_language))):
        return _authenticate_in_language(header, ip)


def _authenticate_in_language(header: str, ip: str | None) -> tuple[int | None, int, str]:
    try:
        request = HttpRequest()
        request.META["REMOTE_ADDR"] = ip or ""
        wait = AuthFailureThrottle().wait(request)
        if wait is not None:
            return None, 429, blocked_message(wait)
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            record_auth_failure(request)
            return None, 401, gettext("Send a Cadre API key: Authorization: Bearer <key>.")
        try:
            key = api_key_resolve(token)
        except KeyRefused as refused:
            record_auth_failure(request)
            return None, 401, str(refused)
        api_key_touch(key, ip)
        return key.pk, 200, ""
    finally:
        close_old_connections()


async def _refuse(send, status: int, message: str) -> None:
    import json

    code = {401: "not_authenticated", 429: "throttled"}.get(status, "error")
    body = json.dumps({"error": {"code": code, "message": message, "details": {}}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="cadre"'))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def mcp_endpoint(scope, receive, send) -> None:
    """Authenticate the key on every request, then serve it statelessly: no session lives in
    a process, so any Cadre web worker can answer any request (and a revoked key stops at
    its next request)."""
    headers = dict(scope.get("headers") or [])
    client = scope.get("client") or (None, None)
    key_id, status, message = await sync_to_async(_authenticate_sync, thread_sensitive=False)(
        headers.get(b"authorization", b"").decode("latin-1"),
        client[0],
        headers.get(b"accept-language", b"").decode("latin-1")[:1000],
    )
    if key_id is None:
        await _refuse(send, status, message)
        return
    incoming = headers.get(b"x-request-id", b"").decode("latin-1")
    request_id = incoming if 8 <= len(incoming) <= 64 and incoming.isascii() else uuid.uuid4().hex
    scope = {**scope, SCOPE_KEY: key_id, "cadre.request_id": request_id}
    # A manager per request (stateless): Cadre runs uvicorn without the ASGI lifespan that
    # MCPServer.streamable_http_app() needs to start a long-lived one; the SDK exposes the
    # low-level server the manager takes only as this attribute.
    manager = StreamableHTTPSessionManager(
        app=mcp._lowlevel_server,
        stateless=True,
        json_response=True,
        max_request_body_size=settings.CADRE_MAX_BODY_BYTES,
    )
    async with manager.run():
        await manager.handle_request(scope, receive, send)


def with_mcp(application):
    """`application` with /mcp (and /mcp/...) answered by the MCP server."""

    async def dispatch(scope, receive, send):
        if scope["type"] == "http" and (
            scope["path"] == "/mcp" or scope["path"].startswith("/mcp/")
        ):
            await mcp_endpoint({**scope, "path": "/mcp"}, receive, send)
            return
        await application(scope, receive, send)

    return dispatch
