"""Routes for the tenancy API under /api/v1/."""

from __future__ import annotations

from django.urls import path
from rest_framework.routers import SimpleRouter

from cadre.tenancy.api import views

router = SimpleRouter()
router.register("departments", views.DepartmentViewSet, basename="department")
router.register("positions", views.PositionViewSet, basename="position")
router.register("members", views.MemberViewSet, basename="member")
router.register("invitations", views.InvitationViewSet, basename="invitation")
router.register("im-identities", views.IMIdentityViewSet, basename="im-identity")
router.register("api-keys", views.ApiKeyViewSet, basename="api-key")
router.register("roles", views.RoleViewSet, basename="role")
router.register("grants", views.GrantViewSet, basename="grant")

organization = views.OrganizationViewSet.as_view({"get": "retrieve", "patch": "partial_update"})

urlpatterns = [path("organization/", organization, name="organization"), *router.urls]
