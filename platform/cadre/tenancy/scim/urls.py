"""URLs of the SCIM 2.0 service, mounted at /scim/v2/."""

from __future__ import annotations

from django.urls import path, re_path

from cadre.tenancy.scim import views

urlpatterns = [
    path("ServiceProviderConfig", views.service_provider_config),
    path("ResourceTypes", views.resource_types),
    path("ResourceTypes/<str:name>", views.resource_types),
    path("Schemas", views.schemas_view),
    path("Schemas/<str:urn>", views.schemas_view),
    path(".search", views.root_search),
    path("Users/.search", views.users_search),
    path("Groups/.search", views.groups_search),
    path("Users", views.users),
    path("Users/<str:pk>", views.user),
    path("Groups", views.groups),
    path("Groups/<str:pk>", views.group),
    re_path(r"^(?P<rest>.*)$", views.unknown),
]
