"""Base viewsets: tenant scoping and permission checks applied in one place.

A viewset names its model; reads go through `Model.objects.restrict(actor, "view")`, so another
organization's object is 404, never 403. Each action maps to a verb ("view", "manage", …) and the
actor needs `<resource>.<verb>` — organization-wide, or through an object grant on the object.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError as DjangoValidationError
from django.utils.translation import gettext as _
from rest_framework import exceptions, viewsets

READ_ACTIONS = {"list", "retrieve", "metadata"}


class TenantViewSet(viewsets.GenericViewSet):
    model = None
    resource: str | None = None
    write_verb = "manage"
    # Per-action verb overrides, e.g. {"deactivate": "manage"}.
    action_verbs: dict[str, str] = {}

    def get_resource(self) -> str:
        return self.resource or self.model.resource

    def verb(self) -> str:
        if self.action in self.action_verbs:
            return self.action_verbs[self.action]
        if self.action in READ_ACTIONS or self.request.method in ("GET", "HEAD", "OPTIONS"):
            return "view"
        return self.write_verb

    def permission(self) -> str:
        return f"{self.get_resource()}.{self.verb()}"

    @property
    def actor(self):
        return self.request.actor

    def base_queryset(self):
        return self.model.objects.all()

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return self.model.objects.none()
        return self.base_queryset().restrict(self.actor, "view")

    def check_permissions(self, request):
        super().check_permissions(request)
        if self.action is None:
            return  # a method this route does not dispatch: DRF answers 405
        if not self.actor.may(self.permission()):
            self._require_in_organization()
            raise exceptions.PermissionDenied(
                _("You do not have the '%(permission)s' permission.")
                % {"permission": self.permission()}
            )

    def _require_in_organization(self) -> None:
        """On a detail route, another organization's object (or none) is 404, never 403."""
        value = self.kwargs.get(self.lookup_url_kwarg or self.lookup_field)
        if value is None:
            return
        try:
            exists = self.model.objects.filter(
                organization=self.actor.organization, **{self.lookup_field: value}
            ).exists()
        except (TypeError, ValueError, DjangoValidationError):
            exists = False
        if not exists:
            raise exceptions.NotFound()

    def check_object_permissions(self, request, obj):
        super().check_object_permissions(request, obj)
        if self.verb() != "view" and not self.actor.can(self.permission(), obj):
            raise exceptions.PermissionDenied(
                _("You do not have the '%(permission)s' permission on this object.")
                % {"permission": self.permission()}
            )


class TenantRelatedFieldMixin:
    """Related fields that only accept objects the actor can see in their organization."""

    def get_queryset(self):
        request = self.context.get("request")
        actor = getattr(request, "actor", None)
        return super().get_queryset().restrict(actor, "view")
