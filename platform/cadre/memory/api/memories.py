"""The memories endpoints: CRUD, scopes, search, feedback, bulk delete, review (accept and
reject shared memory), history, influence and dedup stats (delete, purge and the deletion
report in `deletion.py`; the trail is the Memory Viewer's, cadre.viewer.api)."""

from __future__ import annotations

from django.db import transaction
from django.utils.translation import gettext
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    inline_serializer,
)
from rest_framework import exceptions, mixins, serializers, status
from rest_framework.decorators import action
from rest_framework.response import Response

from cadre.errors import InvalidInput, NotPermitted
from cadre.identifiers import parse_pk
from cadre.memory import personal_reads, selectors, services
from cadre.memory.api.deletion import MemoryDeletionActions
from cadre.memory.api.serializers import (
    ContextRecordSerializer,
    DeleteByFilterResponseSerializer,
    DeleteByFilterSerializer,
    FeedbackRequestSerializer,
    FeedbackResponseSerializer,
    ListQuerySerializer,
    MemoryCreatedSerializer,
    MemoryCreateSerializer,
    MemorySerializer,
    MemoryUpdateSerializer,
    MemoryVersionSerializer,
    ReviewRequestSerializer,
    ScopeChoiceSerializer,
    SearchRequestSerializer,
    SearchResponseSerializer,
    task_ref,
)
from cadre.memory.api.viewsets import MemoryScopedViewSet
from cadre.memory.models import Kind, Memory, SourceKind, Verification
from cadre.memory.services.common import require_modify

LIST_PARAMETERS = [
    OpenApiParameter(
        "scope",
        OpenApiTypes.STR,
        many=True,
        description="Scope key(s), e.g. user:12, department:5, organization",
    ),
    OpenApiParameter("kind", OpenApiTypes.STR, many=True, enum=Kind.values),
    OpenApiParameter("tag", OpenApiTypes.STR, many=True, description="All of these tags"),
    OpenApiParameter("source_kind", OpenApiTypes.STR, many=True, enum=SourceKind.values),
    OpenApiParameter(
        "status",
        OpenApiTypes.STR,
        many=True,
        enum=["active", "superseded", "archived"],
        description="Default: active",
    ),
    OpenApiParameter("since", OpenApiTypes.DATETIME, description="observed_at >= since"),
    OpenApiParameter("until", OpenApiTypes.DATETIME, description="observed_at < until"),
    OpenApiParameter("conversation_id", OpenApiTypes.STR),
    OpenApiParameter("q", OpenApiTypes.STR, description="Substring of the content"),
    OpenApiParameter(
        "verification",
        OpenApiTypes.STR,
        many=True,
        enum=Verification.values,
        description="Review state (shared memory written without memory.manage waits as "
        "unverified); `unverified` is the review queue",
    ),
]


def _etag(memory: Memory) -> str:
    return f'"{memory.pk}.{memory.version}"'


def _expected_version(request, data) -> int:
    header = request.headers.get("If-Match", "").strip()
    if header:
        value = header.removeprefix("W/").strip('"')
        _, _, version = value.rpartition(".")
        number = parse_pk(version)
        if number is None:
            raise InvalidInput(gettext('If-Match must be the ETag of the memory, e.g. "12.3".'))
        return number
    if data.get("version") is None:
        raise InvalidInput(
            gettext("Send the version you are updating (body 'version' or If-Match)."),
            code="version_required",
            details={"version": ["Required."]},
        )
    return int(data["version"])


def _review_schema(description: str):
    """The schema of accepting and rejecting a shared memory (the same request and answers)."""
    return extend_schema(
        request=ReviewRequestSerializer,
        responses={
            200: MemorySerializer,
            403: OpenApiResponse(description="Reviewing needs `memory.manage`."),
            404: OpenApiResponse(description="No memory the caller may see."),
            409: OpenApiResponse(
                description="`version_conflict` (it changed since you read it) or "
                "`not_waiting_for_review`; nothing is changed."
            ),
        },
        parameters=[
            OpenApiParameter(
                "If-Match",
                OpenApiTypes.STR,
                OpenApiParameter.HEADER,
                description="ETag of the version reviewed",
            )
        ],
        description=description,
    )


class MemoryViewSet(MemoryDeletionActions, mixins.ListModelMixin, MemoryScopedViewSet):
    model = Memory
    serializer_class = MemorySerializer
    write_actions = frozenset(
        {
            "create",
            "partial_update",
            "destroy",
            "purge",
            "feedback",
            "delete_by_filter",
            "accept",
            "reject",
        }
    )

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Memory.objects.none()
        if self.action == "list":
            query = ListQuerySerializer(
                data={
                    key: self.request.query_params.getlist(key)
                    if key in ("scope", "kind", "tag", "source_kind", "status", "verification")
                    else self.request.query_params.get(key)
                    for key in self.request.query_params
                }
            )
            query.is_valid(raise_exception=True)
            data = query.validated_data
            return selectors.memory_list(
                self.actor,
                scope_keys=data.get("scope"),
                kinds=data.get("kind"),
                tags=data.get("tag"),
                source_kinds=data.get("source_kind"),
                statuses=data.get("status"),
                since=data.get("since"),
                until=data.get("until"),
                conversation_id=data.get("conversation_id"),
                text=data.get("q"),
                verifications=data.get("verification"),
            )
        return selectors.memory_queryset(self.actor)

    def get_object(self):
        return selectors.memory_get(self.actor, self.kwargs["pk"])

    def get_serializer_context(self):
        context = super().get_serializer_context()
        if not getattr(self, "swagger_fake_view", False):
            context["viewer"] = selectors.acting_member(self.actor)
        return context

    @extend_schema(
        parameters=LIST_PARAMETERS,
        description="Every memory the caller may read, newest first: their own, their "
        "agents', their departments' and positions', the organization's, and any memory "
        "whose subject they are; admins add what their permissions reach. Filter by "
        "`scope` (see `scopes/`).",
    )
    def list(self, request, *args, **kwargs):
        page = self.paginate_queryset(self.get_queryset())
        context = self.get_serializer_context()
        context["scope_labels"] = selectors.scope_labels(
            self.actor.organization,
            sorted({memory.scope_key for memory in page}),
            viewer=context["viewer"],
        )
        return self.get_paginated_response(MemorySerializer(page, many=True, context=context).data)

    @extend_schema(
        responses=ScopeChoiceSerializer(many=True),
        description="Every scope the caller may read, with its readable name (the filter's "
        "options), agent scopes included.",
    )
    @action(detail=False, methods=["get"], pagination_class=None)
    def scopes(self, request):
        return Response(
            [{"key": key, "label": label} for key, label in selectors.scope_choices(self.actor)]
        )

    @extend_schema(
        responses=inline_serializer(
            "MemoryAccessLogEntry",
            many=True,
            fields={
                "at": serializers.DateTimeField(),
                "reader": serializers.CharField(help_text="Who read (their name)."),
                "reader_type": serializers.CharField(help_text="member or api_key"),
                "route": serializers.CharField(help_text="The page or API route read through."),
                "via": serializers.CharField(help_text="console, api, mem0, memos or mcp"),
                "count": serializers.IntegerField(help_text="How many memories were read."),
            },
        ),
        description="Who read the caller's own personal memories (`user:<caller>`): each "
        "read by someone else (an owner or IT admin holding `memory.personal`), when, through "
        "which page or API route and how many memories, newest first. Only ever the caller's "
        "own; reading one's own memories leaves nothing here.",
    )
    @action(detail=False, methods=["get"], url_path="access-log")
    def access_log(self, request):
        page = self.paginate_queryset(personal_reads.access_log(self.actor))
        return self.get_paginated_response([personal_reads.entry(event) for event in page])

    @extend_schema(
        request=MemoryCreateSerializer,
        responses={
            201: MemoryCreatedSerializer,
            200: MemoryCreatedSerializer,
            404: OpenApiResponse(
                description="`scope_id` names no agent, department or member the caller may "
                "write for in the organization."
            ),
        },
        description="Add one memory (`content`), or extract memories from `messages`. "
        "The item is stored, readable and lexically searchable when this returns; embedding, "
        "dedup and organization follow asynchronously (see `task`). An exact duplicate in the "
        "same scope returns the existing item (200, `dedup: exact_duplicate`). With "
        "`messages` the answer is {extractor, candidates, memories}.",
    )
    def create(self, request):
        serializer = MemoryCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        if data.get("messages"):
            result = services.memory_add_from_messages(
                actor=self.actor,
                messages=[dict(m) for m in data["messages"]],
                scope=data["scope"],
                scope_id=data.get("scope_id"),
                conversation_id=data.get("conversation_id", ""),
                source_ref=data.get("source_ref"),
                tags=data.get("tags"),
            )
            return Response(
                {
                    "extractor": result.extractor,
                    "candidates": result.candidates,
                    "memories": MemoryCreatedSerializer(result.memories, many=True).data,
                },
                status=status.HTTP_201_CREATED,
            )
        fields = {
            key: data[key]
            for key in (
                "scope_id",
                "attributes",
                "tags",
                "source_ref",
                "observed_at",
                "valid_from",
                "valid_to",
                "expires_at",
            )
            if key in data
        }
        memory = services.memory_add(
            actor=self.actor,
            scope=data["scope"],
            kind=data["kind"],
            content=data["content"],
            source_kind=data["source_kind"],
            conversation_id=data.get("conversation_id", ""),
            confidence=data["confidence"],
            **fields,
        )
        code = status.HTTP_200_OK if memory.dedup_decision == "exact_duplicate" else 201
        response = Response(MemoryCreatedSerializer(memory).data, status=code)
        response["ETag"] = _etag(memory)
        return response

    @extend_schema(
        responses=MemorySerializer,
        description="One memory. The ETag names its version (send it as If-Match).",
    )
    def retrieve(self, request, pk=None):
        memory = self.get_object()
        response = Response(MemorySerializer(memory, context=self.get_serializer_context()).data)
        response["ETag"] = _etag(memory)
        return response

    @extend_schema(
        request=MemoryUpdateSerializer,
        responses=MemorySerializer,
        parameters=[
            OpenApiParameter(
                "If-Match",
                OpenApiTypes.STR,
                OpenApiParameter.HEADER,
                description="ETag of the version being changed",
            )
        ],
        description="Change a memory if it is still at the version you read (If-Match or "
        "body `version`); otherwise 409 `version_conflict` and nothing is changed.",
    )
    def partial_update(self, request, pk=None):
        # Who may change it before what the body says: a caller who may not gets 404 or 403,
        # never the body's field errors.
        memory = self.get_object()
        require_modify(self.actor, memory)
        serializer = MemoryUpdateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        expected = _expected_version(request, data)
        changes = {name: data[name] for name in services.UPDATABLE if name in data}
        if not changes:
            raise InvalidInput(gettext("Nothing to change."))
        memory = services.memory_update(
            actor=self.actor,
            memory=memory,
            expected_version=expected,
            reason=data.get("reason", ""),
            **changes,
        )
        response = Response(MemorySerializer(memory).data)
        response["ETag"] = _etag(memory)
        return response

    def _review(self, request, decision: str):
        memory = self.get_object()
        if not selectors.can_review(self.actor):
            # Refused before the body is read: a reader who may not review learns nothing more.
            raise NotPermitted(
                gettext("Reviewing shared memory needs the 'memory.manage' permission.")
            )
        serializer = ReviewRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        memory = services.memory_verify(
            actor=self.actor,
            memory=memory,
            decision=decision,
            expected_version=_expected_version(request, data),
            reason=data["reason"],
        )
        response = Response(MemorySerializer(memory, context=self.get_serializer_context()).data)
        response["ETag"] = _etag(memory)
        return response

    @_review_schema(
        "Accept a shared memory waiting for review (`verification: unverified`, or one "
        "rejected before): it becomes `verified` and models are sent it from the next "
        "retrieval. Needs `memory.manage`; applies to the version you read (If-Match or body "
        "`version`)."
    )
    @action(detail=True, methods=["post"])
    def accept(self, request, pk=None):
        return self._review(request, "accept")

    @_review_schema(
        "Reject a shared memory waiting for review: it stays `rejected`, sent to no model; its "
        "writer still sees it (labelled), and correcting it submits it again. Needs "
        "`memory.manage`."
    )
    @action(detail=True, methods=["post"])
    def reject(self, request, pk=None):
        return self._review(request, "reject")

    @extend_schema(
        request=SearchRequestSerializer,
        responses=SearchResponseSerializer,
        description="Hybrid search over the scopes the caller may read (computed on "
        "the server; `scopes` only narrows). Each hit explains its score.",
    )
    @action(detail=False, methods=["post"])
    def search(self, request):
        serializer = SearchRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        on_behalf_of = None
        if data.get("run_id"):
            on_behalf_of = {
                "run_id": data["run_id"],
                "step_id": data.get("step_id", ""),
                "trace_id": data.get("trace_id", ""),
            }
        with transaction.atomic():
            result = selectors.memory_search(
                actor=self.actor,
                query=data["query"],
                top_k=data["top_k"],
                scope_keys=data.get("scopes"),
                kinds=data.get("kinds"),
                tags=data.get("tags"),
                source_kinds=data.get("source_kinds"),
                attributes=data.get("attributes"),
                since=data.get("since"),
                until=data.get("until"),
                as_of=data.get("as_of"),
                conversation_id=data.get("conversation_id"),
                on_behalf_of=on_behalf_of,
                force=data["force"],
            )
        return Response(
            {
                "hits": [
                    {
                        "memory": MemorySerializer(hit.memory).data,
                        "score": hit.score,
                        "components": hit.components,
                    }
                    for hit in result.hits
                ],
                "scope_keys": result.scope_keys,
                "recalled": result.recalled,
                "context_record_id": result.context_record.pk if result.context_record else None,
            }
        )

    @extend_schema(
        request=FeedbackRequestSerializer,
        responses={201: FeedbackResponseSerializer},
        description="A natural-language correction: the statements it contradicts (never a "
        "derived record) are superseded by the corrected statement (history keeps the old); "
        "with none, nothing is written. `outcome` and `message` say which happened.",
    )
    @action(detail=False, methods=["post"])
    def feedback(self, request):
        serializer = FeedbackRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        result = services.memory_feedback(
            actor=self.actor,
            text=data["text"],
            scope_keys=data.get("scopes"),
            conversation_id=data.get("conversation_id"),
        )
        return Response(
            {
                "statement": result.statement,
                "judge": result.judge,
                "created": MemorySerializer(result.created, many=True).data,
                "superseded": MemorySerializer(result.superseded, many=True).data,
                "considered": result.considered,
                "outcome": result.outcome,
                "message": result.message,
            },
            status=status.HTTP_201_CREATED,
        )

    @extend_schema(
        request=DeleteByFilterSerializer,
        responses=DeleteByFilterResponseSerializer,
        description="Soft-delete every memory you may change matching the filter "
        "(at least one criterion); a purge task removes their content.",
    )
    @action(detail=False, methods=["post"], url_path="delete")
    def delete_by_filter(self, request):
        serializer = DeleteByFilterSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        result = services.memory_delete_by_filter(
            actor=self.actor,
            scope_keys=data.get("scopes"),
            tags=data.get("tags"),
            kinds=data.get("kinds"),
            since=data.get("since"),
            until=data.get("until"),
            conversation_id=data.get("conversation_id"),
            reason=data.get("reason", ""),
        )
        return Response(
            {"deleted": result.deleted, "skipped": result.skipped, "task": task_ref(result.task)}
        )

    @extend_schema(responses=MemoryVersionSerializer(many=True))
    @action(detail=True, methods=["get"], pagination_class=None)
    def history(self, request, pk=None):
        versions = selectors.memory_history(self.actor, pk)
        return Response(MemoryVersionSerializer(versions, many=True).data)

    @extend_schema(
        responses=ContextRecordSerializer(many=True),
        description="Every recorded model call this memory was sent to.",
    )
    @action(detail=True, methods=["get"], url_path="context-records")
    def context_records(self, request, pk=None):
        records = selectors.memory_influence(self.actor, pk).prefetch_related("items")
        page = self.paginate_queryset(records)
        return self.get_paginated_response(ContextRecordSerializer(page, many=True).data)

    @extend_schema(
        responses=inline_serializer(
            name="MemoryDedupStats",
            fields={
                "received": serializers.IntegerField(),
                "written": serializers.IntegerField(),
                "merged_exact": serializers.IntegerField(),
                "merged_near": serializers.IntegerField(),
                "compression_rate": serializers.FloatField(),
            },
        ),
        description="Dedup funnel figures for the organization (admins: memory.view).",
    )
    @action(detail=False, methods=["get"])
    def stats(self, request):
        if not self.actor.has("memory.view"):
            raise exceptions.PermissionDenied(
                gettext("You do not have the 'memory.view' permission.")
            )
        return Response(selectors.memory_dedup_stats(self.actor.organization))
