"""Role templates and their versions, deployments and agents, and the runtime's persisted state
(sessions, runs, steps, waits, run events, tool effects)."""

from __future__ import annotations

from decimal import Decimal

from django.db import models, transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

from cadre.agents import live
from cadre.crypto import EncryptedTextField
from cadre.errors import Conflict
from cadre.im import platform_choices
from cadre.tenancy.models import Department, Member, Position, TenantModel

HOOK_POINTS = (
    "on_init",
    "assemble_context",
    "process_memory",
    "compact",
    "post_process",
    "on_spawn",
)


def _own_agents(actor, permission: str, field: str) -> Q | None:
    """Employees see their own agents (and their sessions and runs) through `chat.use`."""
    if permission == "agent.view" and actor.has("chat.use") and actor.member is not None:
        return Q(**{field: actor.member.pk})
    return None


# The start of a run's error when its model endpoint failed (chat.js looks for it too).
MODEL_FAILURE = "Model provider failed: "


# --- templates ------------------------------------------------------------------------------


class AgentTemplate(TenantModel):
    """A role template: the stable identity of a line of versions ("Key account sales")."""

    resource = "template"

    name = models.CharField(max_length=200)
    code = models.SlugField(max_length=64)
    description = models.TextField(blank=True)
    preset = models.CharField(max_length=64, blank=True)  # the preset it started from
    is_archived = models.BooleanField(default=False)
    created_by = models.ForeignKey(
        Member, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint("organization", "code", name="agenttemplate_unique_code")
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def published_version(self) -> TemplateVersion | None:
        return (
            self.versions.filter(status=TemplateVersion.Status.PUBLISHED)
            .order_by("-number")
            .first()
        )


class ImmutableVersion(Conflict):
    code = "version_immutable"


class TemplateVersion(TenantModel):
    """One version of a template. Draft → in review → published; published is immutable."""

    resource = "template"

    class Status(models.TextChoices):
        DRAFT = "draft", _("Draft")
        IN_REVIEW = "in_review", _("In review")
        PUBLISHED = "published", _("Published")

    # The content fields: compared by the diff, frozen by publishing.
    CONTENT_FIELDS = (
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
    )

    template = models.ForeignKey(AgentTemplate, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.DRAFT)
    name = models.CharField(max_length=200)
    # Position codes this role is meant for (codes, not ids: readable in diffs, stable in exports).
    target_positions = models.JSONField(default=list, blank=True)
    sop = models.TextField(blank=True)
    agent_md = models.TextField(blank=True)
    user_md_template = models.TextField(blank=True)
    # {"provider_config": id|null, "provider": "offline"|"openai_compatible"|"anthropic",
    #  "model": str, "parameters": {...}, "budget": {"max_steps", "max_tokens", "max_cost"}}
    model_settings = models.JSONField(default=dict, blank=True)
    # [{"package": "acme/crm-notes", "range": "^1.2"} | {"package": ..., "tag": "latest"}]
    skills = models.JSONField(default=list, blank=True)
    # {"<tool>": {"risk": "low|medium|high", "confirmation": "never|high_risk|always"}}
    tool_permissions = models.JSONField(default=dict, blank=True)
    # {"read_scopes": [...], "write_scopes": [...], "retention_days": int|null}
    memory_policy = models.JSONField(default=dict, blank=True)
    # {"<hook point>": [{"name": str, "enabled": bool, "config": {...}}, ...]}
    hooks = models.JSONField(default=dict, blank=True)
    # The template chain that runs after the organization's chain (shared by the template's
    # versions; not content: editing the chain applies to published versions too).
    policy_chain = models.ForeignKey(
        "governance.PolicyChain",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    change_note = models.TextField(blank=True)
    # Set when the version was drafted from uploaded documents (see services.template_generate).
    generated_from = models.JSONField(default=dict, blank=True)

    created_by = models.ForeignKey(
        Member, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    submitted_at = models.DateTimeField(null=True, blank=True)
    published_at = models.DateTimeField(null=True, blank=True)
    published_by = models.ForeignKey(
        Member, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["template", "-number"]
        constraints = [
            models.UniqueConstraint("template", "number", name="templateversion_unique_number")
        ]

    def __str__(self) -> str:
        return f"{self.name} v{self.number}"

    def save(self, *args, **kwargs):
        # A published version never changes: the row in the database is checked, not the
        # in-memory copy, so a stale object cannot sneak an edit past publishing.
        if self.pk is not None:
            stored = (
                TemplateVersion.objects.filter(pk=self.pk).values_list("status", flat=True).first()
            )
            if stored == self.Status.PUBLISHED:
                raise ImmutableVersion(
                    "A published template version cannot be changed; create a new version."
                )
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        if self.status == self.Status.PUBLISHED:
            raise ImmutableVersion("A published template version cannot be deleted.")
        return super().delete(*args, **kwargs)

    def content(self) -> dict:
        return {name: getattr(self, name) for name in self.CONTENT_FIELDS}


class ModelProviderConfig(TenantModel):
    """A model endpoint an organization uses; its API key is encrypted at rest. The one marked
    default serves every template version that names no provider configuration."""

    resource = "template"

    class Kind(models.TextChoices):
        OFFLINE = "offline", _("Offline (deterministic, no network)")
        OPENAI_COMPATIBLE = "openai_compatible", _("OpenAI-compatible")
        ANTHROPIC = "anthropic", _("Anthropic")

    name = models.CharField(max_length=150)
    kind = models.CharField(max_length=24, choices=Kind.choices)
    base_url = models.URLField(max_length=500, blank=True)
    api_key = EncryptedTextField(blank=True)
    default_model = models.CharField(max_length=200, blank=True)
    parameters = models.JSONField(default=dict, blank=True)
    # Prices per million tokens, for cost: {"input": "0.50", "output": "1.50"} (strings: exact).
    prices = models.JSONField(default=dict, blank=True)
    # The total time one model call may take, retries included.
    timeout_seconds = models.PositiveIntegerField(default=60)
    preset = models.CharField(max_length=32, blank=True)  # the endpoint preset it started from
    # What the endpoint listed at its last connection test (the template editor offers them).
    known_models = models.JSONField(default=list, blank=True)
    tested_at = models.DateTimeField(null=True, blank=True)
    is_default = models.BooleanField(default=False)
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint("organization", "name", name="modelproviderconfig_unique_name"),
            models.UniqueConstraint(
                "organization",
                condition=Q(is_default=True),
                name="modelproviderconfig_one_default",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class McpServer(TenantModel):
    """An external MCP server whose tools an organization's agents may call (templates attach
    them through their tool permissions, `mcp__<name>__<tool>`). Its credentials — HTTP headers
    for streamable HTTP, environment variables for a stdio command — are encrypted at rest and
    never read back through the API. `tools` is what the server listed at its last discovery;
    `tool_risks` the admin's risk per tool (default medium, high for a `destructiveHint` tool).
    """

    resource = "connector"

    class Transport(models.TextChoices):
        STREAMABLE_HTTP = "streamable_http", _("Streamable HTTP")
        STDIO = "stdio", _("stdio command")

    name = models.CharField(max_length=32)
    description = models.CharField(max_length=300, blank=True)
    transport = models.CharField(max_length=16, choices=Transport.choices)
    url = models.URLField(max_length=500, blank=True)
    command = models.CharField(max_length=500, blank=True)
    args = models.JSONField(default=list, blank=True)
    # A JSON object: headers (streamable HTTP) or environment variables (stdio).
    credentials = EncryptedTextField(blank=True)
    timeout_seconds = models.PositiveIntegerField(default=30)
    tools = models.JSONField(default=list, blank=True)
    tool_risks = models.JSONField(default=dict, blank=True)
    discovered_at = models.DateTimeField(null=True, blank=True)
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint("organization", "name", name="mcpserver_unique_name"),
        ]

    def __str__(self) -> str:
        return self.name


# --- dispatch -------------------------------------------------------------------------------


def channel_choices() -> list[tuple[str, str]]:
    """Where a deployment's agents talk with their members: the console and each IM platform."""
    return [("console", _("Console chat")), *platform_choices()]


class Deployment(TenantModel):
    """A published template version sent to positions / departments / members and channels."""

    resource = "deployment"

    class Status(models.TextChoices):
        ACTIVE = "active", _("Active")
        ROLLING_OUT = "rolling_out", _("Rolling out")
        STOPPED = "stopped", _("Stopped")

    name = models.CharField(max_length=200)
    template = models.ForeignKey(
        AgentTemplate, on_delete=models.PROTECT, related_name="deployments"
    )
    version = models.ForeignKey(TemplateVersion, on_delete=models.PROTECT, related_name="+")
    positions = models.ManyToManyField(Position, blank=True, related_name="+")
    departments = models.ManyToManyField(Department, blank=True, related_name="+")
    members = models.ManyToManyField(Member, blank=True, related_name="+")
    channels = models.JSONField(default=list, blank=True)  # ["console", "feishu", ...]
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)
    created_by = models.ForeignKey(
        Member, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.name

    @classmethod
    def grant_filter(cls, actor, permission: str) -> Q | None:
        # There is no "deployment.view" permission: those who manage deployments or see every
        # agent read them.
        if permission == "deployment.view" and (
            actor.has("deployment.manage") or actor.has("agent.view")
        ):
            return Q()
        return None


class Rollout(TenantModel):
    """Moving a deployment's agents from one version to another, at once or by department."""

    resource = "deployment"

    class Strategy(models.TextChoices):
        ALL_AT_ONCE = "all", _("All at once")
        BY_DEPARTMENT = "by_department", _("Department by department")

    class Status(models.TextChoices):
        IN_PROGRESS = "in_progress", _("In progress")
        COMPLETED = "completed", _("Completed")
        ROLLED_BACK = "rolled_back", _("Rolled back")

    deployment = models.ForeignKey(Deployment, on_delete=models.CASCADE, related_name="rollouts")
    from_version = models.ForeignKey(TemplateVersion, on_delete=models.PROTECT, related_name="+")
    to_version = models.ForeignKey(TemplateVersion, on_delete=models.PROTECT, related_name="+")
    strategy = models.CharField(max_length=16, choices=Strategy.choices)
    # Department ids in rollout order ([null] stands for members without a department).
    department_order = models.JSONField(default=list, blank=True)
    next_index = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.IN_PROGRESS)
    is_rollback = models.BooleanField(default=False)
    created_by = models.ForeignKey(
        Member, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    @classmethod
    def grant_filter(cls, actor, permission: str) -> Q | None:
        return Deployment.grant_filter(actor, permission)


class Agent(TenantModel):
    """One member's agent from one deployment: its USER.md, memory scope and sessions."""

    resource = "agent"

    class Status(models.TextChoices):
        ACTIVE = "active", _("Active")
        STOPPED = "stopped", _("Stopped")

    deployment = models.ForeignKey(Deployment, on_delete=models.CASCADE, related_name="agents")
    member = models.ForeignKey(Member, on_delete=models.CASCADE, related_name="agents")
    version = models.ForeignKey(TemplateVersion, on_delete=models.PROTECT, related_name="+")
    name = models.CharField(max_length=200)
    user_md = models.TextField(blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)
    stop_reason = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    stopped_at = models.DateTimeField(null=True, blank=True)
    # Usage totals, maintained by the runtime when a run finishes.
    tokens_in = models.BigIntegerField(default=0)
    tokens_out = models.BigIntegerField(default=0)
    cost = models.DecimalField(max_digits=14, decimal_places=6, default=Decimal(0))

    class Meta:
        ordering = ["name", "id"]
        constraints = [models.UniqueConstraint("deployment", "member", name="agent_unique_member")]
        indexes = [models.Index(fields=["organization", "member", "status"])]

    def __str__(self) -> str:
        return f"{self.name} ({self.member_id})"

    @property
    def memory_scope_key(self) -> str:
        return f"agent:{self.pk}"

    @classmethod
    def grant_filter(cls, actor, permission: str) -> Q | None:
        return _own_agents(actor, permission, "member_id")


# --- runtime --------------------------------------------------------------------------------


class Session(TenantModel):
    """A conversation with an agent on one channel."""

    resource = "agent"

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="sessions")
    member = models.ForeignKey(Member, on_delete=models.CASCADE, related_name="+")
    channel = models.CharField(max_length=24, default="console")
    external_id = models.CharField(max_length=191, blank=True)  # IM chat id, trigger id, …
    title = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    last_activity_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-last_activity_at"]
        indexes = [models.Index(fields=["agent", "-last_activity_at"])]

    @classmethod
    def grant_filter(cls, actor, permission: str) -> Q | None:
        return _own_agents(actor, permission, "member_id")


class Run(TenantModel):
    """One task or turn of a session, executed step by step in a Celery worker."""

    resource = "agent"

    class Rating(models.TextChoices):
        SUCCESS = "success", _("Helpful")
        FAILURE = "failure", _("Not helpful")

    class Status(models.TextChoices):
        QUEUED = "queued", _("Queued")
        RUNNING = "running", _("Running")
        WAITING = "waiting", _("Waiting")
        COMPLETED = "completed", _("Completed")
        FAILED = "failed", _("Failed")
        CANCELLED = "cancelled", _("Cancelled")

    TERMINAL = (Status.COMPLETED, Status.FAILED, Status.CANCELLED)

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="runs")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="runs")
    member = models.ForeignKey(Member, on_delete=models.CASCADE, related_name="+")
    version = models.ForeignKey(TemplateVersion, on_delete=models.PROTECT, related_name="+")
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="children"
    )
    root = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    depth = models.PositiveSmallIntegerField(default=0)
    trace_id = models.CharField(max_length=32, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    trigger = models.CharField(max_length=24, default="message")  # message, event, delegation
    input = models.JSONField(default=dict, blank=True)  # {"text": ..., "event": {...}}
    output = models.JSONField(default=dict, blank=True)  # {"text": ...}
    # What this run may do: tools, memory scopes, budget (narrowed by on_spawn for children).
    grants = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    attempts = models.PositiveIntegerField(default=0)
    step_count = models.PositiveIntegerField(default=0)
    tokens_in = models.PositiveIntegerField(default=0)
    tokens_out = models.PositiveIntegerField(default=0)
    tokens_cached = models.PositiveIntegerField(default=0)  # of tokens_in, from a prompt cache
    cost = models.DecimalField(max_digits=14, decimal_places=6, default=Decimal(0))
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # The person's rating of the answer (chat's "Was this helpful?", the runs API, the Hub's
    # run feedback): the signal the Memory Viewer's recall hit rate and the Hub count.
    rating = models.CharField(max_length=8, choices=Rating.choices, blank=True)
    rating_note = models.CharField(max_length=500, blank=True)
    rated_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["organization", "status"]),
            models.Index(fields=["session", "created_at"]),
            models.Index(fields=["root"]),
        ]

    def __str__(self) -> str:
        return f"run {self.pk} ({self.status})"

    @property
    def failed_on_model(self) -> bool:
        """The run failed because its model endpoint did (the chat points admins to Models)."""
        return self.status == self.Status.FAILED and self.error.startswith(MODEL_FAILURE)

    @property
    def is_terminal(self) -> bool:
        return self.status in self.TERMINAL

    @classmethod
    def grant_filter(cls, actor, permission: str) -> Q | None:
        return _own_agents(actor, permission, "member_id")


class SessionSummary(TenantModel):
    """A session's older turns, summarised by the `compact` hook once the history passed the
    template's budget. Each item keeps its provenance label and the runs (turns) it comes
    from; the next model call sees the latest summary plus the turns after `through_run`."""

    resource = "agent"

    class Label(models.TextChoices):
        USER_REQUIREMENT = "user_requirement", _("User requirement")
        MODEL_ASSUMPTION = "model_assumption", _("Model assumption")
        TOOL_FACT = "tool_fact", _("Tool fact")
        SUPERSEDED_PLAN = "superseded_plan", _("Superseded plan")

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="summaries")
    # The run whose after-run hook compacted the history (one summary per run at most).
    run = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="session_summary")
    # The newest turn the summary covers; later turns are sent as they are.
    through_run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    covered_run_ids = models.JSONField(default=list)  # every turn (run id) summarised, in order
    items = models.JSONField(default=list)  # [{"label", "text", "turn_ids": [run ids]}]
    text = models.TextField()  # the rendered summary the model reads
    method = models.CharField(max_length=120)  # "model:<name>" or "rules (offline)"
    tokens_before = models.PositiveIntegerField(default=0)  # the history it replaced
    tokens_after = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["session", "-created_at"]
        indexes = [models.Index(fields=["session", "-created_at"])]

    def __str__(self) -> str:
        return f"summary of session {self.session_id} through run {self.through_run_id}"


class Step(models.Model):
    """One persisted unit of a run: a model call, a tool call, a hook or a wait.

    Written as `started` before its work and `completed` with its output after; a re-executed
    run replays completed steps from `output` and never performs them again.
    """

    class Kind(models.TextChoices):
        MODEL_CALL = "model_call", _("Model call")
        TOOL_CALL = "tool_call", _("Tool call")
        HOOK = "hook", _("Hook")
        WAIT = "wait", _("Wait")

    class Status(models.TextChoices):
        STARTED = "started", _("Started")
        WAITING = "waiting", _("Waiting")
        COMPLETED = "completed", _("Completed")
        FAILED = "failed", _("Failed")

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="steps")
    index = models.PositiveIntegerField()
    kind = models.CharField(max_length=16, choices=Kind.choices)
    name = models.CharField(max_length=100)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.STARTED)
    idempotency_key = models.CharField(max_length=100, unique=True)
    input = models.JSONField(default=dict, blank=True)
    output = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    attempts = models.PositiveIntegerField(default=1)
    started_at = models.DateTimeField(default=timezone.now)
    completed_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    tokens_in = models.PositiveIntegerField(default=0)  # every prompt token, cached included
    tokens_out = models.PositiveIntegerField(default=0)
    # Of tokens_in: read from the provider's prompt cache, and written to it (Anthropic).
    tokens_cached = models.PositiveIntegerField(default=0)
    tokens_cache_write = models.PositiveIntegerField(default=0)
    cost = models.DecimalField(max_digits=14, decimal_places=6, default=Decimal(0))

    class Meta:
        ordering = ["run", "index"]
        constraints = [models.UniqueConstraint("run", "index", name="step_unique_index")]

    def __str__(self) -> str:
        return f"{self.idempotency_key} {self.kind}:{self.name} ({self.status})"


class ToolEffect(TenantModel):
    """The record that a tool call's side effect happened, keyed by its idempotency key.

    For side effects inside the database (an agent message, a task) the effect and
    this record commit together, so a retried call returns the stored result instead.
    """

    resource = "agent"

    key = models.CharField(max_length=100, unique=True)
    tool = models.CharField(max_length=64)
    result = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)


class Wait(TenantModel):
    """A run paused on a confirmation or an external event, until resolved or expired."""

    resource = "agent"

    class Kind(models.TextChoices):
        CONFIRMATION = "confirmation", _("Confirmation")
        EVENT = "event", _("External event")

    class Status(models.TextChoices):
        PENDING = "pending", _("Pending")
        RESOLVED = "resolved", _("Resolved")
        EXPIRED = "expired", _("Expired")
        CANCELLED = "cancelled", _("Cancelled")

    class OnTimeout(models.TextChoices):
        FAIL = "fail", _("Fail the run")
        CONTINUE = "continue", _("Continue with a timeout result")
        CANCEL = "cancel", _("Cancel the run")

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="waits")
    step = models.OneToOneField(Step, on_delete=models.CASCADE, related_name="wait")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    # What resolves it: an event key ("invoice.approved:INV-7"), a confirmation id, …
    key = models.CharField(max_length=191)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    deadline = models.DateTimeField(null=True, blank=True)
    on_timeout = models.CharField(max_length=16, choices=OnTimeout.choices, default=OnTimeout.FAIL)
    details = models.JSONField(default=dict, blank=True)  # what is awaited (tool call, event)
    payload = models.JSONField(default=dict, blank=True)  # what resolved it
    created_at = models.DateTimeField(default=timezone.now)
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["organization", "kind", "key", "status"]),
            models.Index(
                fields=["deadline"], condition=Q(status="pending"), name="wait_pending_deadline"
            ),
        ]

    @classmethod
    def grant_filter(cls, actor, permission: str) -> Q | None:
        return _own_agents(actor, permission, "run__member_id")


class RunEventQuerySet(models.QuerySet):
    """Events written through it are pushed to their sessions' live groups once committed
    (`cadre.agents.live`), so no writer of events can leave a chat without them."""

    def create(self, **kwargs):
        event = super().create(**kwargs)
        self._publish_on_commit([event])
        return event

    def bulk_create(self, objs, *args, **kwargs):
        created = super().bulk_create(objs, *args, **kwargs)
        self._publish_on_commit(created)
        return created

    def _publish_on_commit(self, events) -> None:
        frames = [live.event_frame(event) for event in events if event.pk is not None]
        if frames:
            transaction.on_commit(lambda: live.publish(_by_session(frames)), using=self.db)


def _by_session(frames: list[dict]) -> dict[int, list[dict]]:
    sessions = dict(
        Run.objects.filter(pk__in={frame["run"] for frame in frames}).values_list(
            "pk", "session_id"
        )
    )
    grouped: dict[int, list[dict]] = {}
    for frame in sorted(frames, key=lambda frame: frame["id"]):
        if frame["run"] in sessions:
            grouped.setdefault(sessions[frame["run"]], []).append(frame)
    return grouped


class RunEvent(models.Model):
    """What a run did, in order (by id: the SSE event id), for streaming and the console."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="events")
    kind = models.CharField(max_length=24)  # status, step, delta, reply, error
    data = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    objects = RunEventQuerySet.as_manager()

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["run", "id"])]

    def __str__(self) -> str:
        return f"{self.run_id}:{self.kind}"


# --- what built-in tools write: agents' messages and tasks -----------------------------------


class AgentMessage(TenantModel):
    """A message an agent sends to members or groups (the `im_send` tool); connectors deliver it."""

    resource = "agent"

    class Status(models.TextChoices):
        QUEUED = "queued", _("Queued")
        SENT = "sent", _("Sent")
        FAILED = "failed", _("Failed")

    run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="+")
    recipients = models.JSONField(default=list)  # [{"member": id} | {"group": "..."}]
    text = models.TextField()
    channel = models.CharField(max_length=24, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    reason = models.TextField(blank=True)  # why it failed (no connector, a platform's refusal)
    idempotency_key = models.CharField(max_length=100, unique=True)
    created_at = models.DateTimeField(default=timezone.now)


class AgentTask(TenantModel):
    """A task or reminder an agent created for its member."""

    resource = "agent"

    class Status(models.TextChoices):
        OPEN = "open", pgettext_lazy("status", "Open")
        DONE = "done", _("Done")
        CANCELLED = "cancelled", _("Cancelled")

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="tasks")
    member = models.ForeignKey(Member, on_delete=models.CASCADE, related_name="+")
    run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    title = models.CharField(max_length=300)
    notes = models.TextField(blank=True)
    due_at = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.OPEN)
    idempotency_key = models.CharField(max_length=100, unique=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["due_at", "id"]

    @classmethod
    def grant_filter(cls, actor, permission: str) -> Q | None:
        return _own_agents(actor, permission, "member_id")


# --- event triggers -------------------------------------------------------------------------


class EventTrigger(TenantModel):
    """An inbound endpoint for a business system: signed events start runs."""

    resource = "deployment"

    name = models.CharField(max_length=150)
    deployment = models.ForeignKey(Deployment, on_delete=models.CASCADE, related_name="triggers")
    # The member whose agent handles events, unless the event names one by `member_field`.
    member = models.ForeignKey(
        Member, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    member_field = models.CharField(max_length=64, blank=True)  # e.g. "owner_email"
    secret = EncryptedTextField()
    tolerance_seconds = models.PositiveIntegerField(default=300)
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]

    @classmethod
    def grant_filter(cls, actor, permission: str) -> Q | None:
        return Deployment.grant_filter(actor, permission)


class TriggerEvent(TenantModel):
    """One accepted inbound event (the unique event id makes replays no-ops)."""

    resource = "deployment"

    trigger = models.ForeignKey(EventTrigger, on_delete=models.CASCADE, related_name="events")
    event_id = models.CharField(max_length=191)
    payload = models.JSONField(default=dict)
    run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    received_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-received_at"]
        constraints = [
            models.UniqueConstraint("trigger", "event_id", name="triggerevent_unique_event")
        ]


# --- subscriptions ----------------------------------------------------------------------------


class AgentSubscription(TenantModel):
    """One agent following another's publications (a hot-topic tracker feeding an analyst).

    When the publisher's model calls `publish`, every active subscription whose topics match
    starts a run of the subscriber with the structured message and the memories the publisher
    explicitly shared. A member's own agent may follow a colleague's only once the colleague
    (or an admin) approved: until then the subscription is `pending` and delivers nothing.
    """

    resource = "agent"

    class Status(models.TextChoices):
        PENDING = "pending", _("Awaiting the publisher's approval")
        ACTIVE = "active", _("Active")
        PAUSED = "paused", _("Paused")

    subscriber = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="subscriptions")
    publisher = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="subscribers")
    # Topics delivered; empty: every publication of the publisher.
    topics = models.JSONField(default=list, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)
    # Deliveries in any rolling hour; more are skipped (and said so in the publish result).
    max_per_hour = models.PositiveIntegerField(default=30)
    created_by = models.ForeignKey(
        Member, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    approved_by = models.ForeignKey(
        Member, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Who paused it: a pause by the publisher's side is lifted only by that side or an admin.
    paused_by = models.ForeignKey(
        Member, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                "subscriber", "publisher", name="agentsubscription_unique_pair"
            ),
            models.CheckConstraint(
                condition=~Q(subscriber=models.F("publisher")),
                name="agentsubscription_not_self",
            ),
        ]
        indexes = [models.Index(fields=["publisher", "status"])]

    def __str__(self) -> str:
        return f"{self.subscriber_id} follows {self.publisher_id} ({self.status})"

    @classmethod
    def grant_filter(cls, actor, permission: str) -> Q | None:
        # Members see the subscriptions on either side of their own agents.
        if permission == "agent.view" and actor.has("chat.use") and actor.member is not None:
            return Q(subscriber__member_id=actor.member.pk) | Q(
                publisher__member_id=actor.member.pk
            )
        return None
