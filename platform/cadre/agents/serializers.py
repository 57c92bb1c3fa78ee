"""Serializers for the agents API: output shapes and validated input for the services."""

from __future__ import annotations

from rest_framework import serializers

from cadre.agents import selectors
from cadre.agents.models import (
    Agent,
    AgentTemplate,
    Deployment,
    EventTrigger,
    ModelProviderConfig,
    Rollout,
    Run,
    RunEvent,
    Session,
    Step,
    TemplateVersion,
    Wait,
    channel_choices,
)
from cadre.api.fields import BoundedJSONField, RegisteredChoiceField
from cadre.api.viewsets import TenantRelatedFieldMixin
from cadre.tenancy.models import Department, Member, Position


class TenantPrimaryKeyRelatedField(TenantRelatedFieldMixin, serializers.PrimaryKeyRelatedField):
    pass


# --- templates ------------------------------------------------------------------------------


class TemplateVersionSerializer(serializers.ModelSerializer):
    class Meta:
        model = TemplateVersion
        fields = [
            "id",
            "template",
            "number",
            "status",
            "name",
            "target_positions",
            "sop",
            "agent_md",
            "user_md_template",
            "model_settings",
            "skills",
            "tool_permissions",
            "memory_policy",
            "hooks",
            "policy_chain",
            "change_note",
            "generated_from",
            "created_at",
            "updated_at",
            "submitted_at",
            "published_at",
            "published_by",
        ]
        read_only_fields = fields


class TemplateVersionSummarySerializer(serializers.ModelSerializer):
    class Meta:
        model = TemplateVersion
        fields = ["id", "number", "status", "name", "created_at", "published_at"]
        read_only_fields = fields


class TemplateVersionUpdateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=200, required=False)
    target_positions = serializers.ListField(
        child=serializers.CharField(max_length=64), required=False
    )
    sop = serializers.CharField(allow_blank=True, required=False, max_length=100_000)
    agent_md = serializers.CharField(allow_blank=True, required=False, max_length=100_000)
    user_md_template = serializers.CharField(allow_blank=True, required=False, max_length=20_000)
    model_settings = serializers.DictField(required=False)
    skills = serializers.ListField(child=serializers.DictField(), required=False)
    tool_permissions = serializers.DictField(required=False)
    memory_policy = serializers.DictField(required=False)
    hooks = serializers.DictField(required=False)
    change_note = serializers.CharField(allow_blank=True, required=False, max_length=4000)


class TemplateSerializer(serializers.ModelSerializer):
    versions = TemplateVersionSummarySerializer(many=True, read_only=True)

    class Meta:
        model = AgentTemplate
        fields = [
            "id",
            "name",
            "code",
            "description",
            "preset",
            "is_archived",
            "created_at",
            "updated_at",
            "versions",
        ]
        read_only_fields = fields


class TemplateCreateSerializer(TemplateVersionUpdateSerializer):
    name = serializers.CharField(max_length=200)
    code = serializers.SlugField(max_length=64)
    description = serializers.CharField(allow_blank=True, required=False, max_length=4000)
    preset = serializers.CharField(allow_blank=True, required=False, max_length=64)


class ReasonSerializer(serializers.Serializer):
    reason = serializers.CharField(allow_blank=True, required=False, max_length=2000)


class PublishSerializer(ReasonSerializer):
    override_gate = serializers.CharField(
        allow_blank=True,
        required=False,
        max_length=500,
        help_text="why to publish although an evaluation gate (publish, model change) fails "
        "(audited per gate)",
    )


class DiffSerializer(serializers.Serializer):
    from_version = serializers.IntegerField()
    to_version = serializers.IntegerField()
    changes = serializers.DictField(child=serializers.CharField())


class PresetSerializer(serializers.Serializer):
    key = serializers.CharField()
    name = serializers.CharField()
    code = serializers.CharField()
    description = serializers.CharField()
    target_positions = serializers.ListField(child=serializers.CharField())


class GenerateSerializer(serializers.Serializer):
    files = serializers.ListField(child=serializers.FileField(), min_length=1, max_length=20)
    notes = serializers.CharField(allow_blank=True, required=False, max_length=50_000)


# --- providers ------------------------------------------------------------------------------


class ProviderConfigSerializer(serializers.ModelSerializer):
    api_key = serializers.CharField(
        write_only=True, required=False, allow_blank=True, max_length=4000
    )
    api_key_set = serializers.SerializerMethodField()
    # Objects (the service refuses anything else); bounded, as a form body's JSON text is read
    # here rather than by a parser.
    parameters = BoundedJSONField(required=False)
    prices = BoundedJSONField(required=False)

    class Meta:
        model = ModelProviderConfig
        fields = [
            "id",
            "name",
            "kind",
            "base_url",
            "api_key",
            "api_key_set",
            "default_model",
            "parameters",
            "prices",
            "timeout_seconds",
            "preset",
            "is_default",
            "is_active",
            "created_at",
        ]
        read_only_fields = ["id", "is_default", "is_active", "created_at"]
        validators: list = []

    def get_api_key_set(self, obj) -> bool:
        return bool(obj.api_key)


class ConnectionReportSerializer(serializers.Serializer):
    ok = serializers.BooleanField()
    model = serializers.CharField()
    latency_ms = serializers.IntegerField(allow_null=True)
    status = serializers.IntegerField(allow_null=True)
    models = serializers.ListField(child=serializers.CharField(), allow_null=True)
    error = serializers.CharField(allow_blank=True)
    reason = serializers.CharField(allow_blank=True)
    warning = serializers.CharField(allow_blank=True)


class ModelPricesSerializer(serializers.Serializer):
    """Prices per million tokens, in the organization's currency."""

    input = serializers.DecimalField(max_digits=14, decimal_places=6, min_value=0, required=False)
    output = serializers.DecimalField(max_digits=14, decimal_places=6, min_value=0, required=False)
    cached_input = serializers.DecimalField(
        max_digits=14, decimal_places=6, min_value=0, required=False
    )
    # Prompt tokens written to the provider's cache, where it charges them (Anthropic, DashScope).
    cache_write = serializers.DecimalField(
        max_digits=14, decimal_places=6, min_value=0, required=False
    )


class ProviderPricesSerializer(ModelPricesSerializer):
    """A provider's default prices and, per model name, prices that override them."""

    models = serializers.DictField(child=ModelPricesSerializer(), required=False)


# --- dispatch -------------------------------------------------------------------------------


class DeploymentSerializer(serializers.ModelSerializer):
    agent_count = serializers.SerializerMethodField()
    version_number = serializers.IntegerField(source="version.number", read_only=True)

    class Meta:
        model = Deployment
        fields = [
            "id",
            "name",
            "template",
            "version",
            "version_number",
            "positions",
            "departments",
            "members",
            "channels",
            "status",
            "agent_count",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields

    def get_agent_count(self, obj) -> int:
        return getattr(obj, "agent_count", None) or obj.agents.count()


class DeploymentCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    template = TenantPrimaryKeyRelatedField(queryset=AgentTemplate.objects.all())
    version = TenantPrimaryKeyRelatedField(
        queryset=TemplateVersion.objects.all(), required=False, allow_null=True
    )
    positions = TenantPrimaryKeyRelatedField(
        queryset=Position.objects.all(), many=True, required=False
    )
    departments = TenantPrimaryKeyRelatedField(
        queryset=Department.objects.all(), many=True, required=False
    )
    members = TenantPrimaryKeyRelatedField(queryset=Member.objects.all(), many=True, required=False)
    channels = serializers.ListField(
        child=RegisteredChoiceField(choices=channel_choices),
        required=False,
        default=["console"],
    )


class RolloutStartSerializer(serializers.Serializer):
    version = TenantPrimaryKeyRelatedField(queryset=TemplateVersion.objects.all())
    strategy = serializers.ChoiceField(choices=Rollout.Strategy.values, default="all")


class RolloutSerializer(serializers.ModelSerializer):
    from_number = serializers.IntegerField(source="from_version.number", read_only=True)
    to_number = serializers.IntegerField(source="to_version.number", read_only=True)
    progress = serializers.SerializerMethodField()

    class Meta:
        model = Rollout
        fields = [
            "id",
            "deployment",
            "from_version",
            "from_number",
            "to_version",
            "to_number",
            "strategy",
            "department_order",
            "next_index",
            "status",
            "is_rollback",
            "progress",
            "created_at",
            "finished_at",
        ]
        read_only_fields = fields

    def get_progress(self, obj) -> dict:
        agents = obj.deployment.agents
        return {
            "total": agents.count(),
            "on_new_version": agents.filter(version_id=obj.to_version_id).count(),
        }


class AgentSerializer(serializers.ModelSerializer):
    version_number = serializers.IntegerField(source="version.number", read_only=True)
    memory_scope = serializers.CharField(source="memory_scope_key", read_only=True)

    class Meta:
        model = Agent
        fields = [
            "id",
            "name",
            "deployment",
            "member",
            "version",
            "version_number",
            "user_md",
            "memory_scope",
            "status",
            "stop_reason",
            "tokens_in",
            "tokens_out",
            "cost",
            "created_at",
            "stopped_at",
        ]
        read_only_fields = [f for f in fields if f != "user_md"]


class SessionSerializer(serializers.ModelSerializer):
    class Meta:
        model = Session
        fields = [
            "id",
            "agent",
            "member",
            "channel",
            "external_id",
            "title",
            "created_at",
            "last_activity_at",
        ]
        read_only_fields = fields


# --- runs -----------------------------------------------------------------------------------


class StepSerializer(serializers.ModelSerializer):
    class Meta:
        model = Step
        fields = [
            "index",
            "kind",
            "name",
            "status",
            "idempotency_key",
            "input",
            "output",
            "error",
            "attempts",
            "started_at",
            "completed_at",
            "duration_ms",
            "tokens_in",
            "tokens_out",
            "tokens_cached",
            "tokens_cache_write",
            "cost",
        ]
        read_only_fields = fields


class WaitSerializer(serializers.ModelSerializer):
    class Meta:
        model = Wait
        fields = [
            "id",
            "kind",
            "key",
            "status",
            "deadline",
            "on_timeout",
            "details",
            "payload",
            "created_at",
            "resolved_at",
        ]
        read_only_fields = fields


class RunSerializer(serializers.ModelSerializer):
    """A run. Its internal `error` (the model endpoint's answer, an exception's text) only with
    the context's `run_errors_visible` (callers holding model.manage); otherwise `error` is a
    stable code (`run_failed`, `run_cancelled`) and `error_message` the run's short notice."""

    rating = serializers.ChoiceField(
        choices=Run.Rating.choices,
        allow_blank=True,
        read_only=True,
        help_text="The person's rating of the answer; empty until rated",
    )
    error_message = serializers.SerializerMethodField(
        help_text="What went wrong, for people: no internal details; empty without an error"
    )

    class Meta:
        model = Run
        fields = [
            "id",
            "session",
            "agent",
            "member",
            "version",
            "parent",
            "root",
            "depth",
            "trace_id",
            "status",
            "trigger",
            "input",
            "output",
            "error",
            "error_message",
            "attempts",
            "step_count",
            "tokens_in",
            "tokens_out",
            "tokens_cached",
            "cost",
            "created_at",
            "started_at",
            "finished_at",
            "rating",
            "rating_note",
            "rated_at",
        ]
        read_only_fields = fields

    def get_error_message(self, run) -> str:
        return selectors.run_error_public(run.status, run.output)["message"] if run.error else ""

    def to_representation(self, run):
        data = super().to_representation(run)
        if run.error and not self.context.get("run_errors_visible", False):
            data["error"] = selectors.run_error_public(run.status, run.output)["error"]
        return data


class RunRatingSerializer(serializers.Serializer):
    outcome = serializers.ChoiceField(choices=Run.Rating.choices)
    note = serializers.CharField(allow_blank=True, required=False, max_length=500)


class RunDetailSerializer(RunSerializer):
    steps = StepSerializer(many=True, read_only=True)
    waits = WaitSerializer(many=True, read_only=True)

    class Meta(RunSerializer.Meta):
        fields = [*RunSerializer.Meta.fields, "steps", "waits"]
        read_only_fields = fields


class RunCreateSerializer(serializers.Serializer):
    agent = TenantPrimaryKeyRelatedField(queryset=Agent.objects.all())
    text = serializers.CharField(max_length=32_000)
    session = TenantPrimaryKeyRelatedField(
        queryset=Session.objects.all(), required=False, allow_null=True
    )


class RunResumeSerializer(serializers.Serializer):
    key = serializers.CharField(max_length=191, required=False)
    payload = serializers.DictField(default=dict)


class UsageSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    label = serializers.CharField()
    runs = serializers.IntegerField()
    tokens_in = serializers.IntegerField()
    tokens_out = serializers.IntegerField()
    tokens_cached = serializers.IntegerField()  # of tokens_in, served by a prompt cache
    cache_hit_rate = serializers.FloatField()
    cost = serializers.DecimalField(max_digits=14, decimal_places=6)


class RunEventSerializer(serializers.ModelSerializer):
    class Meta:
        model = RunEvent
        fields = ["id", "kind", "data", "created_at"]
        read_only_fields = fields


# --- triggers -------------------------------------------------------------------------------


class EventTriggerSerializer(serializers.ModelSerializer):
    deployment = TenantPrimaryKeyRelatedField(queryset=Deployment.objects.all())
    member = TenantPrimaryKeyRelatedField(
        queryset=Member.objects.all(), required=False, allow_null=True
    )
    endpoint = serializers.SerializerMethodField()

    class Meta:
        model = EventTrigger
        fields = [
            "id",
            "name",
            "deployment",
            "member",
            "member_field",
            "tolerance_seconds",
            "is_active",
            "endpoint",
            "created_at",
        ]
        read_only_fields = ["id", "is_active", "endpoint", "created_at"]
        validators: list = []

    def get_endpoint(self, obj) -> str:
        return f"/api/v1/triggers/{obj.pk}/events/"


class EventTriggerCreatedSerializer(EventTriggerSerializer):
    secret = serializers.CharField(read_only=True)

    class Meta(EventTriggerSerializer.Meta):
        fields = [*EventTriggerSerializer.Meta.fields, "secret"]


# --- a run's call chain (cadre/agents/call_chain.py) -------------------------------------


class CallChainMemorySerializer(serializers.Serializer):
    memory = serializers.IntegerField()
    version = serializers.IntegerField()
    rank = serializers.IntegerField()
    score = serializers.FloatField()
    tokens = serializers.IntegerField()


class CallChainEventSerializer(serializers.Serializer):
    """One thing a run did; the fields after `step` depend on `kind` (absent otherwise)."""

    KINDS = ("inbound", "policy", "context", *Step.Kind.values, "confirmation", "reply")

    kind = serializers.ChoiceField(choices=KINDS)
    at = serializers.DateTimeField(allow_null=True)
    duration_ms = serializers.IntegerField(allow_null=True)
    step = serializers.IntegerField(allow_null=True, help_text="The run's step index")
    # inbound
    trigger = serializers.CharField(required=False)
    # inbound (the run's input) and steps (what the step was given)
    input = serializers.JSONField(required=False)
    # policy
    stage = serializers.CharField(required=False)
    plugin = serializers.CharField(required=False)
    action = serializers.CharField(required=False)
    reason = serializers.CharField(required=False)
    # context: the memories sent to the model
    query = serializers.CharField(required=False)
    tokens = serializers.IntegerField(required=False)
    memories = CallChainMemorySerializer(many=True, required=False)
    # steps: model calls, tool calls, hooks, waits
    name = serializers.CharField(required=False)
    status = serializers.CharField(required=False, help_text="Step or confirmation status")
    tokens_in = serializers.IntegerField(required=False)
    tokens_out = serializers.IntegerField(required=False)
    error = serializers.CharField(required=False)
    effect = serializers.JSONField(
        required=False, allow_null=True, help_text="A tool call's recorded side effect"
    )
    # steps (what the step returned) and reply (the run's output)
    output = serializers.JSONField(required=False)
    # confirmation
    confirmation = serializers.IntegerField(required=False)
    tool = serializers.CharField(required=False)
    summary = serializers.CharField(required=False)
    risk = serializers.CharField(required=False)
    decided_via = serializers.CharField(required=False)
    decided_by = serializers.IntegerField(required=False, allow_null=True)


class CallChainRunSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    status = serializers.ChoiceField(choices=Run.Status.choices)
    trace_id = serializers.CharField()
    agent = serializers.IntegerField()
    member = serializers.IntegerField()
    session = serializers.IntegerField()
    parent = serializers.IntegerField(allow_null=True)
    depth = serializers.IntegerField()
    trigger = serializers.CharField()
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    duration_ms = serializers.IntegerField(allow_null=True)
    tokens_in = serializers.IntegerField()
    tokens_out = serializers.IntegerField()
    cost = serializers.DecimalField(max_digits=14, decimal_places=6)
    audit_events = serializers.IntegerField(help_text="Audit events whose target is this run")


class CallChainRunEventsSerializer(serializers.Serializer):
    run = CallChainRunSerializer()
    events = CallChainEventSerializer(many=True)


class CallChainSerializer(CallChainRunEventsSerializer):
    trace_id = serializers.CharField()
    children = CallChainRunEventsSerializer(
        many=True, help_text="Delegated runs at any depth, parents first (those you may see)"
    )
    hidden_children = serializers.IntegerField(
        help_text="Delegated runs in the chain you may not see"
    )
