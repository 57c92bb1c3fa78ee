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
    },
    "x_api_key": {
        "type": "apiKey",
        "in": "header",
        "name": "X-API-Key",
        "description": "A Cadre API key, as Mem0's self-hosted server takes it (/oss/ routes)",
    },
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


def error_answers(forbidden: str, not_found: str) -> dict:
    """A layer's 400, 401, 403 and 404, each its Error schema."""
    return {
        str(status): answer(ref("Error"), text)
        for status, text in (
            (400, "bad input"),
            (401, "no or bad key"),
            (403, forbidden),
            (404, not_found),
        )
    }


# --- Mem0 ------------------------------------------------------------------------------------

# The fields of one version in a memory's history, as both Mem0 APIs answer it.
VERSION = {"id": STR, "memory_id": STR, "old_memory": NULL_STR, "new_memory": NULL_STR}
MEM0_ERRORS = error_answers("the key lacks a scope", "not found (another organization's included)")
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
                                **VERSION,
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


NOT_SUPPORTED = {"501": answer(ref("Error"), "not offered by Cadre (`not_supported`)")}
# The errors of a call Cadre may refuse: Mem0's and 501.
REFUSAL_ERRORS = {**MEM0_ERRORS, **NOT_SUPPORTED}
REFUSED = answer(ref("Error"), "never: the call is refused (501)")


def refusal(summary: str, *, body: dict | None = None, params=None) -> dict:
    """A Mem0 call Cadre refuses: 501 `not_supported`, or 404 for what cannot exist here."""
    return operation(summary, REFUSED, body=body, params=params, errors=REFUSAL_ERRORS)


MEM0_ENTITY = obj(
    {
        "id": STR,
        "name": STR,
        "type": {"enum": ["user", "agent", "app", "run"]},
        "total_memories": INT,
        "created_at": NULL_STR,
        "updated_at": NULL_STR,
        "owner": STR,
        "organization": STR,
        "metadata": {"type": ["object", "null"]},
    },
    ("id", "name", "type", "total_memories"),
)
BATCH_ITEM = obj(
    {"memory_id": STR, "text": STR, "metadata": {"type": ["object", "null"]}}, ("memory_id",)
)
BATCH = obj(
    {"memories": {"type": "array", "items": BATCH_ITEM, "minItems": 1, "maxItems": 1000}},
    ("memories",),
)
PROFILE_SETTINGS = obj(
    {"enabled": BOOL, "capabilities": OBJ, "entities": OBJ}, ("enabled", "entities")
)
PROJECT = obj(
    {
        "id": STR,
        "name": STR,
        "description": STR,
        "org_id": STR,
        "created_at": NULL_STR,
        "custom_instructions": NULL_STR,
        "custom_categories": {"type": "array", "items": STR},
        "agent_custom_instructions": NULL_STR,
        "multilingual": BOOL,
    }
)


def path_param(name: str) -> dict:
    return {"name": name, "in": "path", "required": True, "schema": STR}


def _mem0_platform_paths() -> dict:
    """Entities, batches, exports, summary, profiles, projects and webhooks (mem0_platform)."""
    project = [path_param("org_id"), path_param("project_id")]
    return {
        "/v1/entities/": {
            "get": operation(
                "users(): the key's users, agents, apps and runs",
                answer(
                    obj(
                        {
                            "count": INT,
                            "next": NULL_STR,
                            "previous": NULL_STR,
                            "results": {"type": "array", "items": MEM0_ENTITY},
                        },
                        ("count", "results"),
                    )
                ),
                errors=MEM0_ERRORS,
            )
        },
        "/v2/entities/{entity_type}/{entity_id}/": {
            "parameters": [path_param("entity_type"), path_param("entity_id")],
            "delete": operation(
                "delete_users(): the entity's memories",
                answer(obj({"message": STR, "deleted": INT}, ("message",))),
                errors=MEM0_ERRORS,
            ),
        },
        "/v2/entities/user/{entity_id}/profile/": {
            "parameters": [path_param("entity_id")],
            "get": operation(
                "get_profile(): profiles are not enabled",
                answer(
                    obj(
                        {
                            "profile": {"type": "null"},
                            "status": {"const": "not_enabled"},
                            "entity_type": STR,
                            "entity_id": STR,
                            "updated_at": {"type": "null"},
                            "generation_count": INT,
                        },
                        ("status", "entity_type", "entity_id"),
                    )
                ),
                errors=MEM0_ERRORS,
            ),
        },
        "/v2/profiles/settings/": {
            "get": operation("Profile settings", answer(PROFILE_SETTINGS), errors=MEM0_ERRORS),
            "post": operation(
                "Profile settings: only leaving profiles off is accepted",
                answer(PROFILE_SETTINGS),
                body=obj({"enabled": BOOL, "entities": OBJ}),
                errors=REFUSAL_ERRORS,
            ),
        },
        "/v2/profiles/jobs/": {
            "post": refusal(
                "generate_profile(), sample_profiles(): refused",
                body=obj(
                    {
                        "operation": {"enum": ["trigger", "sample"]},
                        "entity_type": STR,
                        "entity_id": STR,
                        "limit": INT,
                    },
                    ("operation",),
                ),
            )
        },
        "/v2/profiles/jobs/{job_id}/": {
            "parameters": [path_param("job_id")],
            "get": refusal("get_profile_job(): no job exists (404)"),
        },
        "/v1/batch/": {
            "put": operation(
                "batch_update(): all or nothing",
                answer(MESSAGE),
                body=BATCH,
                errors=MEM0_ERRORS,
            ),
            "delete": operation(
                "batch_delete(): all or nothing",
                answer(MESSAGE),
                body=BATCH,
                errors=MEM0_ERRORS,
            ),
        },
        "/v1/exports/": {
            "post": operation(
                "create_memory_export()",
                answer(
                    obj(
                        {"message": STR, "id": STR, "status": STR, "count": INT},
                        ("id", "status"),
                    )
                ),
                body=obj(
                    {"schema": {"type": ["string", "object"]}, **ENTITIES, "filters": FILTERS},
                    ("schema",),
                ),
                errors=MEM0_ERRORS,
            )
        },
        "/v1/exports/get/": {
            "post": operation(
                "get_memory_export()",
                answer(
                    obj(
                        {
                            "id": NULL_STR,
                            "status": STR,
                            "count": INT,
                            "memories": {"type": "array", "items": ref("Memory")},
                        },
                        ("status", "count", "memories"),
                    )
                ),
                body=obj({"memory_export_id": STR, **ENTITIES, "filters": FILTERS}),
                errors=MEM0_ERRORS,
            )
        },
        "/v1/summary/": {"post": refusal("get_summary(): refused", body=obj({"filters": FILTERS}))},
        "/api/v1/orgs/organizations/{org_id}/projects/": {
            "parameters": [path_param("org_id")],
            "post": refusal(
                "project.create(): refused", body=obj({"name": STR, "description": STR})
            ),
        },
        "/api/v1/orgs/organizations/{org_id}/projects/{project_id}/": {
            "parameters": project,
            "get": operation(
                "get_project(), project.get(): the key as a project",
                answer(PROJECT),
                params=[query("fields", STR, "repeated: the fields to answer")],
                errors=MEM0_ERRORS,
            ),
            "patch": refusal(
                "update_project(), project.update(): refused",
                body=obj({"custom_instructions": STR, "custom_categories": {"type": "array"}}),
            ),
            "delete": refusal("project.delete(): refused"),
        },
        "/api/v1/orgs/organizations/{org_id}/projects/{project_id}/members/": {
            "parameters": project,
            "get": operation(
                "project.get_members(): the key's creator",
                answer(obj({"members": {"type": "array", "items": OBJ}}, ("members",))),
                errors=MEM0_ERRORS,
            ),
            "post": refusal("project.add_member(): refused", body=obj({"email": STR, "role": STR})),
            "put": refusal(
                "project.update_member(): refused", body=obj({"email": STR, "role": STR})
            ),
            "delete": refusal("project.remove_member(): refused", params=[query("email")]),
        },
        "/api/v1/webhooks/projects/{project_id}/": {
            "parameters": [path_param("project_id")],
            "get": operation(
                "get_webhooks(): none",
                answer({"type": "array", "maxItems": 0}),
                errors=MEM0_ERRORS,
            ),
            "post": refusal(
                "create_webhook(): refused",
                body=obj({"url": STR, "name": STR, "event_types": {"type": "array"}}),
            ),
        },
        "/api/v1/webhooks/{webhook_id}/": {
            "parameters": [path_param("webhook_id")],
            "put": refusal(
                "update_webhook(): no webhook exists (404)", body=obj({"url": STR, "name": STR})
            ),
            "delete": refusal("delete_webhook(): no webhook exists (404)"),
        },
    }


# --- Mem0's self-hosted server contract (/mem0/oss/, cadre.compat.mem0_oss) ---------------

OSS_AUTH = [{"x_api_key": []}, {"token": []}]
OSS_LABELS = {"user_id": ENTITY, "agent_id": ENTITY, "run_id": ENTITY}
OSS_MEMORY = obj(
    {
        "id": STR,
        "memory": STR,
        "hash": STR,
        "user_id": STR,
        "agent_id": STR,
        "run_id": STR,
        "metadata": OBJ,
        "expiration_date": STR,
        "created_at": STR,
        "updated_at": STR,
        "score": NUM,
    },
    ("id", "memory", "created_at", "updated_at"),
)
OSS_RESULTS = obj({"results": {"type": "array", "items": OSS_MEMORY}}, ("results",))
OSS_ADD = obj(
    {
        "messages": {
            "type": "array",
            "items": obj({"role": STR, "content": STR}, ("role", "content")),
        },
        **OSS_LABELS,
        "metadata": {"type": ["object", "null"]},
        "infer": BOOL,
        "expiration_date": NULL_STR,
    },
    ("messages",),
)
OSS_EVENTS = obj(
    {
        "results": {
            "type": "array",
            "items": obj(
                {"id": STR, "memory": STR, "event": {"enum": ["ADD", "NONE"]}},
                ("id", "memory", "event"),
            ),
        }
    },
    ("results",),
)
OSS_SEARCH = obj(
    {
        "query": STR,
        **OSS_LABELS,
        "filters": {"type": ["object", "null"], "description": "user_id, agent_id, run_id"},
        "top_k": {"type": "integer", "minimum": 1, "maximum": 100},
        "threshold": {"type": "number", "minimum": 0, "maximum": 1},
        "explain": BOOL,
        "show_expired": {"const": False},
    },
    ("query",),
)
OSS_HISTORY = {
    "type": "array",
    "items": obj(
        {
            **VERSION,
            "event": STR,
            "created_at": STR,
            "updated_at": STR,
            "is_deleted": BOOL,
            "actor_id": NULL_STR,
            "role": NULL_STR,
        },
        ("id", "memory_id", "event"),
    ),
}


def _oss(op: dict) -> dict:
    op["security"] = OSS_AUTH
    return op


def _mem0_oss_paths() -> dict:
    """Mem0's self-hosted server (server/main.py): labels within the key owner's memory."""
    labels = [query(name) for name in OSS_LABELS]
    message = answer(MESSAGE)
    return {
        "/oss/memories": {
            "post": _oss(
                operation("Add memories", answer(OSS_EVENTS), body=OSS_ADD, errors=MEM0_ERRORS)
            ),
            "get": _oss(
                operation(
                    "The key owner's memories carrying the labels",
                    answer(OSS_RESULTS),
                    params=[*labels, query("top_k", INT, "0 to 1000")],
                    errors=MEM0_ERRORS,
                )
            ),
            "delete": _oss(
                operation(
                    "Delete the memories carrying the labels (one label at least)",
                    message,
                    params=labels,
                    errors=MEM0_ERRORS,
                )
            ),
        },
        "/oss/memories/{memory_id}": {
            "parameters": [MEMORY_ID],
            "get": _oss(operation("One memory", answer(OSS_MEMORY), errors=MEM0_ERRORS)),
            "put": _oss(
                operation(
                    "Update a memory",
                    message,
                    body=obj(
                        {
                            "text": STR,
                            "metadata": {"type": ["object", "null"]},
                            "expiration_date": NULL_STR,
                        }
                    ),
                    errors=MEM0_ERRORS,
                )
            ),
            "delete": _oss(operation("Delete a memory", message, errors=MEM0_ERRORS)),
        },
        "/oss/memories/{memory_id}/history": {
            "parameters": [MEMORY_ID],
            "get": _oss(operation("A memory's history", answer(OSS_HISTORY), errors=MEM0_ERRORS)),
        },
        "/oss/search": {
            "post": _oss(
                operation("Search", answer(OSS_RESULTS), body=OSS_SEARCH, errors=MEM0_ERRORS)
            )
        },
        "/oss/configure": {
            "get": _oss(refusal("Refused: server configuration")),
            "post": _oss(refusal("Refused: server configuration")),
        },
        "/oss/configure/providers": {"get": _oss(refusal("Refused: server configuration"))},
        "/oss/generate-instructions": {"post": _oss(refusal("Refused: instruction generation"))},
        "/oss/reset": {"post": _oss(refusal("Refused: reset"))},
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
MEMOS_ERRORS = error_answers("scope", "not found")
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
MEMOS_MESSAGE = obj(
    {"id": STR, "role": STR, "content": STR, "memory_type": STR, **TIMES},
    ("id", "role", "content", "conversation_id", "create_time"),
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
# user_id or agent_id names whose memory (MemOS's client sends one of them).
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
                ("messages",),
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
                ("query",),
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
            obj(
                {"memory_id": STR, "content": STR, "memory_value": STR},
                ("memory_id",),
            ),
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
            obj({"task_id": STR, "status": STR}, ("task_id", "status")),
            obj({"task_id": STR}, ("task_id",)),
        ),
        "/get/memory/{memory_id}": {
            "get": operation(
                "One memory (a fact, preference or tool memory)",
                answer(envelope({"anyOf": [ref("Fact"), ref("Preference"), ref("ToolMemory")]})),
                params=[
                    {"name": "memory_id", "in": "path", "required": True, "schema": STR},
                ],
                errors=MEMOS_ERRORS,
            )
        },
        "/get/message": post(
            "A conversation's history: the memories kept from it, oldest first",
            obj(
                {"message_detail_list": {"type": "array", "items": ref("Message")}},
                ("message_detail_list",),
            ),
            obj(
                {
                    **WHO,
                    "conversation_limit_number": {"type": "integer", "minimum": 1, "maximum": 20},
                    "message_limit_number": {"type": "integer", "minimum": 1, "maximum": 200},
                },
                ("user_id",),
            ),
        ),
        **{
            path: {
                "post": operation(
                    "Knowledge bases: not supported (501 knowledgebase_unsupported)",
                    answer(envelope(OBJ)),
                    body=OBJ,
                    errors={
                        **MEMOS_ERRORS,
                        "501": answer(ref("Error"), "no knowledge bases in Cadre"),
                    },
                )
            }
            for path in (
                "/create/knowledgebase",
                "/delete/knowledgebase",
                "/add/knowledgebase-file",
                "/get/knowledgebase-file",
                "/delete/knowledgebase-file",
            )
        },
    }


def document(layer: str) -> dict:
    if layer == "mem0":
        info = ("Cadre — Mem0-compatible memory API", "What mem0ai's MemoryClient calls.")
        paths = {**_mem0_paths(), **_mem0_platform_paths(), **_mem0_oss_paths()}
        schemas = {"Memory": MEM0_MEMORY, "Error": MEM0_ERROR}
    else:
        info = ("Cadre — MemOS-compatible memory API", "The MemOS cloud API MemOS plugins call.")
        paths = _memos_paths()
        schemas = {
            "Fact": FACT,
            "Preference": PREFERENCE,
            "ToolMemory": TOOL,
            "Skill": SKILL,
            "Message": MEMOS_MESSAGE,
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
