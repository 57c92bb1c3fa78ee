"""Websocket routes (Channels)."""

from __future__ import annotations

from django.urls import path

from cadre.agents.consumers import ChatConsumer
from cadre.governance.consumers import ConfirmationQueueConsumer

websocket_urlpatterns: list = [
    path("ws/confirmations/", ConfirmationQueueConsumer.as_asgi()),
    path("ws/chat/<int:session_id>/", ChatConsumer.as_asgi()),
]
