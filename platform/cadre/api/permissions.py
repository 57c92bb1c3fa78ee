"""The default API permission: an authenticated actor acting inside an organization."""

from __future__ import annotations

from rest_framework import exceptions, permissions


class IsOrganizationActor(permissions.BasePermission):
    """An actor this view's own authentication established. The console's middleware sets
    `request.actor` from the session on every path; a view that takes only keys (the Mem0 and
    MemOS APIs) must not act on it, since only DRF's session authentication enforces CSRF: a
    signed-in browser could otherwise be made to write memories from another site."""

    def has_permission(self, request, view) -> bool:
        if getattr(request, "actor", None) is None or request.successful_authenticator is None:
            if request.user is None or not request.user.is_authenticated:
                raise exceptions.NotAuthenticated()
            return False
        return True
