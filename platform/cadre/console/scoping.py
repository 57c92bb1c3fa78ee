"""The console's one tenancy gate: every queryset a console page or form reads is scoped here.

As the API's `TenantViewSet` does for viewsets, a console view names a model (or a queryset
it has narrowed) and gets the rows of the request's actor: `restricted()` applies
`.restrict(actor, action)` — the actor's organization, then the `<resource>.<action>`
permission, organization-wide or through object grants — so another organization's object is
404, never 403. `in_organization()` is for the few reads whose own gate (the page's permission,
a transcript rule, a service) already decides and that only need the organization boundary.
"""

from __future__ import annotations

from django.db import models
from django.shortcuts import get_object_or_404

from cadre.tenancy.actors import Actor


def _queryset(model_or_queryset) -> models.QuerySet:
    if isinstance(model_or_queryset, models.QuerySet):
        return model_or_queryset
    return model_or_queryset.objects.all()


def restricted_for(actor: Actor | None, model_or_queryset, action: str = "view"):
    """The rows of `model_or_queryset` that `actor` may `action` (none without an actor)."""
    return _queryset(model_or_queryset).restrict(actor, action)


def restricted(request, model_or_queryset, action: str = "view"):
    """The rows of `model_or_queryset` that the request's actor may `action`."""
    return restricted_for(request.actor, model_or_queryset, action)


def get_restricted_or_404(request, model_or_queryset, action: str = "view", **lookup):
    """The one row matching `lookup` that the request's actor may `action`, else 404."""
    return get_object_or_404(restricted(request, model_or_queryset, action), **lookup)


def in_organization_of(actor: Actor, model_or_queryset):
    """The rows of `model_or_queryset` in the actor's organization, whatever the actor's
    object permissions (the caller's own gate has decided those)."""
    return _queryset(model_or_queryset).filter(organization=actor.organization)


def in_organization(request, model_or_queryset):
    """The rows of `model_or_queryset` in the request's organization (see
    `in_organization_of`)."""
    return in_organization_of(request.actor, model_or_queryset)


def get_in_organization_or_404(request, model_or_queryset, **lookup):
    """The one row matching `lookup` in the request's organization, else 404."""
    return get_object_or_404(in_organization(request, model_or_queryset), **lookup)
