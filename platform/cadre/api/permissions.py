"""The default API permission: an authenticated actor acting inside an organization."""

from __future__ import annotations

from rest_framework import exceptions, permissions


class IsOrganizationActor(permissions.BasePermission):
    def has_permission(self, request, view) -> bool:
        if getattr(request, "actor", None) is None:
            if request.user is None or not request.user.is_authenticated:
                raise exceptions.NotAuthenticated()
            return False
        return True
