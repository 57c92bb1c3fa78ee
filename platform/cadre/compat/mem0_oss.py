"""Mem0's self-hosted (OSS) REST server contract on Cadre, at /mem0/oss/: what a client pointed
at a self-hosted Mem0 server calls (Hermes Agent's mem0 provider with MEM0_HOST set).

Written from Mem0's own server, github.com/mem0ai/mem0 `server/main.py` at commit
8d5b7865bd0521e75fe9ab1b260eeccc83f8a378 (read, not copied), and the answer shapes of
`mem0/memory/main.py` (Memory.get/search/update/delete/history) at the same commit: `X-API-Key`
auth, POST /memories, GET /memories, GET/PUT/DELETE /memories/{id}, GET /memories/{id}/history,
DELETE /memories, POST /search. /configure, /configure/providers, /generate-instructions and
/reset configure or wipe a whole server: refused with 501 `not_supported`, nothing changed.

Everything goes through the platform API's services and checks (cadre.compat.mem0): the same
memory gate, the same JSON parser (depth-bounded, NUL, lone surrogates and 1e309 refused), the
same error envelope with Mem0's `detail`.

Identities (docs/integrations.md, "Mem0 self-hosted API"): a self-hosted Mem0 server has no
members, so its `user_id`, `agent_id` and `run_id` are free strings a client picks. Here they
are labels within one scope only, the **personal memory of the member who owns the API key**:
`user_id` and `agent_id` are stored in the memory's source_ref, `run_id` as its conversation id,
and reads are narrowed by the labels given. They never select another member, a Cadre agent or
a shared (department, organization) scope, whatever they hold (an e-mail or a number included);
a memory outside the key owner's personal scope is a 404 here, even one the key could read
through /mem0/ or /api/v1/. A key with no member behind it is refused (403)."""

from __future__ import annotations

from django.utils import translation
from django.utils.translation import gettext as _
from rest_framework import exceptions
from rest_framework.response import Response

from cadre.compat.mem0 import (
    HISTORY_EVENTS,
    AddMemories,
    Mem0View,
    TokenKeyAuthentication,
    delete_each,
    entity_text,
    expiration,
    flag,
    integer,
    json_body,
    memory_pk,
    metadata_object,
    query_text,
    score_threshold,
)
from cadre.compat.mem0_platform import NotSupported
from cadre.errors import InvalidInput, NotFound
from cadre.memory import selectors, services
from cadre.memory.models import Memory, Scope, scope_key
from cadre.memory.services.common import require_modify
from cadre.tenancy import authentication as key_auth
from cadre.tenancy.authentication import ApiKeyAuthentication

LABELS = ("user_id", "agent_id", "run_id")
# GET /memories lists at most this many (Mem0's server: ALL_MEMORIES_LIMIT).
LIST_LIMIT = 1000
# Search ranks within the labelled memories of the scope; past this many, narrow the labels.
MAX_CANDIDATES = 10000
API = "oss"


class XApiKeyAuthentication(ApiKeyAuthentication):
    """A Cadre API key in Mem0's self-hosted header, `X-API-Key: <key>`: checked exactly as
    `Authorization: Bearer <key>` is (the same lookup, failed-auth limit, touch and language)."""

    def authenticate(self, request):
        token = request.META.get("HTTP_X_API_KEY", "")
        if not token:
            return None
        key_auth.refuse_if_auth_blocked(request)
        try:
            key = key_auth.api_key_resolve(token)
        except key_auth.KeyRefused as refused:
            raise exceptions.AuthenticationFailed(str(refused)) from None
        key_auth.api_key_touch(key, request.META.get("REMOTE_ADDR"))
        request._request.actor = key_auth.api_key_actor(key)
        language = key_auth.request_language(request._request, key.created_by)
        translation.activate(language)
        request._request.LANGUAGE_CODE = language
        return key_auth.KeyPrincipal(key), key

    def authenticate_header(self, request):
        return "X-API-Key"


def _labels(source, *, filters=None) -> dict:
    """user_id/agent_id/run_id from the body or query string, and from Mem0's `filters` (plain
    equality; the server's own deprecated top-level form too). Anything else in `filters` is
    refused: ignoring it would answer more than was asked."""
    found = {key: source.get(key) for key in LABELS if source.get(key) not in (None, "")}
    if filters is not None:
        if not isinstance(filters, dict):
            raise InvalidInput(_("filters must be an object."), details={"filters": ["Object."]})
        for key, value in filters.items():
            if key not in LABELS:
                raise InvalidInput(
                    _(
                        "Unsupported filter %(key)r: Cadre's Mem0 self-hosted API filters by "
                        "user_id, agent_id and run_id."
                    )
                    % {"key": key},
                    code="unsupported_filter",
                    details={"filters": [key]},
                )
            found[key] = value
    return {key: entity_text(found.get(key), key) for key in LABELS}


class Mem0OssView(Mem0View):
    """X-API-Key (or Bearer, or Token) auth; every call within the key owner's personal scope."""

    authentication_classes = [
        XApiKeyAuthentication,
        ApiKeyAuthentication,
        TokenKeyAuthentication,
    ]

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        self.member = selectors.acting_member(self.actor)
        if self.member is None:
            raise exceptions.PermissionDenied(
                _(
                    "Cadre's Mem0 self-hosted API keeps memories in the personal memory of the "
                    "key's member: use an API key a member created."
                )
            )
        self.scope_key = scope_key(Scope.USER, self.member.pk)

    def labelled(self, labels: dict):
        """The key owner's personal memories carrying every label given."""
        rows = selectors.memory_list(
            self.actor, scope_keys=[self.scope_key], conversation_id=labels["run_id"]
        ).filter(scope_key=self.scope_key)
        for key in ("user_id", "agent_id"):
            if labels[key]:
                rows = rows.filter(**{f"source_ref__{key}": labels[key]})
        return rows

    def own(self, memory_id) -> Memory:
        """A memory of the key owner's personal scope, else 404 (whatever else the key reads)."""
        memory = selectors.memory_get(self.actor, memory_pk(memory_id))
        if memory.scope_key != self.scope_key:
            raise NotFound(_("Memory not found."))
        return memory


def memory_item(memory: Memory, score: float | None = None) -> dict:
    """A memory as Mem0's Memory.get/get_all/search give it (labels only when present)."""
    ref = memory.source_ref or {}
    item = {
        "id": str(memory.pk),
        "memory": memory.content,
        "hash": memory.content_hash,
        "created_at": memory.created_at.isoformat(),
        "updated_at": memory.updated_at.isoformat(),
    }
    if score is not None:
        item["score"] = score
    for key in ("user_id", "agent_id"):
        if ref.get(key):
            item[key] = ref[key]
    if memory.conversation_id:
        item["run_id"] = memory.conversation_id
    if memory.expires_at:
        item["expiration_date"] = memory.expires_at.date().isoformat()
    metadata = (memory.attributes or {}).get("metadata", ref.get("metadata"))
    if metadata:
        item["metadata"] = metadata
    return item


def _require_label(labels: dict) -> None:
    if not any(labels.values()):
        raise InvalidInput(
            _("At least one identifier (user_id, agent_id, run_id) is required."),
            details={"user_id": ["Required."]},
        )


def _messages(value) -> list[dict]:
    """Mem0's server takes a list of {role, content} strings, nothing else."""
    if not isinstance(value, list) or not value:
        raise InvalidInput(
            _("messages must be a non-empty list of {role, content} objects."),
            details={"messages": ["Required."]},
        )
    for message in value:
        if not (
            isinstance(message, dict)
            and isinstance(message.get("role"), str)
            and isinstance(message.get("content"), str)
        ):
            raise InvalidInput(
                _("Each message needs a 'role' and a 'content' string."),
                details={"messages": ["{role, content} objects."]},
            )
    return value


class Memories(Mem0OssView, AddMemories):
    """/memories: POST adds, GET lists, DELETE deletes all memories carrying the labels."""

    def post(self, request):
        data = json_body(request)
        labels = _labels(data)
        _require_label(labels)
        messages = _messages(data.get("messages"))
        infer = flag(data.get("infer"), "infer", True)
        metadata = metadata_object(data.get("metadata"))
        expires_at = expiration(data.get("expiration_date"))
        for option in ("memory_type", "prompt"):
            if data.get(option) is not None:
                raise InvalidInput(
                    _("Cadre's Mem0 self-hosted API does not take %(option)s.")
                    % {"option": option},
                    code="not_supported",
                    details={option: ["Not supported."]},
                )
        ref = self.source_ref({"user_id": labels["user_id"], "app_id": None}, metadata)
        ref["api"] = API
        if labels["agent_id"]:
            ref["agent_id"] = labels["agent_id"]
        written = self.add_messages(
            messages,
            infer=infer,
            scope=Scope.USER,
            scope_id=self.member.pk,
            ref=ref,
            metadata=metadata,
            expires_at=expires_at,
            run_id=labels["run_id"] or "",
        )
        return Response(
            {
                "results": [
                    {
                        "id": str(memory.pk),
                        "memory": memory.content,
                        "event": "NONE"
                        if getattr(memory, "dedup_decision", "") == "exact_duplicate"
                        else "ADD",
                    }
                    for memory in written
                ]
            }
        )

    def get(self, request):
        labels = _labels(request.query_params)
        top_k = integer(
            request.query_params.get("top_k"), "top_k", default=LIST_LIMIT, low=0, high=LIST_LIMIT
        )
        if flag(_query_flag(request, "show_expired"), "show_expired", False):
            raise InvalidInput(
                _("Expired memories are not listed here."),
                code="not_supported",
                details={"show_expired": ["Not supported."]},
            )
        rows = self.labelled(labels).select_related("subject")[:top_k]
        return Response({"results": [memory_item(memory) for memory in rows]})

    def delete(self, request):
        labels = _labels(request.query_params)
        _require_label(labels)
        delete_each(self.actor, self.labelled(labels))
        return Response({"message": _("All relevant memories deleted")})


def _query_flag(request, name):
    value = request.query_params.get(name)
    if value is None:
        return None
    return {"true": True, "false": False}.get(value.strip().lower(), value)


class MemoryDetail(Mem0OssView):
    def get(self, request, memory_id):
        return Response(memory_item(self.own(memory_id)))

    def put(self, request, memory_id):
        memory = self.own(memory_id)
        require_modify(self.actor, memory)
        data = json_body(request)
        changes: dict = {}
        if "text" in data:
            if not isinstance(data["text"], str) or not data["text"].strip():
                raise InvalidInput(
                    _("text must be a non-empty string."), details={"text": ["String."]}
                )
            changes["content"] = data["text"]
        if "metadata" in data:
            changes["attributes"] = {
                **(memory.attributes or {}),
                "metadata": metadata_object(data["metadata"]),
            }
        if "expiration_date" in data:
            changes["expires_at"] = expiration(data["expiration_date"])
        if not changes:
            raise InvalidInput(
                _("Give text, metadata or expiration_date."),
                details={"text": ["Nothing to change."]},
            )
        services.memory_update(
            actor=self.actor,
            memory=memory,
            expected_version=memory.version,
            reason="mem0 update",
            **changes,
        )
        return Response({"message": _("Memory updated successfully!")})

    def delete(self, request, memory_id):
        services.memory_delete(actor=self.actor, memory=self.own(memory_id))
        return Response({"message": _("Memory deleted successfully")})


class History(Mem0OssView):
    def get(self, request, memory_id):
        memory = self.own(memory_id)
        return Response(
            [
                {
                    "id": f"{memory.pk}.{version.version}",
                    "memory_id": str(memory.pk),
                    "old_memory": version.old_content or None,
                    "new_memory": version.new_content or None,
                    "event": HISTORY_EVENTS.get(version.change, "UPDATE"),
                    "created_at": version.created_at.isoformat(),
                    "updated_at": version.created_at.isoformat(),
                    "is_deleted": version.change == "deletion",
                    "actor_id": None,
                    "role": None,
                }
                for version in selectors.memory_history(self.actor, memory.pk)
            ]
        )


class Search(Mem0OssView):
    read_only_methods = frozenset({"GET", "HEAD", "OPTIONS", "POST"})

    def post(self, request):
        data = json_body(request)
        query = query_text(data.get("query"))
        labels = _labels(data, filters=data.get("filters"))
        top_k = integer(data.get("top_k"), "top_k", default=10, low=1, high=100)
        threshold = score_threshold(data.get("threshold"))
        flag(data.get("explain"), "explain", False)  # scores are always given
        if flag(data.get("show_expired"), "show_expired", False):
            raise InvalidInput(
                _("Expired memories are not searched here."),
                code="not_supported",
                details={"show_expired": ["Not supported."]},
            )
        candidates = None
        if labels["user_id"] or labels["agent_id"]:
            candidates = list(self.labelled(labels).values_list("pk", flat=True)[:MAX_CANDIDATES])
            if not candidates:
                return Response({"results": []})
        ranked = self.ranked(
            query,
            threshold,
            top_k=top_k,
            scope_keys=[self.scope_key],
            conversation_id=labels["run_id"],
            candidate_ids=candidates,
        )
        hits = [
            memory_item(memory, score)
            for memory, score in ranked
            if memory.scope_key == self.scope_key
        ]
        return Response({"results": hits})


class NotServed(Mem0OssView):
    """/configure, /configure/providers, /generate-instructions, /reset: a self-hosted Mem0
    server's own settings and wipe. Cadre's memory is configured by its operator, never by a
    memory client: 501 `not_supported`, nothing read or changed."""

    read_only_methods = frozenset({"GET", "HEAD", "OPTIONS", "POST"})

    def refuse(self, request, *args, **kwargs):
        raise NotSupported(
            _(
                "Cadre's Mem0 self-hosted API does not offer %(path)s: Cadre's memory is "
                "configured by its operator, not through this API."
            )
            % {"path": request.path}
        )


class Configure(NotServed):
    get = post = NotServed.refuse


class Providers(NotServed):
    get = NotServed.refuse


class GenerateInstructions(NotServed):
    post = NotServed.refuse


class Reset(NotServed):
    post = NotServed.refuse
