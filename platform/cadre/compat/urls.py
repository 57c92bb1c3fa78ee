"""Routes of the compatible memory APIs: Mem0 at /mem0/, MemOS at /memos/."""

from __future__ import annotations

from django.urls import path, re_path

from cadre.compat import mem0, memos
from cadre.compat.schemas import SchemaView

mem0_urlpatterns = [
    path("openapi.json", SchemaView.as_view(layer="mem0"), name="mem0-schema"),
    path("v1/ping/", mem0.Ping.as_view(), name="mem0-ping"),
    path("v1/memories/", mem0.Memories.as_view(), name="mem0-memories"),
    path("v3/memories/add/", mem0.AddMemories.as_view(), name="mem0-add"),
    path("v3/memories/", mem0.ListMemories.as_view(), name="mem0-list-v3"),
    path("v2/memories/", mem0.ListMemories.as_view(), name="mem0-list-v2"),
    path("v3/memories/search/", mem0.Search.as_view(), name="mem0-search-v3"),
    path("v2/memories/search/", mem0.Search.as_view(), name="mem0-search-v2"),
    path("v1/memories/search/", mem0.Search.as_view(), name="mem0-search-v1"),
    path("v1/memories/<str:memory_id>/", mem0.MemoryDetail.as_view(), name="mem0-memory"),
    path(
        "v1/memories/<str:memory_id>/history/", mem0.History.as_view(), name="mem0-memory-history"
    ),
    path("v1/feedback/", mem0.Feedback.as_view(), name="mem0-feedback"),
    re_path(r"^.*$", mem0.Unknown.as_view(), name="mem0-unknown"),
]

memos_urlpatterns = [
    path("openapi.json", SchemaView.as_view(layer="memos"), name="memos-schema"),
    path("add/message", memos.AddMessage.as_view(), name="memos-add-message"),
    path("search/memory", memos.SearchMemory.as_view(), name="memos-search"),
    path("get/memory", memos.GetMemory.as_view(), name="memos-get"),
    path("update/memory", memos.UpdateMemory.as_view(), name="memos-update"),
    path("delete/memory", memos.DeleteMemory.as_view(), name="memos-delete"),
    path("add/feedback", memos.AddFeedback.as_view(), name="memos-feedback"),
    path("get/status", memos.GetStatus.as_view(), name="memos-status"),
    re_path(r"^.*$", memos.Unknown.as_view(), name="memos-unknown"),
]
