"""MCP tools for Cadre's agents: the organization's registry of external MCP servers, the
official SDK's client (Streamable HTTP and stdio) and the tools they list, as the tool gate
sees them.

A template attaches a server's tools through its tool permissions, by name
`mcp__<server>__<tool>` (or `mcp__<server>__*` for every tool the server lists). The model sees
each with the JSON schema the server declared; every call then goes through the executor like a
built-in tool: allow-list, risk (the admin's per-tool setting; default medium, high for a tool
annotated `destructiveHint`), confirmation when high, arguments re-identified from the vault,
the effect keyed by the step's idempotency key (sent as the `Idempotency-Key` header and in the
request's `_meta`), the result through the `retrieved` stage, audited by the executor as
`tool.mcp_call` — or `tool.mcp_call.failed` with the failure's class (`timeout`, `unreachable`,
`server_error`, `refused`) when the server answered an error, did not answer in time or could
not be reached; never the failure's text, which may quote the arguments or the far side.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import threading
from contextlib import asynccontextmanager

import httpx2
from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext

from cadre import outbound
from cadre.agents.models import McpServer
from cadre.agents.tools.registry import RISKS, Tool, ToolFailed
from cadre.errors import Conflict, InvalidInput
from cadre.governance import audit
from cadre.tenancy.actors import Actor

PREFIX = "mcp__"
SERVER_NAME = re.compile(r"^[a-z][a-z0-9-]{0,31}$")
MAX_TOOL_NAME = 64  # what model APIs accept for a function name
ALLOW_SETTING = outbound.MCP_SERVERS
IDEMPOTENCY_META = "cadre/idempotency_key"


# What went wrong with a call, as its audit event names it (`McpUnavailable.error_class`).
TIMEOUT = "timeout"  # no answer within the server's timeout_seconds
UNREACHABLE = "unreachable"  # no connection, or the connection broke
SERVER_ERROR = "server_error"  # the server answered an error (JSON-RPC error, HTTP status)
REFUSED = "refused"  # the outbound guard or the operator's settings refused it


class McpUnavailable(Exception):
    """The server could not be reached, or answered outside the protocol. `error_class` says
    which (one of the names above); `exception` names the underlying exception's class."""

    def __init__(self, message: str, error_class: str = UNREACHABLE, exception: str = ""):
        super().__init__(message)
        self.error_class = error_class
        self.exception = exception


# --- names and risk -----------------------------------------------------------------------


def exposed_name(server_name: str, tool_name: str) -> str:
    """The name the model sees: `mcp__<server>__<tool>`, characters models refuse as `_`."""
    return f"{PREFIX}{server_name}__{re.sub(r'[^A-Za-z0-9_-]', '_', tool_name)}"


def split_name(name: str) -> tuple[str, str] | None:
    """(server, exposed tool part) of an `mcp__…` name, or None for any other tool name."""
    if not name.startswith(PREFIX):
        return None
    server, sep, tool = name[len(PREFIX) :].partition("__")
    if not sep or not server or not tool:
        return None
    return server, tool


def wildcard(server_name: str) -> str:
    return f"{PREFIX}{server_name}__*"


def default_risk(tool: dict) -> str:
    """Medium, or high for a tool its server annotates destructive."""
    annotations = tool.get("annotations") or {}
    return "high" if annotations.get("destructiveHint") else "medium"


def tool_risk(server: McpServer, tool: dict) -> str:
    risk = (server.tool_risks or {}).get(tool["name"])
    return risk if risk in RISKS else default_risk(tool)


def tools_with_risk(server: McpServer) -> list[dict]:
    """The server's listed tools, each with the name the model sees and its effective risk."""
    return [
        {
            **tool,
            "exposed_name": exposed_name(server.name, tool["name"]),
            "default_risk": default_risk(tool),
            "risk": tool_risk(server, tool),
        }
        for tool in server.tools or []
    ]


# --- the SDK's client ---------------------------------------------------------------------


def _credentials(server: McpServer) -> dict[str, str]:
    if not server.credentials:
        return {}
    try:
        value = json.loads(server.credentials)
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def stdio_allowed(command: str) -> bool:
    """stdio servers run on Cadre's workers: only the commands the operator lists."""
    allowed = list(getattr(settings, "CADRE_MCP_STDIO_COMMANDS", []) or [])
    if "*" in allowed:
        return True
    return command in allowed or (shutil.which(command) or command) in allowed


@asynccontextmanager
async def _session(server: McpServer, headers: dict[str, str] | None = None):
    from mcp.client.session import ClientSession

    if server.transport == McpServer.Transport.STDIO:
        from mcp.client.stdio import StdioServerParameters, stdio_client

        if not stdio_allowed(server.command):
            raise McpUnavailable(
                f"the command {server.command!r} is not allowed on this install", REFUSED
            )
        params = StdioServerParameters(
            command=server.command, args=list(server.args or []), env=_credentials(server) or None
        )
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session
        return

    from mcp.client.streamable_http import streamable_http_client

    # Checked now for a clear refusal, and again in every connection the client opens, which
    # goes to the address that passed (a name resolving elsewhere the second time gains
    # nothing).
    outbound.check_url(server.url, allow_setting=ALLOW_SETTING)
    async with (
        outbound.async_http_client(
            allow_setting=ALLOW_SETTING,
            headers={**_credentials(server), **(headers or {})},
            timeout=server.timeout_seconds,
        ) as http,
        streamable_http_client(server.url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def _sync(make_coroutine, timeout: float):
    """Run the SDK's async client from the runtime's sync code (a thread of its own when this
    thread already runs an event loop)."""

    async def bounded():
        return await asyncio.wait_for(make_coroutine(), timeout)

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(bounded())
    box: dict = {}

    def target():
        try:
            box["value"] = asyncio.run(bounded())
        except BaseException as error:
            box["error"] = error

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def _unavailable(server: McpServer, error: BaseException) -> McpUnavailable:
    from mcp.shared.exceptions import MCPError

    # An exception group from the SDK's task group: name the first cause.
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    if isinstance(error, McpUnavailable):
        return error
    exception = type(error).__name__
    if isinstance(error, TimeoutError | httpx2.TimeoutException):
        return McpUnavailable(
            f"the MCP server {server.name!r} did not answer in time", TIMEOUT, exception
        )
    refused = _refusal(error)
    if refused is not None:
        return McpUnavailable(
            f"the MCP server {server.name!r} is refused: {refused.message}", REFUSED, exception
        )
    if isinstance(error, MCPError | httpx2.HTTPStatusError):
        return McpUnavailable(
            f"the MCP server {server.name!r} answered an error: {error}", SERVER_ERROR, exception
        )
    return McpUnavailable(
        f"the MCP server {server.name!r} could not be reached: {exception}: {error}",
        UNREACHABLE,
        exception,
    )


def _refusal(error: BaseException | None) -> InvalidInput | None:
    """The guard's refusal behind an error, however deep the SDK wrapped it."""
    seen = 0
    while error is not None and seen < 20:
        if isinstance(error, InvalidInput):
            return error
        error, seen = error.__cause__ or error.__context__, seen + 1
    return None


def _dump(value):
    if value is None:
        return None
    dump = getattr(value, "model_dump", None)
    return dump(by_alias=True, exclude_none=True) if dump else value


def list_tools(server: McpServer) -> list[dict]:
    """The tools the server lists (every page): name, description, input schema, annotations."""

    from mcp_types import PaginatedRequestParams

    async def fetch():
        found = []
        async with _session(server) as session:
            cursor = None
            while True:
                params = PaginatedRequestParams(cursor=cursor) if cursor else None
                page = await session.list_tools(params=params)
                for tool in page.tools:
                    data = _dump(tool)
                    found.append(
                        {
                            "name": tool.name,
                            "description": (tool.description or "")[:2000],
                            "input_schema": data.get("inputSchema") or {"type": "object"},
                            "annotations": data.get("annotations") or {},
                        }
                    )
                cursor = page.next_cursor
                if not cursor:
                    return found

    try:
        return _sync(fetch, server.timeout_seconds)
    except Exception as error:
        raise _unavailable(server, error) from None


def _content(block) -> dict:
    data = _dump(block) or {}
    if data.get("type") == "text":
        return {"type": "text", "text": data.get("text", "")}
    # Images, audio and resources are not handed to the model: named, not shown.
    return {"type": data.get("type", "unknown"), "omitted": True}


def call_tool(server: McpServer, tool_name: str, arguments: dict, idempotency_key: str) -> dict:
    """Call one tool; its result as the model reads it (text content, structured content and
    whether the server reported an error)."""

    async def call():
        headers = {"Idempotency-Key": idempotency_key}
        async with _session(server, headers) as session:
            return await session.call_tool(
                tool_name, arguments, meta={IDEMPOTENCY_META: idempotency_key}
            )

    try:
        result = _sync(call, server.timeout_seconds)
    except Exception as error:
        raise _unavailable(server, error) from None
    structured = getattr(result, "structured_content", None)
    is_error = getattr(result, "is_error", False)
    output = {"content": [_content(block) for block in getattr(result, "content", None) or []]}
    if structured is not None:
        output["structured_content"] = structured
    if is_error:
        output["is_error"] = True
    return output


# --- the tool gate's view -----------------------------------------------------------------


class McpToolUnavailable(Exception):
    """The named MCP tool cannot be called now: an unknown or revoked server, or a tool the
    server no longer lists. The message says which."""


AUDIT_ACTION = "tool.mcp_call"


def _perform(server: McpServer, tool: dict):
    def handler(ctx, arguments: dict) -> dict:
        try:
            return call_tool(server, tool["name"], arguments, ctx.key)
        except McpUnavailable as error:
            # The model reads the message; the audit keeps only what kind of failure it was.
            raise ToolFailed(
                "mcp_unavailable",
                str(error),
                details={"error_class": error.error_class, "exception": error.exception},
            ) from None

    return handler


def _audit_target(server: McpServer, tool: dict):
    """The server and tool a call went to (and whether the server reported the tool's own
    error), for `tool.mcp_call` / `tool.mcp_call.failed`: never the arguments or the result."""

    def target(ctx, arguments: dict, result: dict | None) -> dict:
        found = {"server": server.name, "server_id": server.pk, "tool": tool["name"]}
        if result is not None:
            found["is_error"] = bool(result.get("is_error"))
        return found

    return target


def resolve(organization_id: int, name: str, servers: dict | None = None) -> Tool:
    """The Tool behind an `mcp__<server>__<tool>` name, or McpToolUnavailable saying why.
    `servers` caches the organization's servers by name for one run."""
    parts = split_name(name)
    if parts is None:
        raise McpToolUnavailable(f"there is no tool named {name!r}")
    server_name, _ = parts
    if servers is None or server_name not in servers:
        server = McpServer.objects.filter(organization_id=organization_id, name=server_name).first()
        if servers is not None:
            servers[server_name] = server
    else:
        server = servers[server_name]
    if server is None:
        raise McpToolUnavailable(f"there is no MCP server named {server_name!r}")
    if not server.is_active:
        raise McpToolUnavailable(f"the MCP server {server_name!r} is revoked")
    for tool in server.tools or []:
        if exposed_name(server.name, tool["name"]) == name:
            return Tool(
                name=name,
                description=(tool.get("description") or tool["name"])[:1024],
                parameters=tool.get("input_schema") or {"type": "object"},
                risk=tool_risk(server, tool),
                side_effect="external",
                handler=_perform(server, tool),
                audit_target=_audit_target(server, tool),
                audit_action=AUDIT_ACTION,
                extra={"mcp_server": server.name, "mcp_tool": tool["name"]},
            )
    raise McpToolUnavailable(f"the MCP server {server_name!r} lists no tool {name!r}")


def rule_for(tools: dict, name: str) -> dict | None:
    """The template's rule for an MCP tool: its own entry, else its server's wildcard."""
    if name in tools:
        return tools[name]
    parts = split_name(name)
    if parts is None:
        return None
    return tools.get(wildcard(parts[0]))


def specs_for(organization_id: int, granted: dict, servers: dict | None = None) -> list[dict]:
    """The MCP tools a run's grants allow, as the model sees them (active servers only)."""
    servers = {} if servers is None else servers
    names: set[str] = set()
    for name in granted:
        parts = split_name(name)
        if parts is None:
            continue
        server_name, tool_part = parts
        if server_name not in servers:
            servers[server_name] = McpServer.objects.filter(
                organization_id=organization_id, name=server_name
            ).first()
        server = servers[server_name]
        if server is None or not server.is_active:
            continue
        for tool in server.tools or []:
            exposed = exposed_name(server.name, tool["name"])
            if (tool_part == "*" or exposed == name) and len(exposed) <= MAX_TOOL_NAME:
                names.add(exposed)
    specs = []
    for name in sorted(names):
        tool = resolve(organization_id, name, servers)
        specs.append(tool.spec())
    return specs


def check_permission_names(organization_id: int | None, names) -> str | None:
    """An error for template tool permissions naming MCP tools wrongly, else None."""
    for name in names:
        parts = split_name(name)
        if parts is None:
            return f"unknown tool {name!r}"
        server_name, _ = parts
        if not SERVER_NAME.match(server_name):
            return f"unknown tool {name!r}"
        if (
            organization_id is not None
            and not McpServer.objects.filter(
                organization_id=organization_id, name=server_name
            ).exists()
        ):
            return f"{name}: there is no MCP server named {server_name!r}"
    return None


# --- the registry's write paths -----------------------------------------------------------


def _described(server: McpServer) -> dict:
    return {
        "name": server.name,
        "transport": server.transport,
        "url": server.url,
        "command": server.command,
        "args": server.args,
        "credentials_set": bool(server.credentials),
        "timeout_seconds": server.timeout_seconds,
        "is_active": server.is_active,
    }


def _clean(
    *, name, transport, url, command, args, credentials, timeout_seconds
) -> tuple[dict, dict]:
    errors: dict[str, list[str]] = {}
    if not SERVER_NAME.match(name or ""):
        errors["name"] = [
            "Lower-case letters, digits and hyphens, starting with a letter (at most 32)."
        ]
    if transport not in McpServer.Transport.values:
        errors["transport"] = [f"One of {', '.join(McpServer.Transport.values)}."]
    elif transport == McpServer.Transport.STREAMABLE_HTTP:
        if not url:
            errors["url"] = ["A streamable HTTP server needs its URL."]
        if command or args:
            errors["command"] = ["Only stdio servers run a command."]
    else:
        if not command:
            errors["command"] = ["A stdio server needs its command."]
        elif not stdio_allowed(command):
            errors["command"] = [
                "This command is not in CADRE_MCP_STDIO_COMMANDS: the operator decides which "
                "commands Cadre's workers may run."
            ]
        if url:
            errors["url"] = ["A stdio server has no URL."]
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        errors["args"] = ["A list of strings."]
    if credentials is not None and (
        not isinstance(credentials, dict)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in credentials.items())
    ):
        errors["credentials"] = ["An object of strings (headers, or environment variables)."]
    if not (1 <= int(timeout_seconds) <= 300):
        errors["timeout_seconds"] = ["Between 1 and 300."]
    if errors:
        raise InvalidInput(gettext("The MCP server is not valid."), details=errors)
    if transport == McpServer.Transport.STREAMABLE_HTTP:
        url = outbound.check_url(
            url, allow_setting=ALLOW_SETTING, code=outbound.WEBHOOK_URL_REFUSED
        )
    return {"url": url or "", "command": command or "", "args": args}, credentials


def mcp_server_create(
    *,
    actor: Actor,
    name: str,
    transport: str,
    url: str = "",
    command: str = "",
    args: list | None = None,
    credentials: dict | None = None,
    description: str = "",
    timeout_seconds: int = 30,
) -> McpServer:
    actor.require("connector.manage")
    cleaned, credentials = _clean(
        name=name,
        transport=transport,
        url=url,
        command=command,
        args=list(args or []),
        credentials=credentials,
        timeout_seconds=timeout_seconds,
    )
    server = McpServer(
        organization=actor.organization,
        name=name,
        transport=transport,
        description=description,
        credentials=json.dumps(credentials) if credentials else "",
        timeout_seconds=timeout_seconds,
        **cleaned,
    )
    try:
        with transaction.atomic():
            server.save()
            audit.record(
                actor=actor, action="mcp_server.create", target=server, after=_described(server)
            )
    except IntegrityError:
        raise Conflict(
            gettext("An MCP server with this name already exists."), code="duplicate"
        ) from None
    return server


@transaction.atomic
def mcp_server_update(*, actor: Actor, server: McpServer, **changes) -> McpServer:
    """Change the connection (URL, command, credentials, timeout, description); credentials
    replace the stored ones when given (an empty object clears them)."""
    actor.require("connector.manage")
    server = McpServer.objects.select_for_update().get(pk=server.pk)
    before = _described(server)
    credentials = changes.pop("credentials", None)
    fields = {
        "name": server.name,
        "transport": server.transport,
        "url": changes.get("url", server.url),
        "command": changes.get("command", server.command),
        "args": changes.get("args", server.args),
        "credentials": credentials,
        "timeout_seconds": changes.get("timeout_seconds", server.timeout_seconds),
    }
    cleaned, credentials = _clean(**fields)
    for key, value in cleaned.items():
        setattr(server, key, value)
    server.timeout_seconds = fields["timeout_seconds"]
    if "description" in changes:
        server.description = changes["description"]
    if credentials is not None:
        server.credentials = json.dumps(credentials) if credentials else ""
    server.updated_at = timezone.now()
    server.save()
    audit.record(
        actor=actor,
        action="mcp_server.update",
        target=server,
        before=before,
        after=_described(server),
    )
    return server


def mcp_server_discover(*, actor: Actor, server: McpServer) -> McpServer:
    """Ask the server for its tools and keep the list (risks set earlier stay)."""
    actor.require("connector.manage")
    if not server.is_active:
        raise Conflict(
            gettext("The MCP server %(name)r is revoked.") % {"name": server.name},
            code="mcp_server_revoked",
        )
    try:
        tools = list_tools(server)
    except McpUnavailable as error:
        raise InvalidInput(str(error), code="mcp_unavailable") from None
    with transaction.atomic():
        server = McpServer.objects.select_for_update().get(pk=server.pk)
        server.tools = tools
        server.discovered_at = timezone.now()
        server.updated_at = server.discovered_at
        server.save(update_fields=["tools", "discovered_at", "updated_at"])
        audit.record(
            actor=actor,
            action="mcp_server.discover",
            target=server,
            changes={"tools": [tool["name"] for tool in tools]},
        )
    return server


@transaction.atomic
def mcp_server_tool_risks_set(*, actor: Actor, server: McpServer, risks: dict) -> McpServer:
    """Set the risk of some of the server's tools ({tool: low|medium|high|null}); null returns
    a tool to its default."""
    actor.require("connector.manage")
    server = McpServer.objects.select_for_update().get(pk=server.pk)
    known = {tool["name"] for tool in server.tools or []}
    errors = {}
    if not isinstance(risks, dict):
        raise InvalidInput(gettext("Risks must be an object keyed by tool name."))
    for name, risk in risks.items():
        if name not in known:
            errors[name] = ["The server lists no such tool (discover its tools first)."]
        elif risk is not None and risk not in RISKS:
            errors[name] = [f"One of {', '.join(RISKS)}, or null for the default."]
    if errors:
        raise InvalidInput(gettext("Unknown tool or risk."), details={"risks": errors})
    before = dict(server.tool_risks or {})
    merged = dict(before)
    for name, risk in risks.items():
        if risk is None:
            merged.pop(name, None)
        else:
            merged[name] = risk
    server.tool_risks = merged
    server.updated_at = timezone.now()
    server.save(update_fields=["tool_risks", "updated_at"])
    audit.record(
        actor=actor,
        action="mcp_server.tool_risks",
        target=server,
        before={"tool_risks": before},
        after={"tool_risks": merged},
    )
    return server


@transaction.atomic
def mcp_server_set_active(*, actor: Actor, server: McpServer, active: bool) -> McpServer:
    """Revoke (agents can no longer call its tools) or restore a server."""
    actor.require("connector.manage")
    server = McpServer.objects.select_for_update().get(pk=server.pk)
    if server.is_active != active:
        server.is_active = active
        server.updated_at = timezone.now()
        server.save(update_fields=["is_active", "updated_at"])
        audit.record(
            actor=actor,
            action="mcp_server.restore" if active else "mcp_server.revoke",
            target=server,
        )
    return server
