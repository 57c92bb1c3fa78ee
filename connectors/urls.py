"""Inbound IM callback routes (mounted at /connectors/) and the connectors API."""

from __future__ import annotations

from django.urls import path

from connectors import api, directory_api
from connectors.inbound import views

urlpatterns: list = [
    path("<slug:platform>/<str:public_id>/events", views.inbound, name="connectors-inbound"),
]
api_urlpatterns: list = api.urlpatterns + directory_api.urlpatterns
