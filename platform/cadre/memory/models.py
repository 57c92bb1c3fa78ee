"""Governed long-term memory: items with provenance, their history, embeddings, and the
operational records of which memories each model call was given."""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy
from pgvector.django import VectorField

from cadre.tenancy.models import Member, TenantModel


class Scope(models.TextChoices):
    USER = "user", gettext_lazy("User (one member's personal memory)")
    AGENT = "agent", gettext_lazy("Agent (one agent instance)")
    POSITION = "position", gettext_lazy("Position")
    DEPARTMENT = "department", gettext_lazy("Department")
    ORGANIZATION = "organization", gettext_lazy("Organization (shared)")


class Kind(models.TextChoices):
    FACT = "fact", gettext_lazy("Fact")
    PREFERENCE = "preference", gettext_lazy("Preference")
    REQUIREMENT = "requirement", gettext_lazy("Requirement")
    EXPERIENCE = "experience", gettext_lazy("Experience (task trajectory)")
    TOOL_TRAJECTORY = "tool_trajectory", gettext_lazy("Tool trajectory")
    SUMMARY = "summary", gettext_lazy("Summary")


# Records the system derives from runs and from other memories (a task's experience, a tool
# call, a summary), not anything a person stated: they never merge with, update or supersede
# a statement (nor a statement them), and retrieval leaves them out unless asked for by kind
# (a template's `memory_policy.retrieve_kinds`, a search's `kinds`).
DERIVED_KINDS = (Kind.EXPERIENCE, Kind.TOOL_TRAJECTORY, Kind.SUMMARY)
STATEMENT_KINDS = tuple(kind for kind in Kind if kind not in DERIVED_KINDS)


class SourceKind(models.TextChoices):
    # Ordered by authority: a user statement outranks a tool result, which outranks an inference.
    USER_STATEMENT = "user_statement", gettext_lazy("User statement")
    TOOL_RESULT = "tool_result", gettext_lazy("Tool result")
    MODEL_INFERENCE = "model_inference", gettext_lazy("Model inference")
    SYSTEM = "system", gettext_lazy("System")
    IMPORT = "import", gettext_lazy("Import")


# The scopes many people's agents read: a memory written there by someone who does not govern
# memory (without `memory.manage`) waits as unverified until a holder of `memory.manage`
# accepts it, and no model is sent it meanwhile — otherwise any employee could speak to every
# colleague's agent. Position is among them: every holder of a position (a whole sales force)
# reads its memory. Personal and agent scopes are read by one person's agents only.
GOVERNED_SCOPES = ("organization", "department", "position")


class Verification(models.TextChoices):
    VERIFIED = "verified", gettext_lazy("Verified")
    UNVERIFIED = "unverified", gettext_lazy("Unverified (waiting for review)")
    REJECTED = "rejected", gettext_lazy("Rejected")


def scope_key(scope: str, scope_id: int | None = None) -> str:
    """The single indexed string that names a scope: 'user:12', 'department:5', 'organization'."""
    return scope if scope == Scope.ORGANIZATION else f"{scope}:{scope_id}"


def scope_parts(key: str) -> tuple[str, int | None]:
    """The inverse of scope_key: 'agent:12' -> ('agent', 12), 'organization' -> (..., None)."""
    scope, _, scope_id = key.partition(":")
    if scope not in Scope.values:
        raise ValueError(f"unknown memory scope in {key!r}")
    return scope, int(scope_id) if scope_id else None


class Memory(TenantModel):
    resource = "memory"

    class Status(models.TextChoices):
        ACTIVE = "active", gettext_lazy("Active")
        SUPERSEDED = "superseded", gettext_lazy("Superseded")
        ARCHIVED = "archived", gettext_lazy("Archived")
        DELETED = "deleted", gettext_lazy("Deleted")

    scope = models.CharField(max_length=16, choices=Scope.choices)
    # The owner of the scope: a Member (user), Agent, Position or Department id; null for org.
    scope_id = models.BigIntegerField(null=True, blank=True)
    scope_key = models.CharField(max_length=48)
    # The member the memory is about (who stated it): they see, correct and delete it in
    # whichever scope it landed — their own, or the agent scope of someone else's agent.
    subject = models.ForeignKey(
        Member, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    kind = models.CharField(max_length=20, choices=Kind.choices, default=Kind.FACT)
    content = models.TextField()
    # The sensitive value types (CN_PHONE, EMAIL, …) the content holds, found by the masking
    # engine when it was written: memory keeps what was said (never a session's placeholders),
    # and every path into a model's context masks these values with that session's vault.
    sensitive_types = ArrayField(models.CharField(max_length=40), default=list, blank=True)
    attributes = models.JSONField(default=dict, blank=True)
    # Lexical document: content (and speaker/date context) segmented for full-text search,
    # so Chinese is split into words (jieba) and mixed-language text is searchable.
    search_text = models.TextField(blank=True)

    source_kind = models.CharField(
        max_length=20, choices=SourceKind.choices, default=SourceKind.USER_STATEMENT
    )
    source_ref = models.JSONField(default=dict, blank=True)
    author_type = models.CharField(max_length=16, blank=True)  # member, agent, api_key, system
    author_id = models.CharField(max_length=64, blank=True)
    author_label = models.CharField(max_length=200, blank=True)
    observed_at = models.DateTimeField(default=timezone.now)
    confidence = models.FloatField(default=1.0)

    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)
    # Whether models may be sent it (GOVERNED_SCOPES): only `verified` memories are retrieved
    # for a model; `unverified` ones wait for a holder of `memory.manage`, `rejected` ones were
    # refused. Every other scope is always verified. The database default keeps rows written
    # by any other path (bulk loads, raw SQL) verified, as every memory was before review.
    verification = models.CharField(
        max_length=16,
        choices=Verification.choices,
        default=Verification.VERIFIED,
        db_default=Verification.VERIFIED,
    )
    valid_from = models.DateTimeField(default=timezone.now)
    valid_to = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    retention_policy = models.CharField(max_length=64, blank=True)
    version = models.PositiveIntegerField(default=1)
    content_hash = models.CharField(max_length=64)
    tags = ArrayField(models.CharField(max_length=64), default=list, blank=True)
    conversation_id = models.CharField(max_length=128, blank=True)
    superseded_by = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="supersedes"
    )
    # Every source this item stands for: its own first, then those merged into it by dedup
    # ({"memory_id", "source_kind", "source_ref", "author_type", "author_id", "observed_at"}).
    provenance = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    deleted_at = models.DateTimeField(null=True, blank=True)
    purged_at = models.DateTimeField(null=True, blank=True)
    # The deletion report (ids and counts only, never text): what was removed, which run
    # copies were redacted, the purge task and audit events (services/deletion.py).
    deletion = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["organization", "scope_key", "status"]),
            models.Index(fields=["organization", "content_hash"]),
            models.Index(fields=["organization", "kind"]),
            # Covering: the viewer's counts over a time range (the partial days of a window,
            # unused memories) read the index alone, not the wide rows.
            models.Index(
                fields=["organization", "created_at"],
                name="memory_org_created_idx",
                include=["id", "status", "kind", "scope", "scope_key", "subject"],
            ),
            models.Index(fields=["organization", "subject"], name="memory_subject_idx"),
            models.Index(
                fields=["organization", "scope_key", "content_hash"], name="memory_scope_hash_idx"
            ),
            models.Index(
                fields=["expires_at"],
                condition=models.Q(expires_at__isnull=False),
                name="memory_expires_idx",
            ),
            # The review queue: the few memories waiting for (or refused by) a reviewer.
            models.Index(
                fields=["organization", "scope_key"],
                condition=~models.Q(verification="verified"),
                name="memory_pending_review_idx",
            ),
            GinIndex(fields=["tags"], name="memory_tags_gin"),
            GinIndex(SearchVector("search_text", config="simple"), name="memory_search_gin"),
        ]

    def __str__(self) -> str:
        # Never the content: str() ends up in audit target labels and logs.
        return f"memory {self.pk} ({self.kind}, {self.scope_key})"


class MemoryVersion(models.Model):
    """One entry of a memory's history; never changed after it is written."""

    class Change(models.TextChoices):
        ADDITION = "addition", gettext_lazy("Addition")
        STATE_CHANGE = "state_change", gettext_lazy("State change")
        CORRECTION = "correction", gettext_lazy("Correction")
        MERGE = "merge", gettext_lazy("Merge")
        DELETION = "deletion", gettext_lazy("Deletion")

    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="versions")
    version = models.PositiveIntegerField()
    change = models.CharField(max_length=16, choices=Change.choices)
    old_content = models.TextField(blank=True)
    new_content = models.TextField(blank=True)
    old_attributes = models.JSONField(default=dict, blank=True)
    new_attributes = models.JSONField(default=dict, blank=True)
    old_status = models.CharField(max_length=16, blank=True)
    new_status = models.CharField(max_length=16, blank=True)
    actor_type = models.CharField(max_length=16, blank=True)
    actor_id = models.CharField(max_length=64, blank=True)
    actor_label = models.CharField(max_length=200, blank=True)
    reason = models.TextField(blank=True)
    related_memory = models.ForeignKey(
        Memory, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["memory", "version"]
        indexes = [models.Index(fields=["created_at"], name="memoryversion_created_idx")]
        constraints = [
            models.UniqueConstraint("memory", "version", name="memoryversion_unique_version")
        ]

    def __str__(self) -> str:
        return f"memory {self.memory_id} v{self.version} ({self.change})"


class EmbeddingModel(models.Model):
    """An embedding model known to this instance: its id, provider and vector size. Which one
    an organization's search uses is the organization's (`OrganizationEmbeddingModel`); a
    memory's vector under a model (`MemoryEmbedding`) serves whichever organization owns it."""

    id = models.CharField(max_length=128, primary_key=True)  # e.g. "local/all-MiniLM-L6-v2"
    provider = models.CharField(max_length=32)  # "local", "openai"
    name = models.CharField(max_length=200)
    dimension = models.PositiveIntegerField()
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return self.id


class OrganizationEmbeddingModel(TenantModel):
    """An embedding model as one organization uses it: `building` while a re-embed fills the
    organization's vectors under it, `active` for the organization's search (exactly one),
    `retired` once another took over. Switching is the organization's alone: another
    organization's model, switch and re-embed never change which vectors this one searches."""

    resource = "memory"

    class Status(models.TextChoices):
        BUILDING = "building", gettext_lazy("Building (re-embedding in progress)")
        ACTIVE = "active", gettext_lazy("Active")
        RETIRED = "retired", gettext_lazy("Retired")

    model = models.ForeignKey(EmbeddingModel, on_delete=models.CASCADE, related_name="uses")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.BUILDING)
    created_at = models.DateTimeField(default=timezone.now)
    activated_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint("organization", "model", name="orgembeddingmodel_unique_model"),
            models.UniqueConstraint(
                "organization",
                condition=models.Q(status="active"),
                name="orgembeddingmodel_one_active",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.model_id} in organization {self.organization_id} ({self.status})"


class MemoryEmbedding(models.Model):
    """A memory's vector under one embedding model. One HNSW index per model (partial index
    on `model_id` with a cast to the model's dimension), created when the model is registered."""

    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="embeddings")
    model = models.ForeignKey(EmbeddingModel, on_delete=models.CASCADE, related_name="+")
    embedding = VectorField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint("memory", "model", name="memoryembedding_unique_model")
        ]

    def __str__(self) -> str:
        return f"memory {self.memory_id} under {self.model_id}"


class ContextRecord(TenantModel):
    """What one model call was given: the memories (ids, versions, ranks, scores, tokens) and
    skill versions sent, and those withheld by policy or dropped by the context budget.

    The runtime writes one `model_call` record per model call. A memory search made through
    the API on behalf of a caller's model call writes a `search` record of the hits returned.
    """

    resource = "memory"

    class Kind(models.TextChoices):
        MODEL_CALL = "model_call", gettext_lazy("Model call (written by the runtime)")
        SEARCH = "search", gettext_lazy("Search on behalf of a model call")

    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.SEARCH)
    run_id = models.CharField(max_length=64, blank=True)
    # For a model_call record: the index of the run's model-call step.
    step_id = models.CharField(max_length=64, blank=True)
    trace_id = models.CharField(max_length=32, blank=True)
    actor_type = models.CharField(max_length=16, blank=True)
    actor_id = models.CharField(max_length=64, blank=True)
    query = models.TextField(blank=True)
    total_tokens = models.PositiveIntegerField(default=0)
    # [{"name", "version", "part": "description" | "body", "status": "sent" | "dropped"}]
    skills = models.JSONField(default=list, blank=True)
    # The candidates the ranking considered but diversity (MMR) passed over for this call:
    # [{"id", "version", "score", "components", "reason"}] (ids and numbers, never text).
    # None: not recorded (a record written before this was kept).
    passed_over = models.JSONField(null=True, blank=True, default=None)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["organization", "run_id"]),
            models.Index(fields=["organization", "created_at"], name="contextrecord_created_idx"),
        ]

    def __str__(self) -> str:
        return f"context {self.pk} (run {self.run_id}, step {self.step_id})"


class ContextRecordItem(models.Model):
    class Status(models.TextChoices):
        SENT = "sent", gettext_lazy("Sent to the model")
        WITHHELD = "withheld", gettext_lazy("Withheld by policy")
        DROPPED = "dropped", gettext_lazy("Dropped by the context budget")
        # Records written before per-call records: a search hit, not known to have been sent.
        RETURNED = "returned", gettext_lazy("Returned by the search (not known to have been sent)")

    class Source(models.TextChoices):
        RETRIEVAL = "retrieval", gettext_lazy("Retrieved for the input")
        SHARED = "shared", gettext_lazy("Shared by the delegating run")
        TOOL = "tool", gettext_lazy("Found by the memory_search tool")
        SEARCH = "search", gettext_lazy("Search through the API")

    context = models.ForeignKey(ContextRecord, on_delete=models.CASCADE, related_name="items")
    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="context_items")
    memory_version = models.PositiveIntegerField()
    rank = models.PositiveIntegerField()
    score = models.FloatField()
    tokens = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.SENT)
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.SEARCH)
    reason = models.CharField(max_length=500, blank=True)
    # The ranking's parts (lexical/semantic ranks and scores, boosts) for this hit.
    components = models.JSONField(default=dict, blank=True)
    # The memory's reader columns and kind, copied by PostgreSQL triggers (migration 0013) at
    # insert and whenever the memory changes them, so a figure over the items narrows them
    # to what a viewer may read without joining the memories. Never written by Python.
    scope = models.CharField(max_length=16, blank=True, editable=False)
    scope_key = models.CharField(max_length=48, blank=True, editable=False)
    subject_id = models.BigIntegerField(default=0, editable=False)
    kind = models.CharField(max_length=20, blank=True, editable=False)

    class Meta:
        ordering = ["context", "rank"]

    def __str__(self) -> str:
        return f"#{self.rank}: memory {self.memory_id} v{self.memory_version} ({self.status})"


class MemoryUsageDay(models.Model):
    """How often one memory was in a context record per UTC day of the record: every item
    (`retrieved`, any status) and items sent to a runtime model call (`sent`), with the last
    moments. The heatmap reads it instead of the items.

    Kept by PostgreSQL triggers on memory_contextrecorditem (migration 0008): an insert adds
    its items' counts, a delete or update recomputes the touched (memory, day) rows from the
    items left, so ORM writes, bulk writes and cascades all keep it exact; a memory's change of
    reader columns, kind or status is copied to its rows (migration 0010). No foreign-key
    constraints: a memory's hard delete removes its items, and with them these rows."""

    organization = models.ForeignKey(
        "tenancy.Organization", on_delete=models.DO_NOTHING, db_constraint=False, related_name="+"
    )
    memory = models.ForeignKey(
        Memory, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+"
    )
    day = models.DateField()
    retrieved = models.PositiveIntegerField(default=0)
    sent = models.PositiveIntegerField(default=0)
    last_used = models.DateTimeField()
    last_sent = models.DateTimeField(null=True, blank=True)
    # The memory's reader columns, kind and status (copied by the triggers, and kept when the
    # memory changes), so the heatmap narrows and groups these rows without joining memories.
    scope = models.CharField(max_length=16, blank=True)
    scope_key = models.CharField(max_length=48, blank=True)
    subject_id = models.BigIntegerField(default=0)
    kind = models.CharField(max_length=20, blank=True)
    memory_status = models.CharField(max_length=16, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["memory", "day"], name="memoryusageday_unique_day")
        ]
        indexes = [models.Index(fields=["organization", "day"], name="memoryusageday_org_day")]

    def __str__(self) -> str:
        return f"memory {self.memory_id} on {self.day}: {self.retrieved}/{self.sent}"


class MemoryLastSent(models.Model):
    """One row per memory: its reader columns, kind, status and creation time, and when it was
    last sent to a runtime model call (null: never). The heatmap counts the memories no model
    call used for N days from these narrow rows instead of the memories joined to their use.

    Kept by PostgreSQL triggers (migration 0014): a memory's insert adds its row, a change of
    the copied columns updates it, a delete removes it; `last_sent` is the newest of the
    memory's MemoryUsageDay rows, taken again whenever those change (so every write that
    keeps the usage rollup exact keeps this too). No foreign-key constraints."""

    memory = models.OneToOneField(
        Memory,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        primary_key=True,
        related_name="+",
    )
    organization = models.ForeignKey(
        "tenancy.Organization", on_delete=models.DO_NOTHING, db_constraint=False, related_name="+"
    )
    scope = models.CharField(max_length=16)
    scope_key = models.CharField(max_length=48)
    subject_id = models.BigIntegerField(default=0)
    kind = models.CharField(max_length=20)
    status = models.CharField(max_length=16)
    created_at = models.DateTimeField()
    last_sent = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(
                fields=["organization", "status", "created_at"],
                include=("scope", "scope_key", "subject_id", "kind", "last_sent"),
                name="memory_last_sent_idx",
            )
        ]

    def __str__(self) -> str:
        return f"memory {self.memory_id}: last sent {self.last_sent}"


class MemoryActivityDay(models.Model):
    """How many memories were added, and history events written, per UTC day and the columns
    that decide who may read a memory (scope, scope key, subject) and its kind. The timeline
    and the quality dashboard sum these rows for whole days instead of counting memories and
    versions; the partial days at a window's edges are counted from the rows themselves.

    `event` is one of EVENTS. By the memory's creation day: `created` (every memory, deleted
    ones too), `created_deleted` (of those, now deleted), `created_corrected` (of those, with a
    correction in their history). By the version's day, a version's change as the timeline and
    the dashboard tell it apart: `addition`, `correction`, `deletion`, `merge_exact`,
    `merge_near`, `merge` (another merge), `superseded`, `updated`.

    Kept by PostgreSQL triggers on memory_memory and memory_memoryversion (migration 0009):
    inserts add their counts; an update of a memory's reader columns, kind, status or creation
    time, a correction, and any delete recount the days they touch from the rows left, so bulk
    writes and cascades keep it exact. `subject_id` is 0 for a memory about nobody."""

    EVENTS = (
        "created",
        "created_deleted",
        "created_corrected",
        "addition",
        "correction",
        "deletion",
        "merge_exact",
        "merge_near",
        "merge",
        "superseded",
        "updated",
    )

    organization = models.ForeignKey(
        "tenancy.Organization", on_delete=models.DO_NOTHING, db_constraint=False, related_name="+"
    )
    day = models.DateField()
    scope = models.CharField(max_length=16, choices=Scope.choices)
    scope_key = models.CharField(max_length=48)
    subject_id = models.BigIntegerField(default=0)
    kind = models.CharField(max_length=20)
    event = models.CharField(max_length=20)
    count = models.IntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "day", "scope_key", "subject_id", "kind", "event"],
                name="memoryactivityday_unique",
            )
        ]
        indexes = [
            # The rows of the kinds of scope a reader is not granted whole, by day.
            models.Index(
                fields=["organization", "scope", "day"],
                include=("scope_key", "subject_id", "kind", "event", "count"),
                name="memory_activity_scope_day_idx",
            )
        ]

    def __str__(self) -> str:
        return f"{self.day} {self.scope_key} {self.kind} {self.event}: {self.count}"


class MemoryActivityScopeDay(models.Model):
    """MemoryActivityDay summed over every scope key of one kind of scope (user, agent, …):
    what a reader granted a whole kind of scope (an admin's reach into every personal or agent
    scope) sums instead of one row per scope key. Kept from MemoryActivityDay by a trigger on
    it (migration 0012), so it always equals that table grouped by scope."""

    organization = models.ForeignKey(
        "tenancy.Organization", on_delete=models.DO_NOTHING, db_constraint=False, related_name="+"
    )
    day = models.DateField()
    scope = models.CharField(max_length=16, choices=Scope.choices)
    kind = models.CharField(max_length=20)
    event = models.CharField(max_length=20)
    count = models.IntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "scope", "day", "kind", "event"],
                name="memoryactivityscopeday_unique",
            )
        ]

    def __str__(self) -> str:
        return f"{self.day} {self.scope} {self.kind} {self.event}: {self.count}"


class MemoryTask(TenantModel):
    """Visible status of one piece of asynchronous memory work (a Celery task)."""

    resource = "memory"

    class Kind(models.TextChoices):
        ENRICH = "enrich", gettext_lazy("Enrich (embed)")
        DEDUP = "dedup", gettext_lazy("Dedup")
        ORGANIZE = "organize", gettext_lazy("Organize")
        PURGE = "purge", gettext_lazy("Purge")
        REEMBED = "reembed", gettext_lazy("Re-embed")
        MAP = "map", gettext_lazy("Vector map")

    class Status(models.TextChoices):
        WAITING = "waiting", gettext_lazy("Waiting")
        IN_PROGRESS = "in_progress", gettext_lazy("In progress")
        COMPLETED = "completed", gettext_lazy("Completed")
        FAILED = "failed", gettext_lazy("Failed")

    kind = models.CharField(max_length=16, choices=Kind.choices)
    memory = models.ForeignKey(
        Memory, null=True, blank=True, on_delete=models.SET_NULL, related_name="tasks"
    )
    idempotency_key = models.CharField(max_length=191, unique=True)
    params = models.JSONField(default=dict, blank=True)  # ids and options, never content
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.WAITING)
    attempts = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    result = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["organization", "status"])]

    def __str__(self) -> str:
        return f"{self.kind} task {self.pk} ({self.status})"


class MemoryMap(TenantModel):
    """A 2-D projection of one selection's embeddings (scopes, kinds) under one embedding
    model, computed in the background and kept with its parameters; the newest ready map of
    a selection is what the viewer serves, older ones give association strength's trend."""

    resource = "memory"

    class Status(models.TextChoices):
        COMPUTING = "computing", gettext_lazy("Computing")
        READY = "ready", gettext_lazy("Ready")
        FAILED = "failed", gettext_lazy("Failed")

    # SHA-256 of (scope keys, kinds, model, method, sample, clusters): one selection.
    selection = models.CharField(max_length=64)
    scope_keys = models.JSONField(default=list)
    kinds = models.JSONField(default=list, blank=True)
    model = models.ForeignKey(EmbeddingModel, on_delete=models.CASCADE, related_name="+")
    # {"method": "pca", "sample": 20000, "clusters": 8, "seed": 0}
    params = models.JSONField(default=dict)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.COMPUTING)
    total = models.PositiveIntegerField(default=0)  # memories with a vector in the selection
    sample_size = models.PositiveIntegerField(default=0)
    # [[memory id, x, y, cluster], ...] — ids and numbers only, never text. Maps computed
    # before `points_data` only; newer ones leave it empty.
    points = models.JSONField(default=list, blank=True)
    # The points packed (vector_map.pack_points): int64 ids, float32 x and y, int16 clusters,
    # one array after the other — 18 bytes a point rather than about 40 of JSON.
    points_data = models.BinaryField(default=b"", blank=True)
    # [{"id", "label", "terms", "size", "x", "y"}]
    clusters = models.JSONField(default=list, blank=True)
    # The projection (PCA mean and two components) so a query can be placed on the map.
    projection = models.JSONField(default=dict, blank=True)
    association_strength = models.FloatField(null=True, blank=True)
    compute_ms = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    computed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["organization", "selection", "status"])]

    def __str__(self) -> str:
        return f"map {self.pk} ({self.status}, {self.sample_size} points)"
