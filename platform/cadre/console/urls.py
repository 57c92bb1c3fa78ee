"""Console routes."""

from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import path

from cadre.console import views

app_name = "console"

urlpatterns = [
    path("login/", auth_views.LoginView.as_view(template_name="console/login.html",
                                                redirect_authenticated_user=True), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", views.home, name="home"),
    path("members/", views.home, name="members"),
    path("departments/", views.home, name="departments"),
    path("positions/", views.home, name="positions"),
    path("audit/", views.home, name="audit"),
    path("api-keys/", views.home, name="api_keys"),
    path("organization/", views.home, name="organization"),
    path("areas/<slug:area>/", views.home, name="area"),
]
