"""The identity provider's routes: django-oauth-toolkit under /o/ (the issuer), its sign-in page
and the user-admin API."""

from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import include, path

from tests.tenancy.dot_idp import views

urlpatterns = [
    path("o/", include("oauth2_provider.urls", namespace="oauth2_provider")),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("admin-api/users/", views.users),
]
