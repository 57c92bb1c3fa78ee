"""OpenAPI 3.1 documents of the compatible memory APIs, one per layer, hand-declared: their
shapes are Mem0's and MemOS's, not Cadre's serializers. Served at /mem0/openapi.json and
/memos/openapi.json; tests/api/test_compat_schemas.py checks every route is in its document
and that live answers match the declared schemas."""

from __future__ import annotations

from django.http import JsonResponse
from django.views import View

STR = {"type": "string"}
INT = {"type": "integer"}
NUM = {"type": "number"}
BOOL = {"type": "boolean"}
OBJ = {"type": "object"}
NULL_STR = {"type": ["string", "null"]}
ENTITY = {"type": ["string", "integer", "null"]}
AUTH = [{"token": []}]
SECURITY_SCHEMES = {
    "token": {
        "type": "apiKey",
        "in": "header",
        "name": "Authorization",
        "description": "`Token <Cadre API key>` (or `Bearer <key>`)",
    }
}


def ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


def obj(properties: dict, required: tuple = ()) -> dict:
    schema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    return schema


def json_body(schema: dict) -> dict:
    return {"required": True, "content": {"application/json": {"schema": schema}}}


def answer(schema: dict, description: str = "OK") -> dict:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def operation(summary: str, ok: dict, *, body: dict | None = None, params=None, errors=None):
    op = {"summary": summary, "security": AUTH, "responses": {"200": ok, **(errors or {})}}
    if body is not None:
        op["requestBody"] = json_body(body)
    if params:
        op["parameters"] = params
    return op


def query(name: str, schema=STR, description: str = "") -> dict:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "schema": schema,
        "description": description,
    }


MEMORY_ID = {"name": "memory_id", "in": "path", "required": True, "schema": STR}

# --- Mem0 ------------------------------------------------------------------------------------

MEM0_ERRORS = {
    str(status): answer(ref("Error"), text)
    for status, text in (
        (400, "bad input"),
        (401, "no or bad key"),
        (403, "the key lacks a scope"),
        (404, "not found (another organization's included)"),
    )
}
ENTITIES = {"user_id": ENTITY, "agent_id": ENTITY, "app_id": ENTITY, "run_id": ENTITY}
FILTERS = {
    "type": ["object", "null"],
    "description": "user_id, agent_id, app_id, run_id, alone or in an AND list",
}
MEM0_MEMORY = obj(
    {
        "id": STR,
        "memory": STR,
        "user_id": NULL_STR,
        "agent_id": NULL_STR,
        "app_id": NULL_STR,
        "run_id": NULL_STR,
        "hash": STR,
        "metadata": {"type": ["object", "null"]},
        "categories": {"type": "array", "items": STR},
        "created_at": STR,
        "updated_at": STR,
        "expiration_date": NULL_STR,
        "immutable": BOOL,
        "owner": STR,
        "score": NUM,
    },
    ("id", "memory", "created_at", "updated_at"),
)
MEM0_PAGE = obj(
    {
        "count": INT,
        "next": NULL_STR,
        "previous": NULL_STR,
        "results": {"type": "array", "items": ref("Memory")},
    },
    ("count", "results"),
)
MEM0_ADD = obj(
    {
        "messages": {"type": ["string", "object", "array"]},
        **ENTITIES,
        "filters": FILTERS,
        "metadata": {"type": ["object", "null"]},
        "infer": BOOL,
        "timestamp": NUM,
        "expiration_date": NULL_STR,
        "source": STR,
    },
    ("messages",),
)
MEM0_EVENTS = obj(
    {
        "results": {
            "type": "array",
            "items": obj(
                {"id": STR, "memory": STR, "event": {"enum": ["ADD", "NOOP"]}, "data": OBJ},
                ("id", "memory", "event"),
            ),
        }
    },
    ("results",),
)
MEM0_SEARCH = obj(
    {
        "query": STR,
        **ENTITIES,
        "filters": FILTERS,
        "top_k": {"type": "integer", "minimum": 1, "maximum": 100},
        "threshold": {"type": "number", "minimum": 0, "maximum": 1},
        "rerank": BOOL,
        "keyword_search": BOOL,
    },
    ("query",),
)
MEM0_RESULTS = obj({"results": {"type": "array", "items": ref("Memory")}}, ("results",))
MEM0_LIST = obj({**ENTITIES, "filters": FILTERS})
PAGING = [query("page", INT), query("page_size", INT, "at most 100")]
ENTITY_QUERY = [query(name) for name in ENTITIES]
MESSAGE = obj({"message": STR}, ("message",))


def _mem0_paths() -> dict:
    add = operation("Add memories", answer(MEM0_EVENTS), body=MEM0_ADD, errors=MEM0_ERRORS)
    search = operation("Search", answer(MEM0_RESULTS), body=MEM0_SEARCH, errors=MEM0_ERRORS)
    listing = operation(
        "List", answer(MEM0_PAGE), body=MEM0_LIST, params=PAGING, errors=MEM0_ERRORS
    )
    return {
        "/v1/ping/": {
            "get": operation(
                "The key's organization, project and owner",
                answer(
                    obj(
                        {
                            "status": {"const": "ok"},
                            "message": STR,
                            "org_id": STR,
                            "project_id": STR,
                            "user_email": NULL_STR,
                        },
                        ("status", "org_id", "project_id"),
                    )
                ),
                errors=MEM0_ERRORS,
            )
        },
        "/v1/memories/": {
            "post": add,
            "get": operation(
                "List", answer(MEM0_PAGE), params=ENTITY_QUERY + PAGING, errors=MEM0_ERRORS
            ),
            "delete": operation(
                "Delete all of a user, agent, app or run",
                answer(obj({"message": STR, "deleted": INT}, ("message",))),
                params=ENTITY_QUERY,
                errors=MEM0_ERRORS,
            ),
        },
        "/v3/memories/add/": {"post": add},
        "/v3/memories/": {"post": listing},
        "/v2/memories/": {"post": listing},
        "/v3/memories/search/": {"post": search},
        "/v2/memories/search/": {"post": search},
        "/v1/memories/search/": {"post": search},
        "/v1/memories/{memory_id}/": {
            "parameters": [MEMORY_ID],
            "get": operation("One memory", answer(ref("Memory")), errors=MEM0_ERRORS),
            "put": operation(
                "Update",
                answer(ref("Memory")),
                body=obj(
                    {
                        "text": STR,
                        "metadata": {"type": ["object", "null"]},
                        "timestamp": NUM,
                        "expiration_date": NULL_STR,
                    }
                ),
                errors=MEM0_ERRORS,
            ),
            "delete": operation("Delete", answer(MESSAGE), errors=MEM0_ERRORS),
        },
        "/v1/memories/{memory_id}/history/": {
            "parameters": [MEMORY_ID],
            "get": operation(
                "Versions",
                answer(
                    {
                        "type": "array",
                        "items": obj(
                            {
                                "id": STR,
                                "memory_id": STR,
                                "old_memory": NULL_STR,
                                "new_memory": NULL_STR,
                                "event": {"enum": ["ADD", "UPDATE", "DELETE"]},
                                "created_at": STR,
                            },
                            ("id", "memory_id", "event", "created_at"),
                        ),
                    }
                ),
                errors=MEM0_ERRORS,
            ),
        },
        "/v1/feedback/": {
            "post": operation(
                "Feedback on a memory",
                answer(obj({"id": STR, "feedback": NULL_STR, "feedback_reason": NULL_STR})),
                body=obj(
                    {
                        "memory_id": STR,
                        "feedback": {"enum": ["POSITIVE", "NEGATIVE", "VERY_NEGATIVE", None]},
                        "feedback_reason": NULL_STR,
                    },
                    ("memory_id",),
                ),
                errors=MEM0_ERRORS,
            )
        },
    }


MEM0_ERROR = obj(
    {
        "detail": STR,
        "error": obj({"code": STR, "message": STR, "details": {}}, ("code", "message")),
    },
    ("detail", "error"),
)

# --- MemOS -----------------------------------------------------------------------------------


def envelope(data: dict) -> dict:
    return obj({"code": {"const": 0}, "message": STR, "data": data}, ("code", "message", "data"))


MEMOS_ERROR = obj(
    {
        "code": INT,
        "message": STR,
        "data": {"type": "null"},
        "error": obj({"code": STR, "message": STR}, ("code", "message")),
    },
    ("code", "message", "data"),
)
MEMOS_ERRORS = {
    str(status): answer(ref("Error"), text)
    for status, text in (
        (400, "bad input"),
        (401, "no or bad key"),
        (403, "scope"),
        (404, "not found"),
    )
}
TIMES = {"create_time": STR, "update_time": STR, "conversation_id": STR, "status": STR}
FACT = obj(
    {
        "id": STR,
        "memory_key": STR,
        "memory_value": STR,
        "memory_type": STR,
        "relativity": NUM,
        "confidence": NUM,
        "tags": {"type": "array", "items": STR},
        "info": OBJ,
        **TIMES,
    },
    ("id", "memory_key", "memory_value", "create_time", "update_time"),
)
PREFERENCE = obj(
    {"id": STR, "preference": STR, "preference_type": STR, "relativity": NUM, **TIMES},
    ("id", "preference"),
)
TOOL = obj({"id": STR, "tool_type": STR, "tool_value": STR, "relativity": NUM, **TIMES}, ("id",))
SKILL = obj(
    {
        "id": STR,
        "skill_value": obj(
            {
                "name": STR,
                "description": STR,
                "procedure": STR,
                "experience": {"type": "array", "items": STR},
                "preference": {"type": "array", "items": STR},
                "examples": {"type": "array", "items": STR},
                "script": {"type": ["string", "null"]},
                "others": {"type": ["object", "null"]},
            },
            ("name", "description", "procedure"),
        ),
        "skill_url": STR,
        "skill_type": {"const": "SkillMemory"},
        "relativity": NUM,
        "verified": BOOL,
        **TIMES,
    },
    ("id", "skill_value", "skill_url", "skill_type"),
)
LISTS = {
    "memory_detail_list": {"type": "array", "items": ref("Fact")},
    "preference_detail_list": {"type": "array", "items": ref("Preference")},
    "tool_memory_detail_list": {"type": "array", "items": ref("ToolMemory")},
}
WHO = {"user_id": STR, "agent_id": ENTITY, "app_id": ENTITY, "conversation_id": STR}
FILTER = {"type": ["object", "null"], "description": "agent_id and app_id, joined with and"}
LIMIT = {"type": "integer", "minimum": 1, "maximum": 25}
SUCCESS = {"success": BOOL, "task_id": STR, "status": STR}


def _memos_paths() -> dict:
    def post(summary, data, body):
        return {"post": operation(summary, answer(envelope(data)), body=body, errors=MEMOS_ERRORS)}

    return {
        "/add/message": post(
            "Add a conversation",
            obj(SUCCESS, ("success",)),
            obj(
                {
                    **WHO,
                    "messages": {"type": "array", "items": OBJ},
                    "tags": {"type": "array", "items": STR},
                    "info": OBJ,
                    "async_mode": BOOL,
                },
                ("user_id", "messages"),
            ),
        ),
        "/search/memory": post(
            "Search",
            obj(
                {
                    **LISTS,
                    "skill_detail_list": {"type": "array", "items": ref("Skill")},
                    "preference_note": STR,
                },
                ("memory_detail_list", "preference_detail_list", "skill_detail_list"),
            ),
            obj(
                {
                    **WHO,
                    "query": STR,
                    "filter": FILTER,
                    "memory_limit_number": LIMIT,
                    "include_preference": BOOL,
                    "preference_limit_number": LIMIT,
                    "include_tool_memory": BOOL,
                    "tool_memory_limit_number": LIMIT,
                    "include_skill": BOOL,
                    "skill_limit_number": LIMIT,
                    "relativity": {"type": "number", "minimum": 0, "maximum": 1},
                },
                ("query", "user_id"),
            ),
        ),
        "/get/memory": post(
            "List",
            obj({**LISTS, "total": INT, "size": INT, "current": INT, "pages": INT}),
            obj(
                {
                    **WHO,
                    "page": INT,
                    "size": {"type": "integer", "minimum": 1, "maximum": 50},
                    "filter": FILTER,
                    "include_preference": BOOL,
                    "include_tool_memory": BOOL,
                },
                ("user_id",),
            ),
        ),
        "/update/memory": post(
            "Update",
            {"allOf": [ref("Fact"), obj({"success": BOOL})]},
            obj({"memory_id": STR, "memory_value": STR}, ("memory_id", "memory_value")),
        ),
        "/delete/memory": post(
            "Delete (exactly one criterion)",
            obj({"success": BOOL}, ("success",)),
            obj(
                {
                    "memory_ids": {"type": "array", "items": STR, "maxItems": 100},
                    "user_id": STR,
                    "agent_id": ENTITY,
                    "filter": FILTER,
                }
            ),
        ),
        "/add/feedback": post(
            "A natural-language correction",
            obj({**SUCCESS, "superseded": {"type": "array", "items": STR}}, ("success",)),
            obj({**WHO, "feedback_content": STR}, ("user_id", "feedback_content")),
        ),
        "/get/status": post(
            "A task's status",
            obj({"status": STR}, ("status",)),
            obj({"task_id": STR}, ("task_id",)),
        ),
    }


def document(layer: str) -> dict:
    if layer == "mem0":
        info = ("Cadre — Mem0-compatible memory API", "What mem0ai's MemoryClient calls.")
        paths, schemas = _mem0_paths(), {"Memory": MEM0_MEMORY, "Error": MEM0_ERROR}
    else:
        info = ("Cadre — MemOS-compatible memory API", "The MemOS cloud API MemOS plugins call.")
        paths = _memos_paths()
        schemas = {
            "Fact": FACT,
            "Preference": PREFERENCE,
            "ToolMemory": TOOL,
            "Skill": SKILL,
            "Error": MEMOS_ERROR,
        }
    return {
        "openapi": "3.1.0",
        "info": {"title": info[0], "version": "1", "description": info[1]},
        "servers": [{"url": f"/{layer}"}],
        "paths": paths,
        "components": {"schemas": schemas, "securitySchemes": SECURITY_SCHEMES},
    }


class SchemaView(View):
    """The layer's OpenAPI document, public like /api/schema/'s shape (no data in it)."""

    layer = "mem0"

    def get(self, request):
        return JsonResponse(document(self.layer), json_dumps_params={"indent": 1})
