"""Memory REST API under /api/v1/: memories (CRUD, search, feedback, bulk delete, history,
influence; delete, purge and the deletion report in api_deletion.py), memory-tasks and
memory-context-records.

Memory is not scoped by an organization-wide permission like other resources: what a caller
may read is the set of scopes computed from its identity (selectors.readable_scope_keys), so
these viewsets replace TenantViewSet's queryset and permission checks with the selectors'.
"""

from __future__ import annotations

import django_filters
from django.db import transaction
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    extend_schema,
    extend_schema_field,
    inline_serializer,
)
from rest_framework import exceptions, mixins, serializers, status
from rest_framework.decorators import action
from rest_framework.response import Response
from rest_framework.routers import SimpleRouter

from cadre.api.viewsets import TenantViewSet
from cadre.errors import InvalidInput
from cadre.memory import selectors, services
from cadre.memory.api_deletion import MemoryDeletionActions
from cadre.memory.models import (
    ContextRecord,
    ContextRecordItem,
    Kind,
    Memory,
    MemoryTask,
    MemoryVersion,
    Scope,
    SourceKind,
)

# --- serializers --------------------------------------------------------------------------


class MemorySerializer(serializers.ModelSerializer):
    scope_label = serializers.SerializerMethodField(
        help_text='The scope\'s readable name: "You", "Agent: Sales assistant (Alice)", '
        '"Department: Sales", "Organization".'
    )

    class Meta:
        model = Memory
        fields = [
            "id",
            "scope",
            "scope_id",
            "scope_key",
            "scope_label",
            "subject",
            "kind",
            "content",
            "sensitive_types",
            "attributes",
            "tags",
            "source_kind",
            "source_ref",
            "author_type",
            "author_id",
            "author_label",
            "observed_at",
            "confidence",
            "status",
            "valid_from",
            "valid_to",
            "expires_at",
            "retention_policy",
            "version",
            "content_hash",
            "conversation_id",
            "superseded_by",
            "provenance",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields

    def get_scope_label(self, memory) -> str:
        labels = self.context.get("scope_labels")
        if labels is None or memory.scope_key not in labels:
            labels = selectors.scope_labels(
                memory.organization, [memory.scope_key], viewer=self.context.get("viewer")
            )
        return labels[memory.scope_key]


class ScopeChoiceSerializer(serializers.Serializer):
    key = serializers.CharField(help_text="user:12, agent:7, department:5, organization")
    label = serializers.CharField()


class MemoryTaskSerializer(serializers.ModelSerializer):
    class Meta:
        model = MemoryTask
        fields = [
            "id",
            "kind",
            "memory",
            "status",
            "attempts",
            "error",
            "params",
            "result",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields


class TaskRefSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.CharField()
    status = serializers.CharField()


def _task_ref(task: MemoryTask | None) -> dict | None:
    return None if task is None else {"id": task.pk, "kind": task.kind, "status": task.status}


class MessageSerializer(serializers.Serializer):
    role = serializers.ChoiceField(choices=["user", "assistant", "system", "tool"], default="user")
    content = serializers.CharField(max_length=20_000, allow_blank=True, trim_whitespace=False)
    id = serializers.CharField(max_length=128, required=False)


class MemoryCreateSerializer(serializers.Serializer):
    """Either one explicit item (`content`), or `messages` to extract memories from."""

    scope = serializers.ChoiceField(choices=Scope.choices, default=Scope.USER)
    scope_id = serializers.IntegerField(required=False, allow_null=True)
    kind = serializers.ChoiceField(choices=Kind.choices, default=Kind.FACT)
    content = serializers.CharField(max_length=services.MAX_CONTENT_CHARS, required=False)
    messages = MessageSerializer(many=True, required=False, max_length=services.MAX_MESSAGES)
    attributes = serializers.DictField(required=False)
    tags = serializers.ListField(
        child=serializers.CharField(max_length=64), required=False, max_length=services.MAX_TAGS
    )
    source_kind = serializers.ChoiceField(
        choices=SourceKind.choices, default=SourceKind.USER_STATEMENT
    )
    source_ref = serializers.DictField(required=False)
    observed_at = serializers.DateTimeField(required=False)
    valid_from = serializers.DateTimeField(required=False)
    valid_to = serializers.DateTimeField(required=False, allow_null=True)
    expires_at = serializers.DateTimeField(required=False, allow_null=True)
    conversation_id = serializers.CharField(
        max_length=128, required=False, allow_blank=True, default=""
    )
    confidence = serializers.FloatField(min_value=0.0, max_value=1.0, default=1.0)

    def validate(self, data):
        if bool(data.get("content")) == bool(data.get("messages")):
            raise serializers.ValidationError("Give either 'content' or 'messages'.")
        return data


class MemoryCreatedSerializer(MemorySerializer):
    dedup = serializers.CharField(source="dedup_decision")
    task = serializers.SerializerMethodField()

    class Meta(MemorySerializer.Meta):
        fields = [*MemorySerializer.Meta.fields, "dedup", "task"]
        read_only_fields = fields

    @extend_schema_field(TaskRefSerializer(allow_null=True))
    def get_task(self, memory) -> dict | None:
        task = (
            MemoryTask.objects.filter(memory=memory, kind=MemoryTask.Kind.ENRICH)
            .order_by("-id")
            .first()
        )
        return _task_ref(task)


ExtractedSerializer = inline_serializer(
    name="MemoryExtraction",
    fields={
        "extractor": serializers.CharField(),
        "candidates": serializers.IntegerField(),
        "memories": MemoryCreatedSerializer(many=True),
    },
)


class MemoryUpdateSerializer(serializers.Serializer):
    version = serializers.IntegerField(
        required=False, help_text="Expected current version (or send If-Match with the ETag)."
    )
    content = serializers.CharField(max_length=services.MAX_CONTENT_CHARS, required=False)
    attributes = serializers.DictField(required=False)
    tags = serializers.ListField(
        child=serializers.CharField(max_length=64), required=False, max_length=services.MAX_TAGS
    )
    kind = serializers.ChoiceField(choices=Kind.choices, required=False)
    status = serializers.ChoiceField(
        choices=[Memory.Status.ACTIVE, Memory.Status.ARCHIVED], required=False
    )
    valid_from = serializers.DateTimeField(required=False)
    valid_to = serializers.DateTimeField(required=False, allow_null=True)
    expires_at = serializers.DateTimeField(required=False, allow_null=True)
    confidence = serializers.FloatField(min_value=0.0, max_value=1.0, required=False)
    reason = serializers.CharField(max_length=2000, required=False, allow_blank=True, default="")


class ScopeListField(serializers.ListField):
    child = serializers.CharField(max_length=48)

    def to_internal_value(self, data):
        values = super().to_internal_value(data)
        try:
            return [selectors.parse_scope_key(value) for value in values]
        except InvalidInput as error:
            raise serializers.ValidationError(error.message) from None


class SearchRequestSerializer(serializers.Serializer):
    query = serializers.CharField(max_length=4000)
    top_k = serializers.IntegerField(min_value=1, max_value=100, default=10)
    scopes = ScopeListField(
        required=False,
        help_text="Narrow to these scope keys (never widens what the caller may read).",
    )
    kinds = serializers.ListField(
        child=serializers.ChoiceField(choices=Kind.choices), required=False
    )
    tags = serializers.ListField(child=serializers.CharField(max_length=64), required=False)
    source_kinds = serializers.ListField(
        child=serializers.ChoiceField(choices=SourceKind.choices), required=False
    )
    attributes = serializers.DictField(required=False)
    since = serializers.DateTimeField(required=False)
    until = serializers.DateTimeField(required=False)
    as_of = serializers.DateTimeField(
        required=False, help_text="Time travel: what was valid and recorded at that moment."
    )
    conversation_id = serializers.CharField(max_length=128, required=False, allow_blank=True)
    force = serializers.BooleanField(
        default=False, help_text="Recall even for short, contentless queries."
    )
    run_id = serializers.CharField(
        max_length=64,
        required=False,
        help_text="With step_id: this search feeds a model call; a context record is kept.",
    )
    step_id = serializers.CharField(max_length=64, required=False, allow_blank=True)
    trace_id = serializers.CharField(max_length=32, required=False, allow_blank=True)


class SearchHitSerializer(serializers.Serializer):
    memory = MemorySerializer()
    score = serializers.FloatField()
    components = serializers.DictField()


class SearchResponseSerializer(serializers.Serializer):
    hits = SearchHitSerializer(many=True)
    scope_keys = serializers.ListField(child=serializers.CharField())
    recalled = serializers.BooleanField()
    context_record_id = serializers.IntegerField(allow_null=True)


class FeedbackRequestSerializer(serializers.Serializer):
    text = serializers.CharField(max_length=services.MAX_CONTENT_CHARS)
    scopes = ScopeListField(required=False)
    conversation_id = serializers.CharField(max_length=128, required=False, allow_blank=True)


class FeedbackResponseSerializer(serializers.Serializer):
    statement = serializers.CharField()
    judge = serializers.CharField()
    created = MemorySerializer(many=True)
    superseded = MemorySerializer(many=True)
    considered = serializers.ListField(child=serializers.DictField())


class DeleteByFilterSerializer(serializers.Serializer):
    scopes = ScopeListField(required=False)
    tags = serializers.ListField(child=serializers.CharField(max_length=64), required=False)
    kinds = serializers.ListField(
        child=serializers.ChoiceField(choices=Kind.choices), required=False
    )
    since = serializers.DateTimeField(required=False)
    until = serializers.DateTimeField(required=False)
    conversation_id = serializers.CharField(max_length=128, required=False, allow_blank=True)
    reason = serializers.CharField(max_length=2000, required=False, allow_blank=True, default="")


class DeleteByFilterResponseSerializer(serializers.Serializer):
    deleted = serializers.ListField(child=serializers.IntegerField())
    skipped = serializers.IntegerField()
    task = TaskRefSerializer(allow_null=True)


class MemoryVersionSerializer(serializers.ModelSerializer):
    class Meta:
        model = MemoryVersion
        fields = [
            "id",
            "version",
            "change",
            "old_content",
            "new_content",
            "old_attributes",
            "new_attributes",
            "old_status",
            "new_status",
            "actor_type",
            "actor_id",
            "actor_label",
            "reason",
            "related_memory",
            "created_at",
        ]
        read_only_fields = fields


class ContextRecordItemSerializer(serializers.ModelSerializer):
    class Meta:
        model = ContextRecordItem
        fields = [
            "memory",
            "memory_version",
            "rank",
            "score",
            "tokens",
            "status",
            "source",
            "reason",
            "components",
        ]
        read_only_fields = fields


class ContextRecordSerializer(serializers.ModelSerializer):
    items = ContextRecordItemSerializer(many=True, read_only=True)

    class Meta:
        model = ContextRecord
        fields = [
            "id",
            "kind",
            "run_id",
            "step_id",
            "trace_id",
            "actor_type",
            "actor_id",
            "query",
            "total_tokens",
            "skills",
            "created_at",
            "items",
        ]
        read_only_fields = fields


class ListQuerySerializer(serializers.Serializer):
    scope = ScopeListField(required=False)
    kind = serializers.ListField(
        child=serializers.ChoiceField(choices=Kind.choices), required=False
    )
    tag = serializers.ListField(child=serializers.CharField(max_length=64), required=False)
    source_kind = serializers.ListField(
        child=serializers.ChoiceField(choices=SourceKind.choices), required=False
    )
    status = serializers.ListField(
        child=serializers.ChoiceField(
            choices=[Memory.Status.ACTIVE, Memory.Status.SUPERSEDED, Memory.Status.ARCHIVED]
        ),
        required=False,
    )
    since = serializers.DateTimeField(required=False)
    until = serializers.DateTimeField(required=False)
    conversation_id = serializers.CharField(required=False)
    q = serializers.CharField(required=False, max_length=200)


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
]


def _etag(memory: Memory) -> str:
    return f'"{memory.pk}.{memory.version}"'


def _expected_version(request, data) -> int:
    header = request.headers.get("If-Match", "").strip()
    if header:
        value = header.removeprefix("W/").strip('"')
        _, _, version = value.rpartition(".")
        if not version.isdigit():
            raise InvalidInput('If-Match must be the ETag of the memory, e.g. "12.3".')
        return int(version)
    if data.get("version") is None:
        raise InvalidInput(
            "Send the version you are updating (body 'version' or If-Match).",
            code="version_required",
            details={"version": ["Required."]},
        )
    return int(data["version"])


# --- viewsets -----------------------------------------------------------------------------


class MemoryScopedViewSet(TenantViewSet):
    """Reads need memory access (API keys: memory:read or memory:write), writes memory:write;
    rows come from the selectors, never from an organization-wide permission."""

    write_actions: frozenset[str] = frozenset()

    def check_permissions(self, request):
        for permission in self.get_permissions():
            if not permission.has_permission(request, self):
                self.permission_denied(request, message=getattr(permission, "message", None))
        actor = self.actor
        writing = self.action in self.write_actions or (
            request.method not in ("GET", "HEAD", "OPTIONS") and self.action not in ("search",)
        )
        if not selectors.can_read_memory(actor):
            raise exceptions.PermissionDenied("This API key needs the 'memory:read' scope.")
        if writing and not selectors.can_write_memory(actor):
            raise exceptions.PermissionDenied("This API key needs the 'memory:write' scope.")

    def check_object_permissions(self, request, obj):
        return None  # the services decide who may change what (404 / 403 with a reason)


class MemoryViewSet(MemoryDeletionActions, mixins.ListModelMixin, MemoryScopedViewSet):
    model = Memory
    serializer_class = MemorySerializer
    write_actions = frozenset(
        {"create", "partial_update", "destroy", "purge", "feedback", "delete_by_filter"}
    )

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Memory.objects.none()
        if self.action == "list":
            query = ListQuerySerializer(
                data={
                    key: self.request.query_params.getlist(key)
                    if key in ("scope", "kind", "tag", "source_kind", "status")
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
        request=MemoryCreateSerializer,
        responses={201: MemoryCreatedSerializer, 200: MemoryCreatedSerializer},
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
        serializer = MemoryUpdateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        expected = _expected_version(request, data)
        data.pop("version", None)
        reason = data.pop("reason", "")
        if not data:
            raise InvalidInput("Nothing to change.")
        memory = services.memory_update(
            actor=self.actor,
            memory=self.get_object(),
            expected_version=expected,
            reason=reason,
            **data,
        )
        response = Response(MemorySerializer(memory).data)
        response["ETag"] = _etag(memory)
        return response

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
        responses=FeedbackResponseSerializer,
        description="A natural-language correction: the memories it contradicts are "
        "superseded by the corrected statement (history keeps the old).",
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
            {"deleted": result.deleted, "skipped": result.skipped, "task": _task_ref(result.task)}
        )

    @extend_schema(responses=MemoryVersionSerializer(many=True))
    @action(detail=True, methods=["get"])
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
            raise exceptions.PermissionDenied("You do not have the 'memory.view' permission.")
        return Response(selectors.memory_dedup_stats(self.actor.organization))


class MemoryTaskFilter(django_filters.FilterSet):
    # A plain number: a model-choice filter would tell "exists elsewhere" from "no such id".
    memory = django_filters.NumberFilter(field_name="memory_id")

    class Meta:
        model = MemoryTask
        fields = ["kind", "status"]


class ContextRecordFilter(django_filters.FilterSet):
    memory = django_filters.NumberFilter(field_name="items__memory_id", distinct=True)

    class Meta:
        model = ContextRecord
        fields = ["run_id", "step_id", "trace_id"]


class MemoryTaskViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, MemoryScopedViewSet):
    model = MemoryTask
    serializer_class = MemoryTaskSerializer
    filterset_class = MemoryTaskFilter

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return MemoryTask.objects.none()
        return selectors.memory_task_queryset(self.actor)


class ContextRecordViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, MemoryScopedViewSet):
    model = ContextRecord
    serializer_class = ContextRecordSerializer
    filterset_class = ContextRecordFilter

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return ContextRecord.objects.none()
        return selectors.context_record_queryset(self.actor).prefetch_related("items")


router = SimpleRouter()
router.register("memories", MemoryViewSet, basename="memory")
router.register("memory-tasks", MemoryTaskViewSet, basename="memory-task")
router.register("memory-context-records", ContextRecordViewSet, basename="memory-context-record")
urlpatterns = router.urls
