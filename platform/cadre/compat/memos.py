"""The MemOS cloud API (what MemOS plugins call at MEMOS_BASE_URL) on Cadre's memory services."""

from __future__ import annotations

import math

from django.db import transaction
from django.utils.translation import gettext as _
from rest_framework.response import Response
from rest_framework.views import APIView

from cadre.api.errors import exception_handler as cadre_exception_handler
from cadre.compat.mem0 import (
    Mem0View,
    Target,
    entity_text,
    flag,
    integer,
    json_body,
    memory_pk,
)
from cadre.errors import CadreError, InvalidInput, NotFound
from cadre.memory import selectors, services
from cadre.memory.models import STATEMENT_KINDS, Kind, Memory, Scope, SourceKind
from hub.recall import memos_skill_details

CLIENT = "memos"
TASK_PREFIX = "cadre-"
TOOL_KINDS = (Kind.TOOL_TRAJECTORY, Kind.EXPERIENCE)
MAX_TAGS = 32
MAX_TAG_LENGTH = 64  # Memory.tags holds strings of at most 64 characters
# get/message: at most this many conversations and messages per conversation.
MAX_CONVERSATIONS = 20
MAX_MESSAGES = 200
MAX_MESSAGES_DEFAULT = 50


def memos_exception_handler(exc, context):
    """MemOS answers {code, message, data}; Cadre's envelope rides along under `error`."""
    response = cadre_exception_handler(exc, context)
    if response is not None and isinstance(response.data, dict) and "error" in response.data:
        response.data = {
            "code": response.status_code,
            "message": response.data["error"]["message"],
            "data": None,
            "error": response.data["error"],
        }
    return response


def ok(data) -> Response:
    return Response({"code": 0, "message": "ok", "data": data})


# --- request parsing ---------------------------------------------------------------------


def _filter_entities(value) -> dict:
    """MemOS `filter` narrowed to what Cadre can honour exactly: agent_id and app_id, joined
    with `and`. Other criteria are refused rather than ignored (that would widen)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidInput(_("filter must be an object."), details={"filter": ["Object."]})
    found: dict = {}
    for key, item in value.items():
        if key == "and" and isinstance(item, list):
            for part in item:
                found.update(_filter_entities(part))
        elif key in ("agent_id", "app_id"):
            found[key] = item
        else:
            raise InvalidInput(
                _(
                    "Unsupported filter %(key)r: Cadre's MemOS API filters by agent_id and "
                    "app_id (combined with and)."
                )
                % {"key": key},
                code="unsupported_filter",
                details={"filter": [key]},
            )
    return found


def _target(actor, data: dict, *, user_required: bool = True) -> Target:
    entities = {
        "user_id": entity_text(data.get("user_id"), "user_id"),
        "agent_id": entity_text(data.get("agent_id"), "agent_id"),
        "app_id": entity_text(data.get("app_id"), "app_id"),
        "run_id": None,
    }
    for key, value in _filter_entities(data.get("filter")).items():
        entities[key] = entity_text(value, key)
    if user_required and not entities["user_id"] and not entities["agent_id"]:
        # MemOS's own client sends exactly one of the two to search and list.
        raise InvalidInput(
            _("user_id or agent_id is required."), details={"user_id": ["Required."]}
        )
    return Target(actor, entities)


def _conversation(data: dict) -> str | None:
    return entity_text(data.get("conversation_id"), "conversation_id", limit=128)


def _no_knowledgebase(data: dict, *names: str) -> None:
    """Knowledge-base fields name something Cadre does not hold: refused, never ignored (an
    ignored `knowledgebase_ids` would answer as if the bases had nothing to say)."""
    for name in names:
        if data.get(name):
            raise KnowledgebaseUnsupported(
                _("Cadre's MemOS-compatible API has no knowledge bases (%(field)s).")
                % {"field": name},
                details={name: ["Not supported."]},
            )


class KnowledgebaseUnsupported(CadreError):
    """MemOS knowledge bases (uploaded files searched with memories): Cadre keeps no document
    corpus to map them onto, so every knowledge-base call and field is refused."""

    code = "knowledgebase_unsupported"
    status = 501


# --- response shapes ---------------------------------------------------------------------


def _times(memory: Memory) -> dict:
    return {
        "create_time": memory.created_at.isoformat(),
        "update_time": memory.updated_at.isoformat(),
        "conversation_id": memory.conversation_id,
        "status": "activated",
    }


def _relativity(score) -> float:
    value = float(score) if score is not None and not math.isnan(float(score)) else 0.0
    return round(min(max(value, 0.0), 1.0), 4)


def fact_out(memory: Memory, score=None) -> dict:
    key = memory.tags[0] if memory.tags else " ".join(memory.content.split())[:40]
    detail = {
        "id": str(memory.pk),
        "memory_key": key,
        "memory_value": memory.content,
        "memory_type": "UserMemory" if memory.scope == Scope.USER else "LongTermMemory",
        "confidence": memory.confidence,
        "tags": list(memory.tags),
        "info": (memory.source_ref or {}).get("info") or {},
        **_times(memory),
    }
    if score is not None:
        detail["relativity"] = _relativity(score)
    return detail


def preference_out(memory: Memory, score=None) -> dict:
    detail = {
        "id": str(memory.pk),
        "preference": memory.content,
        "preference_type": "explicit_preference"
        if memory.source_kind in (SourceKind.USER_STATEMENT, SourceKind.IMPORT)
        else "implicit_preference",
        "reasoning": "",
        **_times(memory),
    }
    if score is not None:
        detail["relativity"] = _relativity(score)
    return detail


def tool_out(memory: Memory, score=None) -> dict:
    detail = {
        "id": str(memory.pk),
        "tool_type": "ToolTrajectoryMemory",
        "tool_value": memory.content,
        "tool_used_status": [],
        "experience": (memory.attributes or {}).get("lesson", "") or "",
        **_times(memory),
    }
    if score is not None:
        detail["relativity"] = _relativity(score)
    return detail


def _task_id(memories) -> str:
    return TASK_PREFIX + ".".join(str(memory.pk) for memory in memories)


# --- views -------------------------------------------------------------------------------


class MemosView(Mem0View):
    read_only_methods = frozenset({"GET", "HEAD", "OPTIONS"})

    def get_exception_handler(self):
        return memos_exception_handler

    def ref(self, target: Target, data: dict) -> dict:
        ref = {"client": CLIENT}
        for key in ("user_id", "app_id"):
            if target.entities[key]:
                ref[key] = target.entities[key]
        info = data.get("info")
        if info is not None:
            if not isinstance(info, dict):
                raise InvalidInput(_("info must be an object."), details={"info": ["Object."]})
            ref["info"] = info
        return ref


class AddMessage(MemosView):
    def post(self, request):
        data = json_body(request)
        target = _target(self.actor, data)
        scope, scope_id = target.write_scope()
        messages = data.get("messages")
        if not isinstance(messages, list) or not messages:
            raise InvalidInput(
                _("messages must be a non-empty list."), details={"messages": ["List."]}
            )
        tags = data.get("tags")
        if tags is not None and (
            not isinstance(tags, list)
            or len(tags) > MAX_TAGS
            or not all(isinstance(t, str) and len(t) <= MAX_TAG_LENGTH for t in tags)
        ):
            raise InvalidInput(
                _(
                    "tags must be a list of at most %(max_tags)s strings of at most "
                    "%(max_tag_length)s characters."
                )
                % {"max_tags": MAX_TAGS, "max_tag_length": MAX_TAG_LENGTH},
                details={"tags": ["List."]},
            )
        flag(data.get("async_mode"), "async_mode", True)  # Cadre's add is stored on return
        _no_knowledgebase(data, "allow_knowledgebase_ids")
        if flag(data.get("allow_public"), "allow_public", False):
            # Public memory is MemOS's; Cadre shares through scopes a reviewer governs.
            raise InvalidInput(
                _("allow_public is not supported: Cadre shares memory through its scopes."),
                code="unsupported_field",
                details={"allow_public": ["Not supported."]},
            )
        written = services.memory_add_from_messages(
            actor=self.actor,
            messages=messages,
            scope=scope,
            scope_id=scope_id,
            conversation_id=_conversation(data) or "",
            source_ref=self.ref(target, data),
            tags=tags,
            subject=target.member if scope == Scope.AGENT else None,
        )
        return ok({"success": True, "task_id": _task_id(written), "status": "completed"})


class SearchMemory(MemosView):
    read_only_methods = frozenset({"GET", "HEAD", "OPTIONS", "POST"})

    def post(self, request):
        data = json_body(request)
        query = data.get("query")
        if not isinstance(query, str) or not query.strip():
            raise InvalidInput(_("query is required."), details={"query": ["Required."]})
        _no_knowledgebase(data, "knowledgebase_ids")
        if data.get("context_format") not in (None, "memory"):
            raise InvalidInput(
                _('context_format must be "memory".'),
                code="unsupported_field",
                details={"context_format": ["memory"]},
            )
        target = _target(self.actor, data)
        facts = integer(
            data.get("memory_limit_number"), "memory_limit_number", default=6, low=1, high=25
        )
        prefs = integer(
            data.get("preference_limit_number"),
            "preference_limit_number",
            default=6,
            low=1,
            high=25,
        )
        tools = integer(
            data.get("tool_memory_limit_number"),
            "tool_memory_limit_number",
            default=6,
            low=1,
            high=25,
        )
        with_prefs = flag(data.get("include_preference"), "include_preference", True)
        with_tools = flag(data.get("include_tool_memory"), "include_tool_memory", False)
        with_skills = flag(data.get("include_skill"), "include_skill", False)
        skill_limit = integer(
            data.get("skill_limit_number"), "skill_limit_number", default=6, low=1, high=25
        )
        floor = data.get("relativity")
        if floor is not None and (
            isinstance(floor, bool) or not isinstance(floor, int | float) or not 0 <= floor <= 1
        ):
            raise InvalidInput(
                _("relativity must be between 0 and 1."), details={"relativity": ["0..1"]}
            )
        with transaction.atomic():
            result = selectors.memory_search(
                actor=self.actor,
                query=query.strip(),
                top_k=min(facts + prefs + tools, 100),
                scope_keys=target.read_scope_keys(),
                # Tool memory (trajectories, experience) only when asked for.
                kinds=[*STATEMENT_KINDS, *TOOL_KINDS] if with_tools else None,
                force=True,
            )
        answer = {
            "memory_detail_list": [],
            "preference_detail_list": [],
            "tool_memory_detail_list": [],
        }
        for hit in result.hits:
            memory = hit.memory
            if not target.matches(memory) or (floor is not None and _relativity(hit.score) < floor):
                continue
            if memory.kind == Kind.PREFERENCE:
                if with_prefs and len(answer["preference_detail_list"]) < prefs:
                    answer["preference_detail_list"].append(preference_out(memory, hit.score))
            elif memory.kind in TOOL_KINDS:
                if with_tools and len(answer["tool_memory_detail_list"]) < tools:
                    answer["tool_memory_detail_list"].append(tool_out(memory, hit.score))
            elif len(answer["memory_detail_list"]) < facts:
                answer["memory_detail_list"].append(fact_out(memory, hit.score))
        answer["preference_note"] = ""
        answer["skill_detail_list"] = (
            self._skills(query.strip(), skill_limit, floor) if with_skills else []
        )
        return ok(answer)

    def _skills(self, query: str, limit: int, floor) -> list[dict]:
        """Skills from the Hub: verified versions only."""
        base_url = self.request.build_absolute_uri("/").rstrip("/")
        found = memos_skill_details(self.actor, query, limit=limit, base_url=base_url)
        if floor is not None:
            found = [item for item in found if item.get("relativity", 0) >= floor]
        return found[:limit]


class GetMemory(MemosView):
    read_only_methods = frozenset({"GET", "HEAD", "OPTIONS", "POST"})

    def post(self, request):
        data = json_body(request)
        target = _target(self.actor, data)
        page = integer(data.get("page"), "page", default=1, low=1, high=10**6)
        size = integer(data.get("size"), "size", default=10, low=1, high=50)
        with_prefs = flag(data.get("include_preference"), "include_preference", True)
        with_tools = flag(data.get("include_tool_memory"), "include_tool_memory", True)
        rows = target.narrow(selectors.memory_list(self.actor, scope_keys=target.read_scope_keys()))
        start = (page - 1) * size
        groups = {
            "memory_detail_list": (rows.exclude(kind__in=[Kind.PREFERENCE, *TOOL_KINDS]), fact_out),
            "preference_detail_list": (
                rows.filter(kind=Kind.PREFERENCE) if with_prefs else None,
                preference_out,
            ),
            "tool_memory_detail_list": (
                rows.filter(kind__in=TOOL_KINDS) if with_tools else None,
                tool_out,
            ),
        }
        answer, total = {}, 0
        for name, (queryset, shape) in groups.items():
            if queryset is None:
                answer[name] = []
                continue
            total = max(total, queryset.count())
            answer[name] = [shape(memory) for memory in queryset[start : start + size]]
        answer.update(total=total, size=size, current=page, pages=math.ceil(total / size))
        return ok(answer)


class UpdateMemory(MemosView):
    def post(self, request):
        data = json_body(request)
        memory = selectors.memory_get(self.actor, memory_pk(data.get("memory_id")))
        # MemOS's client sends `content` (with optional `title`, `status`); its docs name
        # `memory_value`.
        value = data.get("content", data.get("memory_value", data.get("text")))
        if not isinstance(value, str) or not value.strip():
            raise InvalidInput(
                _("content (or memory_value) is required."), details={"content": ["Required."]}
            )
        for name in ("title", "status"):
            if data.get(name) not in (None, "", "activated"):
                raise InvalidInput(
                    _("Cadre's MemOS-compatible API updates a memory's text only (%(field)s).")
                    % {"field": name},
                    code="unsupported_field",
                    details={name: ["Not supported."]},
                )
        memory = services.memory_update(
            actor=self.actor,
            memory=memory,
            expected_version=memory.version,
            reason="memos update",
            content=value,
        )
        return ok({"success": True, **fact_out(memory)})


class DeleteMemory(MemosView):
    def post(self, request):
        data = json_body(request)
        if data.get("memory_type") is not None:
            raise InvalidInput(
                _("memory_type is not supported: delete by ids, user, agent or filter."),
                code="unsupported_filter",
                details={"memory_type": ["Not supported."]},
            )
        given = [key for key in ("memory_ids", "user_id", "agent_id", "filter") if data.get(key)]
        if len(given) != 1:
            raise InvalidInput(
                _("Give exactly one of memory_ids, user_id, agent_id or filter."),
                details={"memory_ids": ["Exactly one criterion."]},
            )
        if given == ["memory_ids"]:
            ids = data["memory_ids"]
            if not isinstance(ids, list) or len(ids) > 100:
                raise InvalidInput(_("memory_ids must be a list (at most 100)."))
            self._delete_ids(ids)
        else:
            target = _target(self.actor, data, user_required=False)
            rows = target.narrow(
                selectors.memory_list(self.actor, scope_keys=target.read_scope_keys())
            )
            with transaction.atomic():
                for memory in rows:
                    if selectors.can_modify(self.actor, memory):
                        services.memory_delete(actor=self.actor, memory=memory)
        return ok({"success": True})

    @transaction.atomic
    def _delete_ids(self, ids):
        # All or nothing: one id the caller may not see refuses the whole request.
        memories = [selectors.memory_get(self.actor, memory_pk(memory_id)) for memory_id in ids]
        for memory in memories:
            services.memory_delete(actor=self.actor, memory=memory)


class AddFeedback(MemosView):
    def post(self, request):
        data = json_body(request)
        target = _target(self.actor, data)
        content = data.get("feedback_content")
        if not isinstance(content, str) or not content.strip():
            raise InvalidInput(
                _("feedback_content is required."), details={"feedback_content": ["Required."]}
            )
        result = services.memory_feedback(
            actor=self.actor,
            text=content,
            scope_keys=target.read_scope_keys(),
            conversation_id=_conversation(data),
        )
        return ok(
            {
                "success": True,
                "status": "completed",
                "task_id": _task_id(result.created),
                "superseded": [str(memory.pk) for memory in result.superseded],
                "outcome": result.outcome,
                "feedback_message": result.message,
            }
        )


class GetStatus(MemosView):
    read_only_methods = frozenset({"GET", "HEAD", "OPTIONS", "POST"})

    def post(self, request):
        task_id = json_body(request).get("task_id")
        if not isinstance(task_id, str) or not task_id.startswith(TASK_PREFIX):
            raise InvalidInput(_("Unknown task_id."), details={"task_id": ["A task id from add."]})
        ids = [part for part in task_id.removeprefix(TASK_PREFIX).split(".") if part]
        if len(ids) > 100:  # one lookup each: an add writes far fewer
            raise InvalidInput(_("Unknown task_id."), details={"task_id": ["A task id from add."]})
        for memory_id in ids:
            # 404 outside one's reach, and for a part that names no memory ("²", "١٢")
            selectors.memory_get_for_deletion(self.actor, memory_pk(memory_id))
        return ok({"task_id": task_id, "status": "completed"})


class GetMemoryById(MemosView):
    """GET /get/memory/<id>: one memory within the caller's reach, in search's shape."""

    def get(self, request, memory_id):
        memory = selectors.memory_get(self.actor, memory_pk(memory_id))
        if memory.kind == Kind.PREFERENCE:
            return ok(preference_out(memory))
        if memory.kind in TOOL_KINDS:
            return ok(tool_out(memory))
        return ok(fact_out(memory))


def message_out(memory: Memory) -> dict:
    ref = memory.source_ref or {}
    role = ref.get("role") if isinstance(ref.get("role"), str) else ""
    return {
        "id": str(memory.pk),
        "role": role or "user",
        "content": memory.content,
        "memory_type": fact_out(memory)["memory_type"],
        **_times(memory),
    }


class GetMessage(MemosView):
    """POST /get/message: a conversation's history as Cadre keeps it.

    Cadre keeps no raw transcript of an outside client's conversation: what it keeps of one is
    the memories written from its messages (add/message, feedback), each carrying the
    conversation's id. They are read through the memory gate like every other memory (the
    caller's reach, others' personal memory noted as a personal read), oldest first."""

    read_only_methods = frozenset({"GET", "HEAD", "OPTIONS", "POST"})

    def post(self, request):
        data = json_body(request)
        target = _target(self.actor, data)
        conversation = _conversation(data)
        conversations = integer(
            data.get("conversation_limit_number"),
            "conversation_limit_number",
            default=1,
            low=1,
            high=MAX_CONVERSATIONS,
        )
        limit = integer(
            data.get("message_limit_number"),
            "message_limit_number",
            default=MAX_MESSAGES_DEFAULT,
            low=1,
            high=MAX_MESSAGES,
        )
        rows = target.narrow(
            selectors.memory_list(self.actor, scope_keys=target.read_scope_keys())
        ).exclude(conversation_id="")
        if conversation:
            chosen = [conversation]
        else:
            # The most recent conversations, as MemOS's conversation_limit_number counts them.
            chosen, seen = [], set()
            for name in rows.values_list("conversation_id", flat=True).iterator():
                if name not in seen:
                    seen.add(name)
                    chosen.append(name)
                    if len(chosen) == conversations:
                        break
        messages = []
        for name in chosen:
            newest = rows.filter(conversation_id=name).order_by("-created_at", "-id")[:limit]
            messages.extend(message_out(memory) for memory in reversed(list(newest)))
        return ok({"message_detail_list": messages})


class Knowledgebase(MemosView):
    """MemOS's knowledge-base calls (create/delete a base, add/get/delete its files): refused
    with 501 `knowledgebase_unsupported` after authentication; nothing is stored."""

    # A refusal needs no write access: any key that may use the API learns why.
    read_only_methods = frozenset({"GET", "HEAD", "OPTIONS", "POST"})

    def post(self, request):
        if request.content_type.startswith("application/json"):
            json_body(request)  # malformed or unstorable JSON is a 400, as everywhere
        raise KnowledgebaseUnsupported(
            _(
                "Cadre's MemOS-compatible API has no knowledge bases: Cadre keeps no document "
                "corpus to map them onto."
            )
        )


class Unknown(MemosView):
    def initial(self, request, *args, **kwargs):
        APIView.initial(self, request, *args, **kwargs)  # authenticate first
        raise NotFound(
            _("Cadre's MemOS-compatible API does not serve %(path)s.") % {"path": request.path}
        )

    def post(self, request):  # pragma: no cover - initial() always answers
        return None

    get = put = delete = post
