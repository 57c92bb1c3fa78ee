"""Serializers of the memory API: memories, their versions, search, feedback, bulk delete,
memory tasks and context records."""

from __future__ import annotations

from django.utils.translation import gettext as _
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from cadre.errors import InvalidInput
from cadre.memory import selectors, services
from cadre.memory.models import (
    ContextRecord,
    ContextRecordItem,
    Kind,
    Memory,
    MemoryTask,
    MemoryVersion,
    Scope,
    SourceKind,
    Verification,
)


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
            "verification",
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


class ReviewRequestSerializer(serializers.Serializer):
    """Accepting or rejecting a memory that waits for review, at the version read."""

    version = serializers.IntegerField(
        required=False,
        min_value=1,
        help_text="The version you reviewed (or send If-Match with the ETag).",
    )
    reason = serializers.CharField(max_length=2000, required=False, allow_blank=True, default="")


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


def task_ref(task: MemoryTask | None) -> dict | None:
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
            raise serializers.ValidationError(_("Give either 'content' or 'messages'."))
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
        return task_ref(task)


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
    outcome = serializers.ChoiceField(
        choices=["updated_memory", "nothing_changed"],
        help_text="updated_memory: the correction superseded what it contradicts; "
        "nothing_changed: nothing stored says otherwise, and nothing was written.",
    )
    message = serializers.CharField(help_text="What the person is told, in their language.")


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
    verification = serializers.ListField(
        child=serializers.ChoiceField(choices=Verification.choices), required=False
    )
