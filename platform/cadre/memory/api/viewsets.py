"""The memory API's base viewset: access comes from the memory selectors, not from an
organization-wide permission."""

from __future__ import annotations

from django.utils.translation import gettext as _
from rest_framework import exceptions

from cadre.api.viewsets import TenantViewSet
from cadre.memory import selectors


class MemoryScopedViewSet(TenantViewSet):
    """Reads need memory access (API keys: memory:read or memory:write), writes memory:write;
    rows come from the selectors, never from an organization-wide permission."""

    write_actions: frozenset[str] = frozenset()

    def check_permissions(self, request):
        for permission in self.get_permissions():
            if not permission.has_permission(request, self):
                self.permission_denied(request, message=getattr(permission, "message", None))
        actor = self.actor
        writing = self.action in self.write_actions or (
            request.method not in ("GET", "HEAD", "OPTIONS") and self.action not in ("search",)
        )
        if not selectors.can_read_memory(actor):
            raise exceptions.PermissionDenied(_("This API key needs the 'memory:read' scope."))
        if writing and not selectors.can_write_memory(actor):
            raise exceptions.PermissionDenied(_("This API key needs the 'memory:write' scope."))

    def check_object_permissions(self, request, obj):
        return None  # the services decide who may change what (404 / 403 with a reason)
