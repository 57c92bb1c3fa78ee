"""Hub models: namespaces, packages (`@namespace/name`), immutable versions, files, dist-tags.

File contents live in `SkillBlob`, one row per distinct SHA-256 in PostgreSQL: bundles are small
(≤ 8 MiB), most files repeat between versions (stored once), a version and its bytes commit or
roll back together (no orphans on disk after a failed publish), and one database backup holds
the whole registry. Blobs are never served directly — only through a visible version's files.
"""

from __future__ import annotations

from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVectorField
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy
from pgvector.django import VectorField

from cadre.tenancy.models import Department, Member, TenantModel, department_subtree_ids


def _department_scope(actor, permission: str, field: str) -> models.Q | None:
    roots = actor.granted_ids(permission, Department)
    if not roots:
        return None
    return models.Q(**{f"{field}__in": department_subtree_ids(actor.organization.pk, roots)})


class HubNamespace(TenantModel):
    """`@handle` under which an organization (or one of its teams) publishes; unique on the
    instance, because instance-visible skills from every organization share one name space."""

    resource = "skill"

    handle = models.SlugField(max_length=64, unique=True)
    display_name = models.CharField(max_length=200, blank=True)
    department = models.ForeignKey(
        Department, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["handle"]

    def __str__(self) -> str:
        return f"@{self.handle}"


class SkillPackage(TenantModel):
    resource = "skill"

    class Visibility(models.TextChoices):
        DEPARTMENT = "department", gettext_lazy("A department and its sub-departments")
        ORGANIZATION = "organization", gettext_lazy("The whole organization")
        INSTANCE = "instance", gettext_lazy("Every organization on this instance")

    namespace = models.ForeignKey(HubNamespace, on_delete=models.PROTECT, related_name="packages")
    name = models.CharField(max_length=64)
    display_name = models.CharField(max_length=200, blank=True)
    summary = models.TextField(blank=True)  # the latest published description
    owner = models.ForeignKey(Member, on_delete=models.PROTECT, related_name="+")
    visibility = models.CharField(
        max_length=16, choices=Visibility.choices, default=Visibility.ORGANIZATION
    )
    department = models.ForeignKey(
        Department, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    badges = models.JSONField(default=list, blank=True)
    deprecated = models.BooleanField(default=False)
    deprecation_message = models.TextField(blank=True)
    search_text = models.TextField(blank=True)  # the body of `latest` (weight C in search)
    title_vector = SearchVectorField(null=True, blank=True)  # name (A) + description (B)
    search_vector = SearchVectorField(null=True, blank=True)  # title + body (C)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["namespace__handle", "name"]
        constraints = [
            models.UniqueConstraint("namespace", "name", name="hub_package_unique_name"),
            models.CheckConstraint(
                condition=~models.Q(visibility="department") | models.Q(department__isnull=False),
                name="hub_package_department_visibility_needs_department",
            ),
        ]
        indexes = [
            models.Index(fields=["organization", "visibility"]),
            models.Index(fields=["name"]),
            GinIndex(name="hub_package_name_trgm", fields=["name"], opclasses=["gin_trgm_ops"]),
            GinIndex(name="hub_package_title", fields=["title_vector"]),
            GinIndex(name="hub_package_search", fields=["search_vector"]),
            models.Index(fields=["-updated_at"], name="hub_package_updated"),
        ]

    def __str__(self) -> str:
        return self.full_name

    @property
    def full_name(self) -> str:
        return f"@{self.namespace.handle}/{self.name}"

    @classmethod
    def grant_filter(cls, actor, permission: str) -> models.Q | None:
        # skill.review granted on a department reaches that subtree's department packages.
        return _department_scope(actor, permission, "department_id")


class SkillVersion(models.Model):
    class Status(models.TextChoices):
        DRAFT = "draft", gettext_lazy("Draft")
        PENDING_REVIEW = "pending_review", gettext_lazy("Pending review")
        PUBLISHED = "published", gettext_lazy("Published")
        REJECTED = "rejected", gettext_lazy("Rejected")

    class Verdict(models.TextChoices):
        PASS = "pass", gettext_lazy("Pass")
        REVIEW = "review", gettext_lazy("Needs review")
        WARN = "warn", gettext_lazy("Warning")
        BLOCK = "block", gettext_lazy("Blocked")

    package = models.ForeignKey(SkillPackage, on_delete=models.CASCADE, related_name="versions")
    version = models.CharField(max_length=128)
    major = models.PositiveIntegerField()
    minor = models.PositiveIntegerField()
    patch = models.PositiveIntegerField()
    prerelease = models.CharField(max_length=128, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING_REVIEW)
    # Public text its publisher set (an upload's, a skill candidate's explicit changelog); a
    # reviewer's comment is internal and never copied here (`review_note` says who reviewed).
    changelog = models.TextField(blank=True)
    fingerprint = models.CharField(max_length=64)
    frontmatter = models.JSONField(default=dict)
    body = models.TextField(blank=True)
    validation = models.JSONField(default=list, blank=True)  # warnings kept for reviewers
    scan_verdict = models.CharField(max_length=8, choices=Verdict.choices, default=Verdict.PASS)
    scan_findings = models.JSONField(default=list, blank=True)
    total_bytes = models.PositiveIntegerField(default=0)
    signature = models.TextField(blank=True)
    key_id = models.CharField(max_length=64, blank=True)
    yanked = models.BooleanField(default=False)
    yanked_reason = models.TextField(blank=True)
    yanked_at = models.DateTimeField(null=True, blank=True)
    review_note = models.TextField(blank=True)
    reviewed_by = models.ForeignKey(
        Member, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    created_by = models.ForeignKey(Member, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    published_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["package", "-major", "-minor", "-patch"]
        constraints = [
            models.UniqueConstraint("package", "version", name="hub_version_unique"),
        ]
        indexes = [models.Index(fields=["package", "status"])]

    def __str__(self) -> str:
        return f"{self.package}@{self.version}"

    @property
    def organization(self):
        return self.package.organization

    @property
    def organization_id(self):
        return self.package.organization_id

    @property
    def installable(self) -> bool:
        return self.status == self.Status.PUBLISHED


class UsedVersion(models.Model):
    """Every version number a package has used; kept when the version is removed."""

    package = models.ForeignKey(SkillPackage, on_delete=models.CASCADE, related_name="+")
    version = models.CharField(max_length=128)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint("package", "version", name="hub_used_version_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.package_id}@{self.version}"


class SkillBlob(models.Model):
    sha256 = models.CharField(max_length=64, primary_key=True)
    size = models.PositiveIntegerField()
    content = models.BinaryField()
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return self.sha256


class SkillFile(models.Model):
    version = models.ForeignKey(SkillVersion, on_delete=models.CASCADE, related_name="files")
    path = models.CharField(max_length=255)
    size = models.PositiveIntegerField()
    sha256 = models.CharField(max_length=64)
    content_type = models.CharField(max_length=128)
    blob = models.ForeignKey(SkillBlob, on_delete=models.PROTECT, related_name="+")

    class Meta:
        ordering = ["path"]
        constraints = [
            models.UniqueConstraint("version", "path", name="hub_file_unique_path"),
        ]

    def __str__(self) -> str:
        return self.path


class DistTag(models.Model):
    """A movable name for a version (`latest`, `beta`, `stable`); moves are audited.

    `latest` follows the highest published, non-yanked, non-prerelease version until someone
    sets it by hand (`pinned`); removing the tag hands it back to the automatic rule.
    """

    package = models.ForeignKey(SkillPackage, on_delete=models.CASCADE, related_name="tags")
    tag = models.CharField(max_length=64)
    version = models.ForeignKey(SkillVersion, on_delete=models.CASCADE, related_name="tags")
    pinned = models.BooleanField(default=False)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["tag"]
        constraints = [models.UniqueConstraint("package", "tag", name="hub_tag_unique")]

    def __str__(self) -> str:
        return f"{self.package}:{self.tag}"


class SkillDailyStat(models.Model):
    """Per version and UTC day: downloads, installs and reported run outcomes."""

    package = models.ForeignKey(SkillPackage, on_delete=models.CASCADE, related_name="daily")
    version = models.ForeignKey(SkillVersion, on_delete=models.CASCADE, related_name="daily")
    day = models.DateField()
    downloads = models.PositiveIntegerField(default=0)
    installs = models.PositiveIntegerField(default=0)
    successes = models.PositiveIntegerField(default=0)
    failures = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint("version", "day", name="hub_daily_unique")]
        indexes = [models.Index(fields=["package", "day"])]

    def __str__(self) -> str:
        return f"{self.version_id} {self.day}"


class UploadTicket(TenantModel):
    """One file uploaded through ClawHub's ticket flow, waiting for `POST /api/v1/skills`."""

    resource = "skill"

    ticket = models.CharField(max_length=64, unique=True)
    path = models.CharField(max_length=255)
    size = models.PositiveIntegerField()
    sha256 = models.CharField(max_length=64)
    content_type = models.CharField(max_length=128, blank=True)
    content = models.BinaryField(null=True)
    created_by = models.ForeignKey(Member, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    uploaded_at = models.DateTimeField(null=True, blank=True)


class SkillEmbedding(models.Model):
    """A package's `latest` text under one embedding model (the memory layer's models), for
    the semantic stage of search. Re-embedded when `latest` changes (text_sha256 differs)."""

    package = models.ForeignKey(SkillPackage, on_delete=models.CASCADE, related_name="+")
    model = models.ForeignKey("memory.EmbeddingModel", on_delete=models.CASCADE, related_name="+")
    embedding = VectorField()
    text_sha256 = models.CharField(max_length=64)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint("package", "model", name="hub_embedding_unique_model")
        ]

    def __str__(self) -> str:
        return f"{self.package_id} under {self.model_id}"


# --- distribution and outcomes -----------------------------------------------------------------


class SkillInstall(TenantModel):
    """One skill installed on one agent: what was asked for (range or dist-tag), the update
    policy, the version in use, and an update offered but not applied (manual policy)."""

    resource = "agent"

    class Policy(models.TextChoices):
        AUTO = "auto", gettext_lazy("Auto: patches apply, minor and major updates are offered")
        MANUAL = "manual", gettext_lazy("Manual: every update is offered")
        PINNED = "pinned", gettext_lazy("Pinned: never moves")

    agent = models.ForeignKey("agents.Agent", on_delete=models.CASCADE, related_name="+")
    package = models.ForeignKey(SkillPackage, on_delete=models.CASCADE, related_name="installs")
    requested = models.CharField(max_length=256)  # the range or dist-tag asked for
    policy = models.CharField(max_length=8, choices=Policy.choices, default=Policy.AUTO)
    version = models.ForeignKey(
        SkillVersion, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    pending_version = models.ForeignKey(
        SkillVersion, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    error = models.CharField(max_length=300, blank=True)  # why nothing resolves, if so
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["agent_id", "package_id"]
        constraints = [
            models.UniqueConstraint("agent", "package", name="hub_install_unique_package")
        ]
        indexes = [models.Index(fields=["package", "version"])]

    def __str__(self) -> str:
        return f"{self.package_id}@{self.version_id} on agent {self.agent_id}"

    @classmethod
    def grant_filter(cls, actor, permission: str) -> models.Q | None:
        # Employees see the installs of their own agents (as they see the agents).
        if permission == "agent.view" and actor.has("chat.use") and actor.member is not None:
            return models.Q(agent__member_id=actor.member.pk)
        return None


class SkillInstallEvent(models.Model):
    """An install's history: each resolve, update, offer, apply and rollback."""

    class Action(models.TextChoices):
        INSTALL = "install", gettext_lazy("Installed")
        UPDATE = "update", gettext_lazy("Updated automatically")
        OFFER = "offer", gettext_lazy("Update offered")
        APPLY = "apply", gettext_lazy("Offered update applied")
        ROLLBACK = "rollback", gettext_lazy("Rolled back")
        CHANGE = "change", gettext_lazy("Requested range or policy changed")
        REMOVE = "remove", gettext_lazy("Removed")

    install = models.ForeignKey(SkillInstall, on_delete=models.CASCADE, related_name="events")
    action = models.CharField(max_length=16, choices=Action.choices)
    from_version = models.ForeignKey(
        SkillVersion, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    to_version = models.ForeignKey(
        SkillVersion, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_label = models.CharField(max_length=200, blank=True)
    reason = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.install_id} {self.action}"


class SkillUsage(TenantModel):
    """A skill version in one run's context (or skipped, with the reason), and the outcome:
    the user's feedback when given, else the run's own status."""

    resource = "agent"

    class Outcome(models.TextChoices):
        SUCCESS = "success", gettext_lazy("Success")
        FAILURE = "failure", gettext_lazy("Failure")

    run = models.ForeignKey("agents.Run", on_delete=models.CASCADE, related_name="+")
    agent = models.ForeignKey("agents.Agent", on_delete=models.CASCADE, related_name="+")
    package = models.ForeignKey(SkillPackage, on_delete=models.CASCADE, related_name="usages")
    version = models.ForeignKey(SkillVersion, on_delete=models.CASCADE, related_name="usages")
    loaded = models.BooleanField(default=True)  # False: skipped (see skip_reason)
    body_loaded = models.BooleanField(default=False)
    relevance = models.CharField(max_length=16, blank=True)  # requested, lexical, semantic
    skip_reason = models.CharField(max_length=300, blank=True)
    feedback = models.CharField(max_length=8, choices=Outcome.choices, blank=True)
    feedback_note = models.CharField(max_length=500, blank=True)
    feedback_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [models.UniqueConstraint("run", "version", name="hub_usage_unique_run")]
        indexes = [models.Index(fields=["version", "loaded"])]

    def __str__(self) -> str:
        return f"run {self.run_id}: {self.version_id}"

    @classmethod
    def grant_filter(cls, actor, permission: str) -> models.Q | None:
        if permission == "agent.view" and actor.has("chat.use") and actor.member is not None:
            return models.Q(agent__member_id=actor.member.pk)
        return None
