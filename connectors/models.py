"""Connector records: the IM accounts, what they serve, what came in and what went out."""

from __future__ import annotations

import json
import secrets

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy, pgettext_lazy

from cadre.crypto import EncryptedTextField
from cadre.im import platform_choices
from cadre.tenancy.models import Department, Member, Organization, Position, TenantModel


def new_public_id() -> str:
    """The unguessable id in a connector's callback URL (128 bits, url-safe). It never starts
    with "-", which a command line would take for an option (`connectors_stream <id>`)."""
    while True:
        public_id = secrets.token_urlsafe(16)
        if not public_id.startswith("-"):
            return public_id


class Connector(TenantModel):
    """One IM app or webhook of an organization: credentials, settings and health."""

    resource = "connector"

    class Status(models.TextChoices):
        ACTIVE = "active", gettext_lazy("Active")
        DISABLED = "disabled", gettext_lazy("Disabled")

    platform = models.CharField(max_length=16, choices=platform_choices)
    name = models.CharField(max_length=150)
    public_id = models.CharField(max_length=32, unique=True, default=new_public_id)
    # JSON object of secrets (app secret, signing secret, AES keys), encrypted at rest.
    credentials_encrypted = EncryptedTextField(blank=True, default="")
    settings = models.JSONField(default=dict, blank=True)  # non-secret: app id, api base, mode
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    credentials_rotated_at = models.DateTimeField(null=True, blank=True)
    # Health, shown in the console; updated with conditional/atomic updates off the hot path.
    last_event_at = models.DateTimeField(null=True, blank=True)
    last_failure_at = models.DateTimeField(null=True, blank=True)
    last_failure = models.CharField(max_length=300, blank=True)
    failures = models.PositiveIntegerField(default=0)
    signature_rejections = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint("organization", "name", name="connector_unique_name"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.get_platform_display()})"

    @property
    def credentials(self) -> dict:
        if not self.credentials_encrypted:
            return {}
        return json.loads(self.credentials_encrypted)

    @credentials.setter
    def credentials(self, value: dict) -> None:
        self.credentials_encrypted = json.dumps(value, sort_keys=True) if value else ""

    @property
    def is_active(self) -> bool:
        return self.status == self.Status.ACTIVE

    @property
    def callback_path(self) -> str:
        return f"/connectors/{self.platform}/{self.public_id}/events"


class ConnectorBinding(TenantModel):
    """Whom a connector serves: positions, departments, members and IM group chats."""

    resource = "connector"

    connector = models.ForeignKey(Connector, on_delete=models.CASCADE, related_name="bindings")
    name = models.CharField(max_length=150, blank=True)
    # The agents' deployment this binding routes to (an id: the agents app owns the model).
    deployment_id = models.BigIntegerField(null=True, blank=True)
    positions = models.ManyToManyField(Position, blank=True, related_name="+")
    departments = models.ManyToManyField(Department, blank=True, related_name="+")
    members = models.ManyToManyField(Member, blank=True, related_name="+")
    chat_ids = ArrayField(models.CharField(max_length=191), default=list, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["connector", "id"]

    def __str__(self) -> str:
        return self.name or f"binding {self.pk} of {self.connector}"


class InboundEvent(models.Model):
    """One verified event from a platform, stored once per (connector, event key)."""

    class Status(models.TextChoices):
        QUEUED = "queued", gettext_lazy("Queued")
        PROCESSING = "processing", gettext_lazy("Processing")
        PROCESSED = "processed", gettext_lazy("Processed")
        FAILED = "failed", gettext_lazy("Failed")
        UNMAPPED = "unmapped", gettext_lazy("Unmapped user")
        IGNORED = "ignored", gettext_lazy("Ignored")

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    connector = models.ForeignKey(Connector, on_delete=models.CASCADE, related_name="events")
    event_key = models.CharField(max_length=191)
    kind = models.CharField(max_length=24, default="message")  # message, card_action, event
    sender_id = models.CharField(max_length=191, blank=True)
    chat_id = models.CharField(max_length=191, blank=True)
    # The minimum the dispatcher needs (text, thread, reply context): never the raw body.
    payload = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    received_at = models.DateTimeField(default=timezone.now)
    claimed_at = models.DateTimeField(null=True, blank=True)
    processed_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    error = models.CharField(max_length=300, blank=True)
    member = models.ForeignKey(
        Member, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    run_ref = models.CharField(max_length=64, blank=True)  # the agents runtime's run id

    class Meta:
        ordering = ["-received_at"]
        constraints = [
            models.UniqueConstraint("connector", "event_key", name="inboundevent_unique_key"),
        ]
        indexes = [models.Index(fields=["status", "received_at"])]

    def __str__(self) -> str:
        return f"{self.connector_id}:{self.event_key}"


class Delivery(models.Model):
    """A message or card sent (or to be sent) through a connector: one row per idempotency key."""

    class Status(models.TextChoices):
        PENDING = "pending", gettext_lazy("Pending")
        SENT = "sent", gettext_lazy("Sent")
        FAILED = "failed", gettext_lazy("Failed")

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    connector = models.ForeignKey(Connector, on_delete=models.CASCADE, related_name="deliveries")
    idempotency_key = models.CharField(max_length=191)
    kind = models.CharField(max_length=16, default="text")  # text, markdown, card, card_update
    recipient = models.CharField(max_length=191, blank=True)  # user or chat id on the platform
    recipient_type = models.CharField(max_length=8, default="user")  # user, chat
    thread_ref = models.CharField(max_length=191, blank=True)
    body = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    platform_message_id = models.CharField(max_length=191, blank=True)
    error = models.CharField(max_length=300, blank=True)
    # Set on confirmation cards so every copy can be updated after the decision.
    confirmation_ref = models.CharField(max_length=64, blank=True, db_index=True)
    inbound_event = models.ForeignKey(
        InboundEvent, null=True, blank=True, on_delete=models.SET_NULL, related_name="replies"
    )
    created_at = models.DateTimeField(default=timezone.now)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint("connector", "idempotency_key", name="delivery_unique_key"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} to {self.recipient} ({self.status})"


class UnmappedIdentity(TenantModel):
    """A platform user who wrote to a connector but matches no member: the console's queue."""

    resource = "connector"

    connector = models.ForeignKey(Connector, on_delete=models.CASCADE, related_name="unmapped")
    platform_user_id = models.CharField(max_length=191)
    display_name = models.CharField(max_length=150, blank=True)
    email = models.CharField(max_length=254, blank=True)
    mobile = models.CharField(max_length=32, blank=True)
    first_seen_at = models.DateTimeField(default=timezone.now)
    last_seen_at = models.DateTimeField(default=timezone.now)
    message_count = models.PositiveIntegerField(default=1)
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-last_seen_at"]
        constraints = [
            models.UniqueConstraint(
                "connector", "platform_user_id", name="unmappedidentity_unique_user"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.connector_id}:{self.platform_user_id}"


class ConnectorNotice(TenantModel):
    """A notice for the organization's connector admins (unmapped users, failing credentials)."""

    resource = "connector"

    class Kind(models.TextChoices):
        UNMAPPED_USER = "unmapped_user", gettext_lazy("Unmapped user")
        DELIVERY_FAILED = "delivery_failed", gettext_lazy("Delivery failed")

    connector = models.ForeignKey(Connector, on_delete=models.CASCADE, related_name="notices")
    kind = models.CharField(max_length=24, choices=Kind.choices)
    message = models.CharField(max_length=500)
    details = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    read_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]


class DecisionTokenUse(models.Model):
    """A used confirmation-card decision token: the unique nonce makes each token single-use."""

    nonce = models.CharField(max_length=64, unique=True)
    confirmation_ref = models.CharField(max_length=64, db_index=True)
    decider_id = models.BigIntegerField()
    decision = models.CharField(max_length=16)
    used_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.confirmation_ref}:{self.decision}"


class DirectorySync(TenantModel):
    """One run of an IM contact-directory sync: a full sync, a nightly reconciliation or one
    contact-change event. Its counts, progress and errors are what the console shows."""

    resource = "connector"

    class Kind(models.TextChoices):
        FULL = "full", gettext_lazy("Full sync")
        RECONCILE = "reconcile", gettext_lazy("Nightly reconciliation")
        EVENT = "event", gettext_lazy("Contact-change event")

    class Status(models.TextChoices):
        QUEUED = "queued", gettext_lazy("Queued")
        RUNNING = "running", gettext_lazy("Running")
        SUCCEEDED = "succeeded", gettext_lazy("Succeeded")
        FAILED = "failed", gettext_lazy("Failed")

    connector = models.ForeignKey(Connector, on_delete=models.CASCADE, related_name="syncs")
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.FULL)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    # Phase ("departments", "users", "apply") and how far it got: what a progress bar needs.
    phase = models.CharField(max_length=16, blank=True)
    progress_done = models.PositiveIntegerField(default=0)
    progress_total = models.PositiveIntegerField(default=0)
    counts = models.JSONField(default=dict, blank=True)
    # The refusal that stopped the run, e.g. {"code": "permission_denied", "platform_code": …}.
    error_code = models.CharField(max_length=32, blank=True)
    error = models.CharField(max_length=500, blank=True)
    errors = models.JSONField(default=list, blank=True)  # per-row problems that did not stop it
    requested_by = models.ForeignKey(
        Member, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            # One full sync or reconciliation at a time per connector.
            models.UniqueConstraint(
                "connector",
                name="directorysync_one_open_run",
                condition=models.Q(
                    status__in=["queued", "running"], kind__in=["full", "reconcile"]
                ),
            )
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} of {self.connector_id} ({self.status})"


class DirectoryDepartmentLink(TenantModel):
    """A platform department mirrored as a Cadre department by one connector's sync."""

    resource = "connector"

    connector = models.ForeignKey(
        Connector, on_delete=models.CASCADE, related_name="directory_departments"
    )
    platform_department_id = models.CharField(max_length=191)
    department = models.ForeignKey(Department, on_delete=models.CASCADE, related_name="+")
    synced_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                "connector", "platform_department_id", name="directorydepartment_unique_id"
            )
        ]

    def __str__(self) -> str:
        return f"{self.connector_id}:{self.platform_department_id}"


class DirectoryUserLink(TenantModel):
    """A platform user mirrored as a member by one connector's sync, with the values the last
    sync wrote: a member field that differs from them was edited in Cadre since."""

    resource = "connector"

    connector = models.ForeignKey(
        Connector, on_delete=models.CASCADE, related_name="directory_users"
    )
    platform_user_id = models.CharField(max_length=191)
    member = models.ForeignKey(Member, on_delete=models.CASCADE, related_name="+")
    synced_values = models.JSONField(default=dict, blank=True)
    departed_at = models.DateTimeField(null=True, blank=True)
    synced_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                "connector", "platform_user_id", name="directoryuser_unique_id"
            ),
            models.UniqueConstraint("connector", "member", name="directoryuser_unique_member"),
        ]

    def __str__(self) -> str:
        return f"{self.connector_id}:{self.platform_user_id}"


class DirectoryConflict(TenantModel):
    """Something a sync would not decide alone: a person resolves it in the review queue."""

    resource = "connector"

    class Kind(models.TextChoices):
        DUPLICATE_EMAIL = "duplicate_email", gettext_lazy("Two directory users with one e-mail")
        LOCAL_EDIT = "local_edit", gettext_lazy("Member edited in Cadre since the last sync")
        DEACTIVATE_REFUSED = (
            "deactivate_refused",
            gettext_lazy("Departed user could not be deactivated"),
        )

    class Status(models.TextChoices):
        OPEN = "open", pgettext_lazy("status", "Open")
        RESOLVED = "resolved", gettext_lazy("Resolved")

    class Resolution(models.TextChoices):
        TAKE_DIRECTORY = "take_directory", gettext_lazy("Take the directory's values")
        KEEP_LOCAL = "keep_local", gettext_lazy("Keep Cadre's values")
        LINK = "link", gettext_lazy("Link to a chosen member")
        CREATE = "create", gettext_lazy("Create a member without the e-mail")
        DISMISS = "dismiss", gettext_lazy("Dismiss")

    connector = models.ForeignKey(Connector, on_delete=models.CASCADE, related_name="conflicts")
    sync = models.ForeignKey(
        DirectorySync, null=True, blank=True, on_delete=models.SET_NULL, related_name="conflicts"
    )
    kind = models.CharField(max_length=24, choices=Kind.choices)
    platform_user_id = models.CharField(max_length=191)
    member = models.ForeignKey(
        Member, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    # The directory's record of the user (normalized), and Cadre's values of the fields in doubt.
    directory_values = models.JSONField(default=dict, blank=True)
    local_values = models.JSONField(default=dict, blank=True)
    fields = ArrayField(models.CharField(max_length=32), default=list, blank=True)
    message = models.CharField(max_length=500, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.OPEN)
    resolution = models.CharField(max_length=16, choices=Resolution.choices, blank=True)
    resolved_by = models.ForeignKey(
        Member, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    resolved_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                "connector",
                "platform_user_id",
                "kind",
                name="directoryconflict_one_open",
                condition=models.Q(status="open"),
            )
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.platform_user_id} ({self.status})"
