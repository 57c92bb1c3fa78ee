"""The audit trail: append-only events, hash-chained per organization."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from cadre.tenancy.models import Organization
from cadre.tenancy.querysets import TenantQuerySet


class AppendOnlyError(Exception):
    """Raised on any attempt to change or delete an audit event."""


class AuditEventQuerySet(TenantQuerySet):
    def update(self, **kwargs):
        raise AppendOnlyError("audit events are append-only")

    def delete(self):
        raise AppendOnlyError("audit events are append-only")

    def bulk_update(self, *args, **kwargs):
        raise AppendOnlyError("audit events are append-only")


class AuditEvent(models.Model):
    resource = "audit"

    class ActorType(models.TextChoices):
        MEMBER = "member", "Member"
        API_KEY = "api_key", "API key"
        AGENT = "agent", "Agent"
        SYSTEM = "system", "System"

    organization = models.ForeignKey(Organization, on_delete=models.PROTECT, related_name="+")
    sequence = models.BigIntegerField()
    created_at = models.DateTimeField(default=timezone.now)
    actor_type = models.CharField(max_length=16, choices=ActorType.choices)
    actor_id = models.CharField(max_length=64, blank=True)
    actor_label = models.CharField(max_length=200, blank=True)
    action = models.CharField(max_length=100)
    target_type = models.CharField(max_length=64, blank=True)
    target_id = models.CharField(max_length=64, blank=True)
    target_label = models.CharField(max_length=200, blank=True)
    changes = models.JSONField(default=dict, blank=True)
    reason = models.TextField(blank=True)
    request_id = models.CharField(max_length=64, blank=True)
    trace_id = models.CharField(max_length=32, blank=True)
    ip = models.GenericIPAddressField(null=True, blank=True)
    user_agent = models.CharField(max_length=400, blank=True)
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64)

    objects = AuditEventQuerySet.as_manager()

    class Meta:
        ordering = ["-sequence"]
        constraints = [
            models.UniqueConstraint("organization", "sequence", name="auditevent_unique_sequence")
        ]
        indexes = [
            models.Index(fields=["organization", "created_at"]),
            models.Index(fields=["organization", "action"]),
            models.Index(fields=["organization", "target_type", "target_id"]),
            models.Index(fields=["organization", "actor_type", "actor_id"]),
            models.Index(fields=["trace_id"]),
        ]

    def __str__(self) -> str:
        return f"#{self.sequence} {self.action}"

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise AppendOnlyError("audit events are append-only")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise AppendOnlyError("audit events are append-only")


class AuditChainHead(models.Model):
    """The last link of an organization's chain; locked to append the next one."""

    organization = models.OneToOneField(
        Organization, on_delete=models.PROTECT, primary_key=True, related_name="+"
    )
    sequence = models.BigIntegerField(default=0)
    hash = models.CharField(max_length=64)


# --- masking: pseudonym vault and organization rules (cadre.governance.masking) ---------------

from cadre.crypto import EncryptedTextField  # noqa: E402
from cadre.tenancy.models import TenantModel  # noqa: E402


class PseudonymMapping(TenantModel):
    """One placeholder of one conversation (`<PHONE_1>`) and its original, encrypted at rest.

    `value_hash` is an HMAC-SHA256 (key: SECRET_KEY) of the normalized original, so the same
    value finds its placeholder again without decrypting anything.
    """

    resource = "policy"

    conversation_key = models.CharField(max_length=200)
    label = models.CharField(max_length=40)
    number = models.PositiveIntegerField()
    placeholder = models.CharField(max_length=64)
    entity_type = models.CharField(max_length=40)
    value_hash = models.CharField(max_length=64)
    value = EncryptedTextField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["conversation_key", "label", "number"]
        constraints = [
            models.UniqueConstraint(
                "organization", "conversation_key", "placeholder",
                name="pseudonymmapping_unique_placeholder",
            ),
            models.UniqueConstraint(
                "organization", "conversation_key", "value_hash",
                name="pseudonymmapping_unique_value",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.conversation_key} {self.placeholder}"


class MaskingRule(TenantModel):
    """An organization-defined detector: a regex or a dictionary of terms, with a type name."""

    resource = "policy"

    class Kind(models.TextChoices):
        PATTERN = "pattern", "Regular expression"
        DICTIONARY = "dictionary", "Dictionary of terms"

    name = models.CharField(max_length=150)
    entity_type = models.CharField(max_length=40)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    pattern = models.TextField(blank=True)
    # Dictionary terms (customer names, project code names), one per line, encrypted at rest.
    terms = EncryptedTextField(blank=True)
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint("organization", "name", name="maskingrule_unique_name")
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def term_list(self) -> list[str]:
        return [term for term in (self.terms or "").splitlines() if term.strip()]
