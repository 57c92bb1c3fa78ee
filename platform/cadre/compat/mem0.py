"""The Mem0 platform API (what mem0ai's MemoryClient calls) on Cadre's memory services."""

from __future__ import annotations

import json
import math
from datetime import UTC, date, datetime, timedelta

from django.db import transaction
from django.utils.translation import gettext as _
from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import APIView

from cadre.api.errors import exception_handler as cadre_exception_handler
from cadre.api.parsers import BoundedJSONParser, text_problem_in
from cadre.api.permissions import IsOrganizationActor
from cadre.errors import InvalidInput, NotFound
from cadre.identifiers import parse_pk
from cadre.memory import selectors, services
from cadre.memory.models import Kind, Memory, Scope, SourceKind, scope_key
from cadre.memory.services.common import MAX_ATTRIBUTES_BYTES, require_modify
from cadre.tenancy.authentication import ApiKeyAuthentication
from cadre.tenancy.models import IMIdentity, Member

CLIENT = "mem0"
ENTITIES = ("user_id", "agent_id", "app_id", "run_id")
MAX_PAGE_SIZE = 100
FEEDBACK_VALUES = ("POSITIVE", "NEGATIVE", "VERY_NEGATIVE")


class TokenKeyAuthentication(ApiKeyAuthentication):
    """Cadre API keys sent as Mem0 sends them: `Authorization: Token <key>`."""

    keyword = "Token"


def mem0_exception_handler(exc, context):
    """Cadre's envelope plus Mem0's `detail`, which the client reads for its error message."""
    response = cadre_exception_handler(exc, context)
    if response is not None and isinstance(response.data, dict) and "error" in response.data:
        response.data["detail"] = response.data["error"]["message"]
    return response


# --- request parsing ---------------------------------------------------------------------


def json_body(request) -> dict:
    """The request's JSON object, refused (400) unless every string in it can be stored: JSON
    allows a lone "\\ud800" escape and "\\u0000", which are not text PostgreSQL, a model or an
    index takes (a NUL in a memory or its metadata was a 500 when it reached the database)."""
    if not isinstance(request.data, dict):
        raise InvalidInput(_("The body must be a JSON object."))
    problem = unstorable_text(request.data)
    if problem:
        raise InvalidInput(problem, code="invalid_text")
    return request.data


def _text_problem(text: str) -> str | None:
    return _problem_message(text_problem_in(text))


def unstorable_text(value) -> str | None:
    """Why some string (key or value) in parsed JSON cannot be stored, or None."""
    return _problem_message(text_problem_in(value))


def _problem_message(problem: str | None) -> str | None:
    if problem == "nul":
        return _("The body holds a NUL character (\\u0000), which cannot be stored.")
    if problem == "surrogate":
        return _("The body holds a string that is not valid Unicode.")
    return None


def entity_text(value, name: str, *, limit: int = 191) -> str | None:
    if value is None or value == "" or value == "*":
        return None
    if not isinstance(value, str | int) or isinstance(value, bool) or len(str(value)) > limit:
        raise InvalidInput(
            _("%(name)s must be a string.") % {"name": name}, details={name: ["String."]}
        )
    text = str(value)
    if _text_problem(text):  # query strings reach here without json_body's check
        raise InvalidInput(
            _("%(name)s holds a character that cannot be stored.") % {"name": name},
            code="invalid_text",
            details={name: ["Text."]},
        )
    return text.strip() or None


def memory_pk(value) -> int:
    """The memory a client's id names (URL segment or JSON value), else 404: "²", "١٢",
    12.5, 1e309 and ids past bigint name no memory (int() read some of them as another id)."""
    pk = parse_pk(value)
    if pk is None:
        raise NotFound(_("Memory not found."))
    return pk


def _filter_entities(filters) -> dict:
    """Entity ids from Mem0's `filters` ({"user_id": …} or {"AND": [{…}, …]}). Any other
    criterion is refused: ignoring it would answer more than the client asked for."""
    if filters is None:
        return {}
    if not isinstance(filters, dict):
        raise InvalidInput(_("filters must be an object."), details={"filters": ["Object."]})
    found: dict = {}
    for key, value in filters.items():
        if key == "AND" and isinstance(value, list):
            for part in value:
                found.update(_filter_entities(part))
        elif key in ENTITIES:
            found[key] = value
        else:
            raise InvalidInput(
                _(
                    "Unsupported filter %(key)r: Cadre's Mem0 API filters by user_id, "
                    "agent_id, app_id and run_id (combined with AND)."
                )
                % {"key": key},
                code="unsupported_filter",
                details={"filters": [key]},
            )
    return found


def request_entities(source) -> dict:
    merged = {key: source.get(key) for key in ENTITIES if source.get(key) not in (None, "")}
    merged.update(_filter_entities(source.get("filters")))
    return {key: entity_text(merged.get(key), key) for key in ENTITIES}


def member_for(actor, user_id: str) -> Member:
    """The member a client's `user_id` names: e-mail, IM user id, employee number or id."""
    members = Member.objects.filter(organization=actor.organization)
    member = (
        members.filter(email__iexact=user_id).first()
        or members.filter(employee_no=user_id).first()
        or members.filter(
            pk__in=IMIdentity.objects.filter(
                organization=actor.organization, platform_user_id=user_id
            ).values("member_id")[:1]
        ).first()
        # ASCII digits only: "²".isdigit() is true and int("²") raised (a 500); "١٢" read as 12.
        or (members.filter(pk=pk).first() if (pk := parse_pk(user_id)) is not None else None)
    )
    if member is None:
        raise InvalidInput(
            _(
                "Unknown user_id %(user_id)r: no member of this organization has this "
                "e-mail, IM user id, employee number or id."
            )
            % {"user_id": user_id},
            code="unknown_user",
            details={"user_id": [user_id]},
        )
    return member


class Target:
    """Where a request's entities point: the scope to write, the scopes to read."""

    def __init__(self, actor, entities: dict):
        self.entities = entities
        self.member = member_for(actor, entities["user_id"]) if entities["user_id"] else None
        self.agent_id = None
        if entities["agent_id"]:
            self.agent_id = parse_pk(entities["agent_id"])
            if self.agent_id is None:
                raise InvalidInput(
                    _("agent_id must be a Cadre agent id (an integer)."),
                    details={"agent_id": ["Integer."]},
                )

    def write_scope(self) -> tuple[str, int]:
        if self.agent_id is not None:
            return Scope.AGENT, self.agent_id
        if self.member is not None:
            return Scope.USER, self.member.pk
        raise InvalidInput(
            _("Give user_id or agent_id: every memory belongs to someone."),
            details={"user_id": ["Required."]},
        )

    def read_scope_keys(self) -> list[str] | None:
        if self.agent_id is not None:
            return [scope_key(Scope.AGENT, self.agent_id)]
        if self.member is not None:
            return [scope_key(Scope.USER, self.member.pk)]
        return None

    def matches(self, memory: Memory) -> bool:
        ref = memory.source_ref or {}
        app_id = self.entities["app_id"]
        if self.agent_id is not None and self.member is not None:
            return memory.subject_id == self.member.pk and (
                not app_id or ref.get("app_id") == app_id
            )
        return not app_id or ref.get("app_id") == app_id

    def narrow(self, queryset):
        if self.agent_id is not None and self.member is not None:
            queryset = queryset.filter(subject_id=self.member.pk)
        if self.entities["app_id"]:
            queryset = queryset.filter(source_ref__app_id=self.entities["app_id"])
        return queryset


def _timestamp(value) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInput(_("timestamp must be a Unix time."), details={"timestamp": ["Number."]})
    try:
        return datetime.fromtimestamp(value, UTC)
    except (OverflowError, OSError, ValueError):
        raise InvalidInput(
            _("timestamp is out of range."), details={"timestamp": ["Range."]}
        ) from None


def expiration(value) -> datetime | None:
    """A Mem0 `expiration_date` (an ISO date) as the end of that day (UTC), None when absent:
    the memory is kept through that day."""
    if value is None:
        return None
    try:
        day = date.fromisoformat(str(value))
    except ValueError:
        raise InvalidInput(
            _("expiration_date must be YYYY-MM-DD."), details={"expiration_date": ["YYYY-MM-DD."]}
        ) from None
    try:
        return datetime(day.year, day.month, day.day, tzinfo=UTC) + timedelta(days=1)
    except OverflowError:  # 9999-12-31: kept for ever
        return datetime.max.replace(tzinfo=UTC)


# Stored as the attributes {"metadata": …} when infer is false: room for that wrapper.
MAX_METADATA_BYTES = MAX_ATTRIBUTES_BYTES - 64


def metadata_object(value) -> dict | None:
    """A Mem0 `metadata` object; at most what a memory's attributes may hold (it is kept with
    the memory, in its attributes or its provenance)."""
    if value is not None and not isinstance(value, dict):
        raise InvalidInput(_("metadata must be an object."), details={"metadata": ["Object."]})
    if value and len(json.dumps(value, default=str)) > MAX_METADATA_BYTES:
        raise InvalidInput(_("metadata is too large."), details={"metadata": ["Too large."]})
    return value


def _messages(value) -> list[dict]:
    if isinstance(value, str):
        value = [{"role": "user", "content": value}]
    elif isinstance(value, dict):
        value = [value]
    if not isinstance(value, list) or not value:
        raise InvalidInput(
            _("messages must be a non-empty list of {role, content}."),
            details={"messages": ["Required."]},
        )
    return value


def query_text(value) -> str:
    """A search's `query`, stripped; refused unless a non-empty string."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(_("query must be a non-empty string."), details={"query": ["Required."]})
    return value.strip()


def score_threshold(value) -> float | None:
    """A search's `threshold`: a number from 0 to 1, or None for every hit."""
    if value is not None and (
        isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1
    ):
        raise InvalidInput(_("threshold must be between 0 and 1."), details={"threshold": ["0..1"]})
    return value


def flag(value, name: str, default: bool) -> bool:
    if value is None:
        return default
    if not isinstance(value, bool):
        raise InvalidInput(
            _("%(name)s must be true or false.") % {"name": name}, details={name: ["Boolean."]}
        )
    return value


def integer(value, name: str, *, default: int, low: int, high: int) -> int:
    """A whole number from JSON or a query string, within [low, high]. 1e309 (inf), 2.5,
    "²" and booleans are refused, not truncated or passed to int() (inf was a 500)."""
    if value is None or value == "":
        return default
    number = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, float) and math.isfinite(value) and value.is_integer():
        number = int(value)
    elif isinstance(value, str):
        text = value.strip()
        digits = text[1:] if text[:1] == "-" else text
        if 0 < len(digits) <= 19 and digits.isascii() and digits.isdigit():
            number = int(text)
    if number is None:
        raise InvalidInput(
            _("%(name)s must be an integer.") % {"name": name}, details={name: ["Integer."]}
        )
    if not low <= number <= high:
        raise InvalidInput(
            _("%(name)s must be between %(low)s and %(high)s.")
            % {"name": name, "low": low, "high": high},
            details={name: ["Range."]},
        )
    return number


@transaction.atomic
def delete_each(actor, rows) -> int:
    """Delete each memory of `rows` the actor may change through memory_delete (an audit event
    each), in one transaction. A memory deleted with a later one (its predecessor, which
    memory_delete takes along) is not deleted twice: that was a 409 half-way through."""
    done: set[int] = set()
    deleted = 0
    for memory in list(rows):
        if memory.pk in done or not selectors.can_modify(actor, memory):
            continue
        memory = services.memory_delete(actor=actor, memory=memory)
        done.add(memory.pk)
        done.update(memory.deletion.get("predecessors", []))
        deleted += 1
    return deleted


# --- response shapes ---------------------------------------------------------------------


def memory_out(memory: Memory) -> dict:
    ref = memory.source_ref or {}
    attributes = memory.attributes or {}
    return {
        "id": str(memory.pk),
        "memory": memory.content,
        "user_id": ref.get("user_id") or (memory.subject.email if memory.subject_id else None),
        "agent_id": str(memory.scope_id) if memory.scope == Scope.AGENT else None,
        "app_id": ref.get("app_id"),
        "run_id": memory.conversation_id or None,
        "hash": memory.content_hash,
        "metadata": attributes.get("metadata", ref.get("metadata")),
        "categories": [memory.kind],
        "created_at": memory.created_at.isoformat(),
        "updated_at": memory.updated_at.isoformat(),
        "expiration_date": memory.expires_at.date().isoformat() if memory.expires_at else None,
        "immutable": False,
        "owner": memory.scope_key,
    }


def _event(memory: Memory) -> dict:
    event = "NOOP" if getattr(memory, "dedup_decision", "") == "exact_duplicate" else "ADD"
    return {
        "id": str(memory.pk),
        "memory": memory.content,
        "event": event,
        "data": {"memory": memory.content},
    }


HISTORY_EVENTS = {
    "addition": "ADD",
    "correction": "UPDATE",
    "merge": "UPDATE",
    "state_change": "UPDATE",
    "deletion": "DELETE",
}


# --- views -------------------------------------------------------------------------------


class Mem0View(APIView):
    """Cadre key auth (Token or Bearer), memory scopes of the key enforced, Mem0 errors."""

    authentication_classes = [TokenKeyAuthentication, ApiKeyAuthentication]
    permission_classes = [IsOrganizationActor]
    parser_classes = [BoundedJSONParser]  # JSON only, its nesting bounded (400, not a 500)
    read_only_methods = frozenset({"GET", "HEAD", "OPTIONS"})
    schema = None  # a compatibility layer: its shape is Mem0's, documented in integrations.md

    def get_exception_handler(self):
        return mem0_exception_handler

    @property
    def actor(self):
        return self.request.actor

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        if not selectors.can_read_memory(self.actor):
            raise exceptions.PermissionDenied(_("This API key needs the 'memory:read' scope."))
        if request.method not in self.read_only_methods and not selectors.can_write_memory(
            self.actor
        ):
            raise exceptions.PermissionDenied(_("This API key needs the 'memory:write' scope."))

    def ranked(self, query: str, threshold: float | None, **search) -> list[tuple[Memory, float]]:
        """memory_search as Mem0's clients ask for it (answered now: `force`), each hit at or
        above `threshold` with its score rounded as Mem0 gives it."""
        with transaction.atomic():
            result = selectors.memory_search(actor=self.actor, query=query, force=True, **search)
        return [
            (hit.memory, round(float(hit.score), 4))
            for hit in result.hits
            if threshold is None or hit.score >= threshold
        ]

    def source_ref(self, entities: dict, metadata: dict | None) -> dict:
        ref = {"client": CLIENT}
        stack = self.request.headers.get("X-Mem0-Client", "").replace("\x00", "")
        if stack:
            ref["client_stack"] = stack[:200]
        # The integration that sent it, as Mem0 clients name it (OpenClaw's plugin: OPENCLAW).
        source = self.request.data.get("source") if isinstance(self.request.data, dict) else None
        if isinstance(source, str) and source.strip():
            ref["source"] = source.strip()[:64]
        for key in ("user_id", "app_id"):
            if entities[key]:
                ref[key] = entities[key]
        if metadata:
            ref["metadata"] = metadata
        return ref


class Ping(Mem0View):
    def get(self, request):
        key = self.actor.api_key
        member = self.actor.member
        return Response(
            {
                "status": "ok",
                "message": "Cadre memory (Mem0-compatible API)",
                "org_id": str(self.actor.organization.slug or self.actor.organization.pk),
                "project_id": f"key-{key.prefix}" if key is not None else "console",
                "user_email": getattr(member, "email", None) or None,
            }
        )


def _page(request, queryset, target: Target, body=None) -> Response:
    """One page of the list. Paging comes from the query string (what `mem0ai` sends) or,
    failing that, from the body; a bad value in either is refused, never ignored."""
    body = body or {}
    params = {
        name: request.query_params.get(name, body.get(name)) for name in ("page", "page_size")
    }
    page = integer(params["page"], "page", default=1, low=1, high=10**6)
    size = integer(
        params["page_size"],
        "page_size",
        default=MAX_PAGE_SIZE,
        low=1,
        high=MAX_PAGE_SIZE,
    )
    queryset = target.narrow(queryset).select_related("subject")
    count = queryset.count()
    start = (page - 1) * size
    rows = list(queryset[start : start + size])
    base = request.build_absolute_uri(request.path)
    return Response(
        {
            "count": count,
            "next": f"{base}?page={page + 1}&page_size={size}" if start + size < count else None,
            "previous": f"{base}?page={page - 1}&page_size={size}" if page > 1 else None,
            "results": [memory_out(memory) for memory in rows],
        }
    )


class AddMemories(Mem0View):
    """POST /v3/memories/add/ (and, through Memories, /v1/memories/): add."""

    def post(self, request):
        data = json_body(request)
        entities = request_entities(data)
        target = Target(self.actor, entities)
        scope, scope_id = target.write_scope()
        messages = _messages(data.get("messages"))
        infer = flag(data.get("infer"), "infer", True)
        metadata = metadata_object(data.get("metadata"))
        observed_at = _timestamp(data.get("timestamp"))
        expires_at = expiration(data.get("expiration_date"))
        written = self.add_messages(
            messages,
            infer=infer,
            scope=scope,
            scope_id=scope_id,
            ref=self.source_ref(entities, metadata),
            metadata=metadata,
            observed_at=observed_at,
            expires_at=expires_at,
            subject=target.member if scope == Scope.AGENT else None,
            run_id=entities["run_id"] or "",
        )
        return Response({"results": [_event(memory) for memory in written]})

    def add_messages(
        self,
        messages,
        *,
        infer: bool,
        scope,
        scope_id,
        ref: dict,
        metadata,
        expires_at,
        run_id: str,
        observed_at=None,
        subject=None,
    ) -> list[Memory]:
        """The memories extracted from the messages (infer), else each message as sent."""
        if infer:
            return services.memory_add_from_messages(
                actor=self.actor,
                messages=messages,
                scope=scope,
                scope_id=scope_id,
                conversation_id=run_id,
                source_ref=ref,
                subject=subject,
                observed_at=observed_at,
                expires_at=expires_at,
            )
        return self._add_verbatim(
            messages,
            scope,
            scope_id,
            ref,
            metadata,
            observed_at,
            expires_at,
            subject,
            run_id=run_id,
        )

    @transaction.atomic
    def _add_verbatim(
        self, messages, scope, scope_id, ref, metadata, observed_at, expires_at, who, *, run_id
    ):
        written = []
        for message in messages:
            if not isinstance(message, dict) or not isinstance(message.get("content"), str):
                raise InvalidInput(
                    _("Each message needs a 'content' string (and a 'role')."),
                    details={"messages": ["{role, content} objects."]},
                )
            if not message["content"].strip() or message.get("role") == "system":
                continue
            written.append(
                services.memory_add(
                    actor=self.actor,
                    scope=scope,
                    scope_id=scope_id,
                    subject=who,
                    kind=Kind.FACT,
                    content=message["content"],
                    # Stored as sent (infer=false): the client vouches for it as an import.
                    source_kind=SourceKind.IMPORT,
                    source_ref={**ref, "role": str(message.get("role", "user"))[:32]},
                    attributes={"metadata": metadata} if metadata else None,
                    observed_at=observed_at,
                    expires_at=expires_at,
                    conversation_id=run_id,
                )
            )
        return written


class Memories(AddMemories):
    """/v1/memories/: POST adds, GET lists, DELETE deletes all of a user, agent or run."""

    def get(self, request):
        entities = request_entities(request.query_params)
        target = Target(self.actor, entities)
        queryset = selectors.memory_list(
            self.actor,
            scope_keys=target.read_scope_keys(),
            conversation_id=entities["run_id"],
        )
        return _page(request, queryset, target)

    def delete(self, request):
        entities = request_entities(request.query_params)
        if not any(entities.values()):
            raise InvalidInput(
                _(
                    "Give user_id, agent_id, app_id or run_id: deleting everything at once "
                    "is not offered."
                ),
                details={"filters": ["Required."]},
            )
        target = Target(self.actor, entities)
        keys = target.read_scope_keys()
        if entities["app_id"] or (target.agent_id is not None and target.member is not None):
            deleted = self._delete_matching(target, keys, entities["run_id"])
        else:
            result = services.memory_delete_by_filter(
                actor=self.actor,
                scope_keys=keys,
                conversation_id=entities["run_id"],
                reason="mem0 delete_all",
            )
            deleted = len(result.deleted)
        return Response({"message": _("Memories deleted successfully!"), "deleted": deleted})

    def _delete_matching(self, target: Target, keys, run_id) -> int:
        """App- or subject-narrowed deletes: each memory through memory_delete."""
        rows = target.narrow(
            selectors.memory_list(self.actor, scope_keys=keys, conversation_id=run_id)
        )
        return delete_each(self.actor, rows)


class ListMemories(Mem0View):
    """POST /v3/memories/ and /v2/memories/: the list, filtered by the body's `filters`."""

    read_only_methods = frozenset({"GET", "HEAD", "OPTIONS", "POST"})

    def post(self, request):
        data = json_body(request)
        entities = request_entities(data)
        target = Target(self.actor, entities)
        queryset = selectors.memory_list(
            self.actor,
            scope_keys=target.read_scope_keys(),
            conversation_id=entities["run_id"],
        )
        return _page(request, queryset, target, body=data)


class Search(Mem0View):
    read_only_methods = frozenset({"GET", "HEAD", "OPTIONS", "POST"})

    def post(self, request):
        data = json_body(request)
        query = query_text(data.get("query"))
        entities = request_entities(data)
        target = Target(self.actor, entities)
        top_k = integer(data.get("top_k"), "top_k", default=10, low=1, high=100)
        threshold = score_threshold(data.get("threshold"))
        # Cadre's search is always hybrid (vector + lexical) and ranks on its own: accepted.
        flag(data.get("rerank"), "rerank", False)
        flag(data.get("keyword_search"), "keyword_search", False)
        ranked = self.ranked(
            query,
            threshold,
            top_k=top_k,
            scope_keys=target.read_scope_keys(),
            conversation_id=entities["run_id"],
        )
        hits = [
            {**memory_out(memory), "score": score}
            for memory, score in ranked
            if target.matches(memory)
        ]
        return Response({"results": hits})


class MemoryDetail(Mem0View):
    def get(self, request, memory_id):
        return Response(memory_out(selectors.memory_get(self.actor, memory_pk(memory_id))))

    def put(self, request, memory_id):
        memory = selectors.memory_get(self.actor, memory_pk(memory_id))
        require_modify(self.actor, memory)  # a caller who may not change it learns no more
        data = json_body(request)
        changes: dict = {}
        if data.get("text") is not None:
            if not isinstance(data["text"], str):
                raise InvalidInput(_("text must be a string."), details={"text": ["String."]})
            changes["content"] = data["text"]
        if "metadata" in data and data["metadata"] is not None:
            changes["attributes"] = {
                **(memory.attributes or {}),
                "metadata": metadata_object(data["metadata"]),
            }
        if "expiration_date" in data:
            changes["expires_at"] = expiration(data["expiration_date"])
        if data.get("timestamp") is not None:
            changes["valid_from"] = _timestamp(data["timestamp"])
        if not changes:
            raise InvalidInput(
                _("Give text, metadata, timestamp or expiration_date."),
                details={"text": ["Nothing to change."]},
            )
        memory = services.memory_update(
            actor=self.actor,
            memory=memory,
            expected_version=memory.version,
            reason="mem0 update",
            **changes,
        )
        return Response({**memory_out(memory), "text": memory.content})

    def delete(self, request, memory_id):
        memory = selectors.memory_get(self.actor, memory_pk(memory_id))
        services.memory_delete(actor=self.actor, memory=memory)
        return Response({"message": _("Memory deleted successfully!")})


class History(Mem0View):
    def get(self, request, memory_id):
        versions = selectors.memory_history(self.actor, memory_pk(memory_id))
        memory = selectors.memory_get(self.actor, memory_pk(memory_id))
        user_id = memory_out(memory)["user_id"]
        return Response(
            [
                {
                    "id": f"{memory.pk}.{version.version}",
                    "memory_id": str(memory.pk),
                    "input": [],
                    "old_memory": version.old_content or None,
                    "new_memory": version.new_content or None,
                    "user_id": user_id,
                    "event": HISTORY_EVENTS.get(version.change, "UPDATE"),
                    "metadata": {"reason": version.reason, "change": version.change},
                    "created_at": version.created_at.isoformat(),
                    "updated_at": version.created_at.isoformat(),
                }
                for version in versions
            ]
        )


class Feedback(Mem0View):
    def post(self, request):
        data = json_body(request)
        memory = selectors.memory_get(self.actor, memory_pk(data.get("memory_id")))
        feedback = data.get("feedback")
        if feedback is not None and (
            not isinstance(feedback, str) or feedback.upper() not in FEEDBACK_VALUES
        ):
            raise InvalidInput(
                _("feedback must be one of %(value)s or null.")
                % {"value": ", ".join(FEEDBACK_VALUES)},
                details={"feedback": list(FEEDBACK_VALUES)},
            )
        reason = data.get("feedback_reason")
        if reason is not None and not isinstance(reason, str):
            raise InvalidInput(_("feedback_reason must be a string."))
        entry = {
            "client": CLIENT,
            "feedback": feedback.upper() if feedback else None,
            "reason": services.without_secrets(
                " ".join((reason or "").split())[:1000], organization=self.actor.organization
            ),
        }
        services.memory_update(
            actor=self.actor,
            memory=memory,
            expected_version=memory.version,
            reason=f"mem0 feedback {entry['feedback']}",
            attributes={**(memory.attributes or {}), "client_feedback": entry},
        )
        return Response(
            {"id": str(memory.pk), "feedback": entry["feedback"], "feedback_reason": reason}
        )


class Unknown(Mem0View):
    """Any other Mem0 path: 404 in Mem0's shape (not the console's HTML page)."""

    def initial(self, request, *args, **kwargs):
        APIView.initial(self, request, *args, **kwargs)
        raise NotFound(
            _("Cadre's Mem0-compatible API does not serve %(path)s.") % {"path": request.path}
        )

    def get(self, request):  # pragma: no cover - initial() always answers
        return None

    post = put = patch = delete = get
