"""What the runtime keeps in the database: the record of the demo data `make up` created."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from cadre.tenancy.models import Organization


class DemoData(models.Model):
    """The sample data seeded into an organization on first start, so that `demo_reset`
    removes exactly it (and a later start does not seed it again after a reset)."""

    organization = models.OneToOneField(Organization, on_delete=models.CASCADE, related_name="+")
    # [{"type": "agents.agenttemplate", "id": 3}, ...] in the order they were created.
    items = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    reset_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"demo data of organization {self.organization_id}"

    def ids(self, kind: str) -> list[int]:
        return [item["id"] for item in self.items if item["type"] == kind]
