"""Hostile input for every operation Cadre serves: a deterministic request generator and a sweep.

For each operation of /api/ (drf-spectacular's schema), /mem0/ and /memos/ (their own
openapi.json), /scim/v2/ (its resources, listed here) and each tool of the MCP server (its input
schema from `tools/list`), a request is built from a plain baseline — real ids in the path where
the caller has them, the body's required fields with ordinary values — and then one path
parameter, query parameter or body field at a time is replaced by a hostile value: NUL bytes, a
lone surrogate (a `"\\ud800"` escape in the raw JSON, its UTF-8 bytes in a URL), unicode digits
(`²`, `١٢`), a 300-character name, the literal `1e309`, a huge or negative integer, 10,000-deep
JSON, and wrong types (a list, an object, `true`, `null`). The whole body is also replaced by
10,000-deep JSON. Every answer must be below 500.

Deterministic rather than schemathesis' generated strategies: the same examples every run, each
one named by (field, value kind) so a 5xx is reported as exactly what was sent, and several
values (a lone surrogate, `1e309`, deep nesting) that a Python JSON encoder cannot produce are
written into the raw body. Used by tests/api/test_hostile_input.py (a few examples per
operation) and bench/hostile_fuzz.py (many).
"""

from __future__ import annotations

import json
import logging
import re
import threading
import traceback
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from urllib.parse import quote

import httpx

# --- the values ------------------------------------------------------------------------------

DEPTH = 10_000
LONG = "n" * 300


@dataclass(frozen=True)
class Kind:
    """One hostile value: as URL text (path and query; None where it has no text form) and as
    a raw JSON fragment (placed verbatim into the body)."""

    name: str
    text: str | None
    raw_json: str
    # Text already percent-encoded (a lone surrogate has no UTF-8 encoding to quote).
    encoded: bool = False


KINDS: tuple[Kind, ...] = (
    Kind("nul", "a\x00b", '"a\\u0000b"'),
    Kind("lone_surrogate", "%ED%A0%80", '"\\ud800"', encoded=True),
    Kind("superscript_digit", "²", '"²"'),
    Kind("arabic_digits", "١٢", '"١٢"'),
    Kind("long_300", LONG, json.dumps(LONG)),
    Kind("float_1e309", "1e309", "1e309"),
    Kind("huge_int", "99999999999999999999999", "99999999999999999999999"),
    Kind("negative_int", "-1", "-1"),
    Kind("deep_json", None, "[" * DEPTH + "]" * DEPTH),
    Kind("list", None, '["x"]'),
    Kind("object", None, '{"a": 1}'),
    Kind("true", "true", "true"),
    Kind("null", None, "null"),
)
KIND_BY_NAME = {kind.name: kind for kind in KINDS}
# The whole body replaced (not one field): nesting deeper than any parser's recursion limit.
DEEP_BODY = "deep_body"
SENTINEL = "@@cadre-hostile@@"


# --- operations ------------------------------------------------------------------------------


@dataclass
class Operation:
    """One method of one path, with what a baseline request needs."""

    surface: str  # api, mem0, memos, scim, mcp
    method: str
    path: str  # a template: /api/v1/departments/{id}/
    path_params: dict[str, str] = field(default_factory=dict)  # name -> baseline value
    query: dict[str, str | None] = field(default_factory=dict)  # name -> baseline (None: absent)
    body: dict | None = None  # the baseline body (None: no body)
    body_fields: list[tuple] = field(default_factory=list)  # paths into the body to replace
    body_root: tuple = ()  # where body_fields live (the MCP tool's arguments)
    headers: dict[str, str] = field(default_factory=dict)
    label: str = ""  # operation id, route name or tool name

    @property
    def key(self) -> str:
        """How the known-5xx list names this operation."""
        if self.surface == "mcp":
            return f"mcp {self.label}"
        return f"{self.method.upper()} {self.path}"


@dataclass(frozen=True)
class Example:
    operation: Operation
    location: str  # path, query, body, whole_body
    name: str  # the parameter or dotted body field ("" for the whole body)
    kind: str

    def describe(self) -> str:
        where = f"{self.location} {self.name}".strip()
        return f"{self.operation.key} [{where} = {self.kind}]"


def _text_locations(operation: Operation) -> list[tuple[str, str]]:
    return [("path", name) for name in operation.path_params] + [
        ("query", name) for name in operation.query
    ]


def _dotted(path: tuple) -> str:
    return ".".join(str(part) for part in path)


def all_examples(operation: Operation) -> list[Example]:
    """Every (location, field, kind) of this operation, interleaved so that any prefix spreads
    over the kinds and the fields: the n-th round gives each kind its n-th field."""
    per_kind: list[list[Example]] = []
    for kind in KINDS:
        candidates = []
        if kind.text is not None:
            candidates += [
                Example(operation, location, name, kind.name)
                for location, name in _text_locations(operation)
            ]
        if operation.body is not None:
            candidates += [
                Example(operation, "body", _dotted(path), kind.name)
                for path in operation.body_fields
            ]
        per_kind.append(candidates)
    # Start each operation at a different kind and field, so a few examples per operation still
    # cover every kind across the surface.
    offset = sum(map(ord, operation.key))
    per_kind = per_kind[offset % len(per_kind) :] + per_kind[: offset % len(per_kind)]
    per_kind = [
        items[offset % len(items) :] + items[: offset % len(items)] if items else items
        for items in per_kind
    ]
    ordered: list[Example] = []
    if operation.method in ("post", "put", "patch"):
        ordered.append(Example(operation, "whole_body", "", DEEP_BODY))
    for index in range(max((len(items) for items in per_kind), default=0)):
        ordered += [items[index] for items in per_kind if index < len(items)]
    return ordered


def examples(operations: Iterable[Operation], per_operation: int | None) -> Iterator[Example]:
    for operation in operations:
        chosen = all_examples(operation)
        yield from chosen if per_operation is None else chosen[:per_operation]


# --- building a request ----------------------------------------------------------------------


def _set(body, path: tuple, value):
    """`body` with `value` at `path`, creating dicts (and a one-item list for an index)."""
    node = body
    for position, part in enumerate(path[:-1]):
        following = path[position + 1]
        empty = [] if isinstance(following, int) else {}
        if isinstance(part, int):
            while len(node) <= part:
                node.append(empty)
            if not isinstance(node[part], (list, dict)):
                node[part] = empty
        elif not isinstance(node.get(part), (list, dict)):
            node[part] = empty
        node = node[part]
    last = path[-1]
    if isinstance(last, int):
        while len(node) <= last:
            node.append(None)
    node[last] = value
    return body


def _undotted(name: str) -> tuple:
    return tuple(
        int(part) if part.isdigit() and part.isascii() else part for part in name.split(".")
    )


def _quote(kind: Kind) -> str:
    return kind.text if kind.encoded else quote(kind.text, safe="")


def build(example: Example) -> tuple[str, str, dict[str, str], bytes | None]:
    """(method, URL path with query, headers, raw body) of one example."""
    operation, kind = example.operation, KIND_BY_NAME.get(example.kind)
    path_values = {name: quote(value, safe="") for name, value in operation.path_params.items()}
    query = {
        name: quote(value, safe="") for name, value in operation.query.items() if value is not None
    }
    if example.location == "path":
        path_values[example.name] = _quote(kind)
    elif example.location == "query":
        query[example.name] = _quote(kind)
    path = re.sub(r"\{(\w+)\}", lambda match: path_values[match.group(1)], operation.path)
    if query:
        path += "?" + "&".join(f"{quote(name, safe='')}={value}" for name, value in query.items())
    headers = dict(operation.headers)
    content = None
    if example.location == "whole_body":
        content = ("[" * DEPTH + "]" * DEPTH).encode()
    elif operation.body is not None:
        body = json.loads(json.dumps(operation.body))
        if example.location == "body":
            _set(body, operation.body_root + _undotted(example.name), SENTINEL)
        text = json.dumps(body, ensure_ascii=False)
        if example.location == "body":
            text = text.replace(json.dumps(SENTINEL), kind.raw_json)
        content = text.encode("utf-8")
    if content is not None:
        headers.setdefault("Content-Type", "application/json")
    return operation.method.upper(), path, headers, content


# --- baselines from JSON Schema --------------------------------------------------------------

STRING_FORMATS = {
    "email": "hostile@example.com",
    "date-time": "2026-01-01T00:00:00Z",
    "date": "2026-01-01",
    "uri": "https://example.com/",
    "uuid": "00000000-0000-4000-8000-000000000000",
    "ipv4": "192.0.2.1",
}


def _resolve(schema: dict, document: dict) -> dict:
    seen = 0
    while isinstance(schema, dict) and "$ref" in schema and seen < 20:
        node = document
        for part in schema["$ref"].lstrip("#/").split("/"):
            node = node.get(part, {}) if isinstance(node, dict) else {}
        schema, seen = node, seen + 1
    if not isinstance(schema, dict):
        return {}
    for combinator in ("allOf", "oneOf", "anyOf"):
        if combinator in schema:
            options = [
                _resolve(option, document)
                for option in schema[combinator]
                if option.get("type") != "null"
            ]
            if combinator == "allOf":
                merged: dict = {k: v for k, v in schema.items() if k != combinator}
                for option in options:
                    properties = {**merged.get("properties", {}), **option.get("properties", {})}
                    required = [*merged.get("required", []), *option.get("required", [])]
                    merged = {**merged, **option, "properties": properties, "required": required}
                return merged
            if options:
                return {**{k: v for k, v in schema.items() if k != combinator}, **options[0]}
    return schema


def sample(schema: dict, document: dict, depth: int = 0):
    """An ordinary value of `schema`: its example or first enum value, else one of its type
    with only the required properties of an object."""
    schema = _resolve(schema, document)
    if "example" in schema and not isinstance(schema["example"], (dict, list)):
        return schema["example"]
    if schema.get("enum"):
        return next((value for value in schema["enum"] if value is not None), None)
    if "default" in schema and schema["default"] is not None:
        return schema["default"]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((item for item in kind if item != "null"), "string")
    if kind == "integer":
        return max(1, schema.get("minimum", 1))
    if kind == "number":
        return max(1, schema.get("minimum", 1))
    if kind == "boolean":
        return False
    if kind == "array":
        if schema.get("minItems", 0) > 0 and depth < 4:
            return [sample(schema.get("items", {}), document, depth + 1)]
        return []
    if kind == "object" or "properties" in schema:
        if depth >= 4:
            return {}
        properties = schema.get("properties", {})
        return {
            name: sample(properties.get(name, {}), document, depth + 1)
            for name in schema.get("required", [])
            if not properties.get(name, {}).get("readOnly")
        }
    return STRING_FORMATS.get(schema.get("format", ""), "hostile example")


def body_fields(schema: dict, document: dict) -> list[tuple]:
    """The writable top-level properties, and one level below them (an object's properties,
    the properties of an array's first item)."""
    schema = _resolve(schema, document)
    fields: list[tuple] = []
    for name, prop in schema.get("properties", {}).items():
        prop = _resolve(prop, document)
        if prop.get("readOnly"):
            continue
        fields.append((name,))
        inner = prop
        prefix: tuple = (name,)
        if prop.get("type") == "array":
            inner, prefix = _resolve(prop.get("items", {}), document), (name, 0)
        for sub, sub_prop in list(inner.get("properties", {}).items())[:8]:
            if not _resolve(sub_prop, document).get("readOnly"):
                fields.append((*prefix, sub))
    return fields


def openapi_operations(
    document: dict,
    *,
    surface: str,
    prefix: str,
    headers: dict[str, str],
    path_values: dict[str, dict[str, str]] | None = None,
    queries: dict[str, dict[str, str]] | None = None,
    exclude: Iterable[str] = (),
) -> list[Operation]:
    """The operations of an OpenAPI document (paths relative to `prefix`). `path_values` maps a
    path template to real values of its parameters; `queries` adds baseline query values."""
    path_values, queries, exclude = path_values or {}, queries or {}, set(exclude)
    operations = []
    for path, item in document.get("paths", {}).items():
        shared = item.get("parameters", [])
        for method in ("get", "post", "put", "patch", "delete"):
            spec = item.get(method)
            if spec is None:
                continue
            full = prefix.rstrip("/") + path
            operation_id = spec.get("operationId", "")
            if operation_id in exclude or f"{method.upper()} {full}" in exclude:
                continue
            parameters = [_resolve(p, document) for p in [*shared, *spec.get("parameters", [])]]
            names = [p["name"] for p in parameters if p.get("in") == "path"]
            names += [n for n in re.findall(r"\{(\w+)\}", path) if n not in names]
            real = path_values.get(full, {})
            operation = Operation(
                surface=surface,
                method=method,
                path=full,
                path_params={name: str(real.get(name, "1")) for name in names},
                query={p["name"]: None for p in parameters if p.get("in") == "query"},
                headers=dict(headers),
                label=operation_id or full,
            )
            operation.query.update(queries.get(full, {}))
            content = spec.get("requestBody", {}).get("content", {})
            schema = (content.get("application/json") or next(iter(content.values()), {})).get(
                "schema"
            )
            if schema is not None or method in ("post", "put", "patch"):
                schema = schema or {}
                baseline = sample(schema, document)
                operation.body = baseline if isinstance(baseline, dict) else {}
                operation.body_fields = body_fields(schema, document)
            operations.append(operation)
    return operations


# --- SCIM and MCP ----------------------------------------------------------------------------

SCIM_USER = {
    "schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"],
    "userName": "hostile@example.com",
    "displayName": "Hostile Example",
    "name": {"givenName": "Hostile", "familyName": "Example"},
    "emails": [{"value": "hostile@example.com", "primary": True}],
    "externalId": "hostile-1",
    "active": True,
    "title": "Tester",
    "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User": {
        "employeeNumber": "E-1",
        "department": "Research",
    },
}
SCIM_GROUP = {
    "schemas": ["urn:ietf:params:scim:schemas:core:2.0:Group"],
    "displayName": "Hostile Group",
    "members": [{"value": "1"}],
}
SCIM_PATCH = {
    "schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
    "Operations": [{"op": "replace", "path": "displayName", "value": "Renamed"}],
}
SCIM_SEARCH = {
    "schemas": ["urn:ietf:params:scim:api:messages:2.0:SearchRequest"],
    "filter": 'userName eq "hostile@example.com"',
    "startIndex": 1,
    "count": 10,
    "attributes": ["userName"],
    "excludedAttributes": ["emails"],
    "sortBy": "userName",
}
SCIM_LIST_QUERY = {
    "filter": None,
    "startIndex": None,
    "count": None,
    "attributes": None,
    "excludedAttributes": None,
}


def _leaf_paths(value, prefix: tuple = ()) -> list[tuple]:
    """Every key of a body, and the leaves below it."""
    paths = []
    if isinstance(value, dict):
        for key, item in value.items():
            paths.append((*prefix, key))
            if isinstance(item, (dict, list)):
                paths += _leaf_paths(item, (*prefix, key))
    elif isinstance(value, list) and value and isinstance(value[0], dict):
        paths += _leaf_paths(value[0], (*prefix, 0))
    return paths


def scim_operations(token: str, *, user_id: str, group_id: str) -> list[Operation]:
    """Every SCIM 2.0 endpoint Cadre serves (cadre/tenancy/scim/urls.py), with its bodies."""
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/scim+json"}
    root = "/scim/v2"

    def op(method, path, body=None, query=None, **params) -> Operation:
        return Operation(
            surface="scim",
            method=method,
            path=root + path,
            path_params={k: str(v) for k, v in params.items()},
            query=dict(query or {}),
            body=body,
            body_fields=_leaf_paths(body) if body is not None else [],
            headers=headers,
            label=f"{method} {path}",
        )

    return [
        op("get", "/ServiceProviderConfig"),
        op("get", "/ResourceTypes"),
        op("get", "/ResourceTypes/{name}", name="User"),
        op("get", "/Schemas"),
        op("get", "/Schemas/{urn}", urn="urn:ietf:params:scim:schemas:core:2.0:User"),
        op("post", "/.search", SCIM_SEARCH),
        op("post", "/Users/.search", SCIM_SEARCH),
        op("post", "/Groups/.search", {**SCIM_SEARCH, "filter": 'displayName eq "x"'}),
        op("get", "/Users", query=SCIM_LIST_QUERY),
        op("post", "/Users", SCIM_USER),
        op("get", "/Users/{pk}", pk=user_id),
        op("put", "/Users/{pk}", SCIM_USER, pk=user_id),
        op("patch", "/Users/{pk}", SCIM_PATCH, pk=user_id),
        op("delete", "/Users/{pk}", pk=user_id),
        op("get", "/Groups", query=SCIM_LIST_QUERY),
        op("post", "/Groups", SCIM_GROUP),
        op("get", "/Groups/{pk}", pk=group_id),
        op("put", "/Groups/{pk}", SCIM_GROUP, pk=group_id),
        op("patch", "/Groups/{pk}", SCIM_PATCH, pk=group_id),
        op("delete", "/Groups/{pk}", pk=group_id),
    ]


MCP_HEADERS = {"Accept": "application/json, text/event-stream"}
# Baseline arguments beyond the required ones: a confirmation request must not hold the
# request open waiting for a person.
MCP_ARGUMENTS = {"confirmation_request": {"wait_seconds": 0}}


def mcp_operations(tools: list[dict], key: str) -> list[Operation]:
    """One operation per MCP tool: a JSON-RPC `tools/call` with its input schema's arguments."""
    operations = []
    for tool in tools:
        schema = tool.get("inputSchema", {})
        arguments = sample(schema, schema)
        arguments.update(MCP_ARGUMENTS.get(tool["name"], {}))
        operations.append(
            Operation(
                surface="mcp",
                method="post",
                path="/mcp/",
                body={
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "tools/call",
                    "params": {"name": tool["name"], "arguments": arguments},
                },
                body_fields=body_fields(schema, schema),
                body_root=("params", "arguments"),
                headers={"Authorization": f"Bearer {key}", **MCP_HEADERS},
                label=tool["name"],
            )
        )
    return operations


def mcp_tools(client: httpx.Client, key: str) -> list[dict]:
    response = client.post(
        "/mcp/",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
        headers={"Authorization": f"Bearer {key}", **MCP_HEADERS},
    )
    response.raise_for_status()
    return response.json()["result"]["tools"]


# --- judging an answer -----------------------------------------------------------------------


# 5xx answers that are the documented answer, not a failure: (operation, status) -> why.
BY_DESIGN = {
    ("POST /scim/v2/.search", 501): "RFC 7644 §3.4.3 lets a server not offer the root search "
    "(docs/identity.md)",
    # Mem0 platform calls Cadre does not offer (docs/integrations.md, "Every MemoryClient method")
    ("POST /mem0/v1/summary/", 501): "Cadre writes no memory summaries",
    ("POST /mem0/v2/profiles/jobs/", 501): "Cadre builds no memory profiles",
    ("POST /mem0/v2/profiles/settings/", 501): "profiles cannot be enabled on Cadre",
    # Mem0 self-hosted server calls Cadre does not offer (docs/integrations.md, "/mem0/oss/")
    ("POST /mem0/oss/configure", 501): "Cadre's models are configured by its operator",
    ("POST /mem0/oss/generate-instructions", 501): "Cadre writes no extraction instructions",
    ("POST /mem0/oss/reset", 501): "no key may empty an organization's memory",
}


def server_error(example: Example, response: httpx.Response) -> str | None:
    """Why this answer is a server error, or None. For MCP a crash is also a JSON-RPC internal
    error, or a tool result that carries only the SDK's generic crash text."""
    if (example.operation.key, response.status_code) in BY_DESIGN:
        return None
    if response.status_code >= 500:
        return f"HTTP {response.status_code}"
    if example.operation.surface != "mcp" or response.status_code != 200:
        return None
    try:
        payload = response.json()
    except ValueError:
        return None
    error = payload.get("error") if isinstance(payload, dict) else None
    if isinstance(error, dict) and error.get("code") == -32603:
        return f"JSON-RPC internal error: {error.get('message', '')[:200]}"
    result = payload.get("result") if isinstance(payload, dict) else None
    if isinstance(result, dict) and result.get("isError"):
        text = " ".join(item.get("text", "") for item in result.get("content", []))
        if text.strip() == f"Error executing tool {example.operation.label}":
            return "tool crashed"
    return None


# --- the sweep -------------------------------------------------------------------------------


def _first_party_frame(chain: list[BaseException]) -> str:
    """`path:line in function` of Cadre's own code nearest to where the root error was raised."""
    for error in reversed(chain):
        frames = [
            frame
            for frame in traceback.extract_tb(error.__traceback__)
            if "site-packages" not in frame.filename and "/lib/python" not in frame.filename
        ]
        if frames:
            frame = frames[-1]
            parts = frame.filename.split("/")
            for root in ("platform", "hub", "connectors", "tests"):
                if root in parts:
                    parts = parts[parts.index(root) :]
                    break
            return f"{'/'.join(parts)}:{frame.lineno} in {frame.name}"
    # Raised inside a library only (a serializer field, the renderer): its innermost frame.
    frames = traceback.extract_tb(chain[-1].__traceback__)
    if not frames:
        return ""
    frame = frames[-1]
    return f"{frame.filename.rpartition('site-packages/')[2]}:{frame.lineno} in {frame.name}"


class TracebackCollector(logging.Handler):
    """The last line of each exception logged by the server while a request was served
    (Django's request logger, the MCP SDK's tool logger)."""

    def __init__(self) -> None:
        super().__init__(level=logging.ERROR)
        self._mutex = threading.Lock()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if not record.exc_info or record.exc_info[1] is None:
            return
        error = record.exc_info[1]
        # The root of a chain: a wrapper's text (the MCP SDK's "Error executing tool") hides it.
        chain = [error]
        for _ in range(20):
            inner = error.__cause__ or (None if error.__suppress_context__ else error.__context__)
            if inner is None:
                break
            chain.append(inner)
            error = inner
        text = "".join(traceback.format_exception_only(type(error), error)).strip()
        line = text.splitlines()[0][:300] if text else type(error).__name__
        where = _first_party_frame(chain)
        with self._mutex:
            self.lines.append(f"{line} (at {where})" if where else line)

    def take(self) -> list[str]:
        with self._mutex:
            lines, self.lines = self.lines, []
        return lines

    def __enter__(self) -> TracebackCollector:
        logging.getLogger().addHandler(self)
        # The MCP SDK logs a tool's crash at ERROR: heard even where the root level is higher.
        self._mcp_level = logging.getLogger("mcp").level
        if logging.getLogger("mcp").getEffectiveLevel() > logging.ERROR:
            logging.getLogger("mcp").setLevel(logging.ERROR)
        return self

    def __exit__(self, *exc) -> None:
        logging.getLogger().removeHandler(self)
        logging.getLogger("mcp").setLevel(self._mcp_level)


@dataclass
class Failure:
    example: Example
    status: int
    reason: str
    traceback: str

    def describe(self) -> str:
        example = self.example
        where = f"{example.location} {example.name}".strip()
        return (
            f"{example.operation.key} | {where} | {example.kind} | {self.reason} | "
            f"{self.traceback or '(no traceback logged)'}"
        )


@dataclass
class Outcome:
    operations: list[Operation]
    sent: dict[str, int] = field(default_factory=dict)  # operation key -> examples sent
    failures: list[Failure] = field(default_factory=list)
    timeouts: list[Example] = field(default_factory=list)
    statuses: dict[int, int] = field(default_factory=dict)
    kinds: dict[str, set[str]] = field(default_factory=dict)  # surface -> value kinds sent

    def failing_keys(self) -> set[str]:
        return {failure.example.operation.key for failure in self.failures}

    def by_surface(self) -> dict[str, tuple[int, int, int]]:
        """surface -> (operations, examples sent, 5xx)."""
        table: dict[str, list[int]] = {}
        for operation in self.operations:
            row = table.setdefault(operation.surface, [0, 0, 0])
            row[0] += 1
            row[1] += self.sent.get(operation.key, 0)
        for failure in self.failures:
            table[failure.example.operation.surface][2] += 1
        return {surface: tuple(row) for surface, row in table.items()}


def sweep(
    base_url: str,
    operations: list[Operation],
    per_operation: int | None,
    *,
    timeout: float = 30,
    progress=None,
) -> Outcome:
    """Send the examples one at a time and keep every server error with its traceback."""
    outcome = Outcome(operations=operations)
    with (
        TracebackCollector() as collector,
        httpx.Client(base_url=base_url, timeout=timeout) as client,
    ):
        for number, example in enumerate(examples(operations, per_operation), 1):
            method, path, headers, content = build(example)
            collector.take()
            key = example.operation.key
            outcome.sent[key] = outcome.sent.get(key, 0) + 1
            outcome.kinds.setdefault(example.operation.surface, set()).add(example.kind)
            try:
                response = client.request(method, path, headers=headers, content=content)
            except httpx.TimeoutException:
                outcome.timeouts.append(example)
                continue
            outcome.statuses[response.status_code] = (
                outcome.statuses.get(response.status_code, 0) + 1
            )
            reason = server_error(example, response)
            if reason is not None:
                lines = collector.take()
                outcome.failures.append(
                    Failure(example, response.status_code, reason, lines[-1] if lines else "")
                )
            if progress is not None:
                progress(number, example, response)
    return outcome


# --- a target: one organization's credentials and objects, every operation -------------------

# Revoking keys by guessed or real ids could revoke the sweep's own key, and every later answer
# would be 401 (the key tests cover revocation); the SCIM token likewise.
EXCLUDED = ("v1_api_keys_destroy", "v1_scim_tokens_destroy")
# Baseline query values some reads need to answer at all, or promptly (as the schema fuzz's).
QUERIES = {
    "/api/v1/runs/{id}/events/": {"timeout": "1"},
    "/api/v1/clawhub/file/": {"path": "SKILL.md"},
}


def _api_path_values(document: dict, owner) -> dict[str, dict[str, str]]:
    """Each /api/ path template -> the kwargs of a real object of the owner's organization
    (tests/api/tenant_objects.py makes it), where the route has a factory."""
    from django.urls import Resolver404, resolve

    from tests.api.test_cross_tenant import api_routes

    routes = {route.name: route for route in api_routes() if route.kwargs and route.has_factory}
    values: dict[str, dict[str, str]] = {}
    for path in document.get("paths", {}):
        if "{" not in path:
            continue
        try:
            name = resolve(re.sub(r"\{\w+\}", "1", path)).url_name
        except Resolver404:
            continue
        route = routes.get(name)
        if route is None:
            continue
        url = route.url_for(owner)
        values[path] = {key: str(value) for key, value in resolve(url).kwargs.items()}
    return values


@dataclass
class Target:
    base_url: str
    operations: list[Operation]
    api_key: str
    scim_token: str


def arrange(
    owner, base_url: str, surfaces: Iterable[str] = ("api", "mem0", "memos", "scim", "mcp")
) -> Target:
    """The owner's API key (every scope) and a SCIM token of their organization, real objects
    behind the paths, and every operation of the chosen surfaces of the live server."""
    from cadre.memory import services as memory
    from cadre.tenancy import services
    from cadre.tenancy.actors import member_actor, system_actor
    from cadre.tenancy.roles import SCOPES
    from tests.factories import DepartmentFactory, MemberFactory

    surfaces = set(surfaces)
    actor = member_actor(owner)
    _, key = services.api_key_create(actor=actor, name="hostile fuzz", scopes=sorted(SCOPES))
    _, token = services.scim_token_create(
        actor=system_actor(owner.organization), name="hostile fuzz"
    )
    bearer = {"Authorization": f"Bearer {key}"}
    operations: list[Operation] = []
    with httpx.Client(base_url=base_url, timeout=120) as client:
        if "api" in surfaces:
            document = client.get("/api/schema/?format=json", headers=bearer).json()
            operations += openapi_operations(
                document,
                surface="api",
                prefix="",
                headers=bearer,
                path_values=_api_path_values(document, owner),
                queries=QUERIES,
                exclude=EXCLUDED,
            )
        if surfaces & {"mem0", "memos"}:
            remembered = memory.memory_add(
                actor=actor,
                scope="user",
                kind="fact",
                content="The owner prefers tea",
                source_kind="user_statement",
            )
            for layer in ("mem0", "memos"):
                if layer not in surfaces:
                    continue
                document = client.get(f"/{layer}/openapi.json").json()
                real = {
                    f"/{layer}{path}": {"memory_id": str(remembered.pk)}
                    for path in document.get("paths", {})
                    if "{memory_id}" in path
                }
                operations += openapi_operations(
                    document, surface=layer, prefix=f"/{layer}", headers=bearer, path_values=real
                )
        if "scim" in surfaces:
            member = MemberFactory(organization=owner.organization, roles=["employee"])
            department = DepartmentFactory(organization=owner.organization)
            operations += scim_operations(
                token, user_id=str(member.pk), group_id=str(department.pk)
            )
        if "mcp" in surfaces:
            operations += mcp_operations(mcp_tools(client, key), key)
    return Target(base_url=base_url, operations=operations, api_key=key, scim_token=token)


def credentials_hold(target: Target) -> dict[str, int]:
    """The status of one plain read with each credential after the sweep: 200 unless a
    request revoked it (which would have turned every later answer into a 401)."""
    with httpx.Client(base_url=target.base_url, timeout=30) as client:
        return {
            "api_key": client.get(
                "/api/v1/organization/", headers={"Authorization": f"Bearer {target.api_key}"}
            ).status_code,
            "scim_token": client.get(
                "/scim/v2/ServiceProviderConfig",
                headers={"Authorization": f"Bearer {target.scim_token}"},
            ).status_code,
        }
