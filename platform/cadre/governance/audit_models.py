"""The audit trail: append-only events, hash-chained per organization."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy

from cadre.tenancy.models import Organization
from cadre.tenancy.querysets import TenantQuerySet


class AppendOnlyError(Exception):
    """Raised on any attempt to change or delete an audit event."""


# Chain order. An event gets its position (sequence) when it is sealed, shortly after its
# transaction commits; until then it sorts after every sealed event, in insertion order — the
# order the sealer will most likely give it. So `order_by("sequence")` (and `earliest`/`latest`
# by sequence) put events oldest / newest first whether or not they are sealed yet.
_CHAIN_ORDER = {
    "sequence": (models.F("sequence").asc(nulls_last=True), "id"),
    "-sequence": (models.F("sequence").desc(nulls_first=True), "-id"),
}


class AuditEventQuerySet(TenantQuerySet):
    def order_by(self, *field_names):
        expanded = []
        for name in field_names:
            expanded.extend(_CHAIN_ORDER.get(name, (name,)) if isinstance(name, str) else (name,))
        return super().order_by(*expanded)

    def earliest(self, *fields):
        if fields in (("sequence",), ("-sequence",)):
            return self._first_in_chain_order(fields[0])
        return super().earliest(*fields)

    def latest(self, *fields):
        if fields in (("sequence",), ("-sequence",)):
            return self._first_in_chain_order(
                "sequence" if fields[0] == "-sequence" else "-sequence"
            )
        return super().latest(*fields)

    def _first_in_chain_order(self, field: str):
        event = self.order_by(field).first()
        if event is None:
            raise self.model.DoesNotExist("AuditEvent matching query does not exist.")
        return event

    def sealed(self):
        """Events that have their place in the hash chain."""
        return self.filter(sequence__isnull=False)

    def unsealed(self):
        """Events committed but not sealed into the chain yet (see audit.seal)."""
        return self.filter(sequence__isnull=True)

    def update(self, **kwargs):
        raise AppendOnlyError("audit events are append-only")

    def delete(self):
        raise AppendOnlyError("audit events are append-only")

    def bulk_update(self, *args, **kwargs):
        raise AppendOnlyError("audit events are append-only")


class AuditEvent(models.Model):
    """One state change. Inserted unsealed (sequence, prev_hash and hash empty) in the change's
    transaction; `audit.seal` later gives it its chain position and hashes, the one update the
    database allows on this table."""

    resource = "audit"

    class ActorType(models.TextChoices):
        MEMBER = "member", gettext_lazy("Member")
        API_KEY = "api_key", gettext_lazy("API key")
        AGENT = "agent", gettext_lazy("Agent")
        SYSTEM = "system", gettext_lazy("System")
        SCIM_TOKEN = "scim_token", gettext_lazy("SCIM token")

    # No index of its own: the unique constraint and the composite indexes below start with
    # it (issue #5: one index fewer to maintain on every insert and seal).
    organization = models.ForeignKey(
        Organization, on_delete=models.PROTECT, related_name="+", db_index=False
    )
    sequence = models.BigIntegerField(null=True, blank=True)  # None until sealed
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
    prev_hash = models.CharField(max_length=64, null=True, blank=True)  # None until sealed
    hash = models.CharField(max_length=64, null=True, blank=True)  # None until sealed

    # The fields covered by the hash chain, in their canonical order (the hash itself, the
    # organization and created_at are hashed alongside; see audit.event_hash).
    CHAINED_FIELDS = (
        "sequence",
        "actor_type",
        "actor_id",
        "actor_label",
        "action",
        "target_type",
        "target_id",
        "target_label",
        "changes",
        "reason",
        "request_id",
        "trace_id",
        "ip",
        "user_agent",
        "prev_hash",
    )

    objects = AuditEventQuerySet.as_manager()

    class Meta:
        ordering = _CHAIN_ORDER["-sequence"]
        constraints = [
            models.UniqueConstraint("organization", "sequence", name="auditevent_unique_sequence"),
            # Sealed means all three chain fields are set; unsealed, none is.
            models.CheckConstraint(
                condition=Q(sequence__isnull=True, prev_hash__isnull=True, hash__isnull=True)
                | Q(sequence__gte=1, prev_hash__isnull=False, hash__isnull=False),
                name="auditevent_sealed_all_or_nothing",
            ),
        ]
        indexes = [
            # What the sealer looks for: a small index, an event leaves it when sealed.
            models.Index(
                fields=["organization", "id"],
                condition=Q(sequence__isnull=True),
                name="auditevent_unsealed",
            ),
            models.Index(fields=["organization", "created_at"]),
            models.Index(fields=["organization", "action"]),
            models.Index(fields=["organization", "target_type", "target_id"]),
            models.Index(fields=["organization", "actor_type", "actor_id"]),
            models.Index(fields=["trace_id"]),
        ]

    def __str__(self) -> str:
        position = f"#{self.sequence}" if self.is_sealed else "(unsealed)"
        return f"{position} {self.action}"

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise AppendOnlyError("audit events are append-only")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise AppendOnlyError("audit events are append-only")

    @property
    def is_sealed(self) -> bool:
        return self.sequence is not None


class AuditChainHead(models.Model):
    """The last sealed link of an organization's chain; the sealer locks it to add links."""

    organization = models.OneToOneField(
        Organization, on_delete=models.PROTECT, primary_key=True, related_name="+"
    )
    sequence = models.BigIntegerField(default=0)
    hash = models.CharField(max_length=64)

    def __str__(self) -> str:
        return f"chain head of organization {self.organization_id} at #{self.sequence}"
