"""The tenant-scoped queryset: `.restrict(actor, action)` is how every read is scoped."""

from __future__ import annotations

from django.db import models


class TenantQuerySet(models.QuerySet):
    def restrict(self, actor, action: str = "view"):
        """Rows of the actor's organization that the actor may `action`.

        Organization-wide permission gives every row; otherwise only rows reached by the
        actor's object-level grants (the model's `grant_filter`). No actor, no rows.
        """
        if actor is None or actor.organization is None:
            return self.none()
        queryset = self.filter(organization=actor.organization)
        permission = f"{self.model.resource}.{action}"
        if actor.has(permission):
            return queryset
        condition = grant_filter(self.model, actor, permission)
        return queryset.filter(condition) if condition is not None else queryset.none()


def grant_filter(model, actor, permission: str) -> models.Q | None:
    """What object grants give: the model may define `grant_filter(actor, permission)`."""
    custom = getattr(model, "grant_filter", None)
    if custom is not None:
        return custom(actor, permission)
    ids = actor.granted_ids(permission, model)
    return models.Q(pk__in=ids) if ids else None
