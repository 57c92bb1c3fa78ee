"""Skill lifecycle models: proposals from conversations, candidates with evidence and scores,
review stages per organization, review decisions, and the record of memory distillations.

A candidate's files are kept as base64 in JSON (bundles are at most 8 MiB, and a candidate and
its revisions commit or roll back together with its review); the Hub stores the published
bytes once the final stage approves.
"""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy

from cadre.tenancy.models import Department, Member, TenantModel, department_subtree_ids


class ReviewStage(TenantModel):
    """One stage of an organization's skill review, in `position` order.

    A member may decide at the stage when they hold one of `roles`, or hold `permission` on
    the candidate (organization-wide, or through a grant on the candidate's department).
    The requester does not decide at a stage unless `allow_requester` is set, or no other
    member could decide it: then they may, as sole reviewer, with a justification.
    """

    resource = "skill"

    position = models.PositiveSmallIntegerField()
    name = models.CharField(max_length=100)
    roles = ArrayField(models.CharField(max_length=32), default=list, blank=True)
    permission = models.CharField(max_length=64, blank=True)
    allow_requester = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["organization", "position"]
        constraints = [
            models.UniqueConstraint("organization", "position", name="skills_stage_unique_position")
        ]

    def __str__(self) -> str:
        return self.name

    def as_rule(self) -> dict:
        return {
            "name": self.name,
            "roles": list(self.roles),
            "permission": self.permission,
            "allow_requester": self.allow_requester,
        }


class SkillCandidate(TenantModel):
    """A skill on its way to the Hub: files, where it came from, its score and its review."""

    resource = "skill"

    class Source(models.TextChoices):
        BACKFLOW = "backflow", gettext_lazy("Conversation correction")
        MEMORY = "memory", gettext_lazy("Distilled from memory")
        UPLOAD = "upload", gettext_lazy("Uploaded by an author")

    class Status(models.TextChoices):
        IN_REVIEW = "in_review", gettext_lazy("In review")
        CHANGES_REQUESTED = "changes_requested", gettext_lazy("Changes requested")
        REJECTED = "rejected", gettext_lazy("Rejected")
        PUBLISHED = "published", gettext_lazy("Published")

    source = models.CharField(max_length=16, choices=Source.choices)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.IN_REVIEW)
    name = models.CharField(max_length=64)
    description = models.TextField(blank=True)
    requested_by = models.ForeignKey(
        Member, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    department = models.ForeignKey(
        Department, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    package = models.ForeignKey(
        "hub.SkillPackage", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    base_version = models.ForeignKey(
        "hub.SkillVersion", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # The organization's stages when the candidate was (re)submitted: a change of the
    # configuration does not move a candidate that is already under review.
    stages = models.JSONField(default=list, blank=True)
    stage_index = models.PositiveSmallIntegerField(default=0)
    revision = models.PositiveIntegerField(default=1)
    files = models.JSONField(default=dict)  # path -> base64 content (the current revision)
    fingerprint = models.CharField(max_length=64, blank=True)
    # The public changelog of the version it becomes, set explicitly by the author or a
    # reviewer; a reviewer's comment stays on the decision (internal), never copied here.
    changelog = models.TextField(blank=True, db_default="")
    validation = models.JSONField(default=dict, blank=True)
    scan_verdict = models.CharField(max_length=8, default="pass")
    scan_findings = models.JSONField(default=list, blank=True)
    score = models.FloatField(null=True, blank=True)
    score_components = models.JSONField(default=list, blank=True)
    published_version = models.ForeignKey(
        "hub.SkillVersion", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-updated_at", "-pk"]
        indexes = [models.Index(fields=["organization", "status"])]

    def __str__(self) -> str:
        return f"{self.name} (candidate {self.pk})"

    @classmethod
    def grant_filter(cls, actor, permission: str) -> models.Q | None:
        # skill.review granted on a department reaches the candidates of its subtree.
        roots = actor.granted_ids(permission, Department)
        if not roots:
            return None
        return models.Q(department_id__in=department_subtree_ids(actor.organization.pk, roots))

    @property
    def current_stage(self) -> dict | None:
        if self.status != self.Status.IN_REVIEW or self.stage_index >= len(self.stages):
            return None
        return self.stages[self.stage_index]


class CandidateRevision(models.Model):
    """Every submitted state of a candidate's files (the first, and each resubmission)."""

    candidate = models.ForeignKey(
        SkillCandidate, on_delete=models.CASCADE, related_name="revisions"
    )
    number = models.PositiveIntegerField()
    files = models.JSONField(default=dict)
    fingerprint = models.CharField(max_length=64)
    note = models.TextField(blank=True)
    created_by = models.ForeignKey(
        Member, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["candidate", "number"]
        constraints = [
            models.UniqueConstraint("candidate", "number", name="skills_revision_unique")
        ]

    def __str__(self) -> str:
        return f"{self.candidate_id} r{self.number}"


class SkillEvidence(models.Model):
    """Why a candidate exists: a conversation, trajectories, a counterfactual check, an upload."""

    class Kind(models.TextChoices):
        CONVERSATION = "conversation", gettext_lazy("Conversation")
        TRAJECTORIES = "trajectories", gettext_lazy("Task trajectories")
        COUNTERFACTUAL = "counterfactual", gettext_lazy("Counterfactual check")
        UPLOAD = "upload", gettext_lazy("Upload")

    candidate = models.ForeignKey(SkillCandidate, on_delete=models.CASCADE, related_name="evidence")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    summary = models.TextField(blank=True)
    data = models.JSONField(default=dict, blank=True)
    weight = models.PositiveIntegerField(default=1)  # how many cases this evidence stands for
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["candidate", "pk"]

    def __str__(self) -> str:
        return f"{self.kind} for {self.candidate_id}"


class ReviewDecision(models.Model):
    class Decision(models.TextChoices):
        APPROVE = "approve", gettext_lazy("Approved")
        REJECT = "reject", gettext_lazy("Rejected")
        REQUEST_CHANGES = "request_changes", gettext_lazy("Changes requested")
        RESUBMIT = "resubmit", gettext_lazy("Resubmitted")
        EDIT = "edit", gettext_lazy("Edited in review")

    candidate = models.ForeignKey(
        SkillCandidate, on_delete=models.CASCADE, related_name="decisions"
    )
    revision = models.PositiveIntegerField()
    stage_index = models.PositiveSmallIntegerField()
    stage_name = models.CharField(max_length=100, blank=True)
    decision = models.CharField(max_length=16, choices=Decision.choices)
    comment = models.TextField(blank=True)
    decided_by = models.ForeignKey(
        Member, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # The requester decided their own candidate because no other member could decide the
    # stage; `justification` is why they did (required then, shown on the Hub version page).
    sole_reviewer = models.BooleanField(default=False)
    justification = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["candidate", "pk"]

    def __str__(self) -> str:
        return f"{self.decision} on {self.candidate_id}"


class SkillProposal(TenantModel):
    """A skill change drafted from an employee's correction, waiting for them to confirm."""

    resource = "skill"

    class Status(models.TextChoices):
        PENDING = "pending", gettext_lazy("Waiting for confirmation")
        CONFIRMED = "confirmed", gettext_lazy("Confirmed")
        DISMISSED = "dismissed", gettext_lazy("Dismissed")

    class Kind(models.TextChoices):
        NEW_SKILL = "new_skill", gettext_lazy("New skill")
        NEW_VERSION = "new_version", gettext_lazy("New version of a skill")

    member = models.ForeignKey(Member, on_delete=models.CASCADE, related_name="+")
    run = models.OneToOneField(
        "agents.Run", on_delete=models.CASCADE, related_name="skill_proposal"
    )
    session = models.ForeignKey("agents.Session", on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    package = models.ForeignKey(
        "hub.SkillPackage", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    base_version = models.ForeignKey(
        "hub.SkillVersion", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    name = models.CharField(max_length=64)
    summary = models.TextField(blank=True)
    correction = models.TextField()
    files = models.JSONField(default=dict)  # path -> text
    messages = models.JSONField(default=list, blank=True)
    drafted_by = models.CharField(max_length=200)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    candidate = models.ForeignKey(
        SkillCandidate, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["organization", "member", "status"])]

    def __str__(self) -> str:
        return f"proposal {self.pk}: {self.name}"


class DistillationRecord(TenantModel):
    """One cluster of task trajectories looked at by memory-to-skill: kept or dropped, and why."""

    resource = "skill"

    cluster_key = models.CharField(max_length=64)  # SHA-256 of the sorted memory ids
    memory_ids = models.JSONField(default=list)
    successes = models.PositiveIntegerField(default=0)
    failures = models.PositiveIntegerField(default=0)
    name = models.CharField(max_length=64, blank=True)
    draft = models.TextField(blank=True)
    steps = models.JSONField(default=list, blank=True)
    check_method = models.CharField(max_length=200)
    figures = models.JSONField(default=dict, blank=True)
    kept = models.BooleanField(default=False)
    reason = models.TextField()
    candidate = models.ForeignKey(
        SkillCandidate, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.UniqueConstraint(
                "organization", "cluster_key", name="skills_distillation_unique_cluster"
            )
        ]

    def __str__(self) -> str:
        return f"{'kept' if self.kept else 'dropped'} {self.name or self.cluster_key[:12]}"
