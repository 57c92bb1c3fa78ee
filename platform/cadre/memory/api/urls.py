"""Memory API routes under /api/v1/: memories, memory-tasks, context records, and the
organization's embedding models and their switch (the Memory Viewer's routes are
cadre.viewer's)."""

from __future__ import annotations

from django.urls import path
from rest_framework.routers import SimpleRouter

from cadre.memory.api import embeddings, memories, records

router = SimpleRouter()
router.register("memories", memories.MemoryViewSet, basename="memory")
router.register("memory-tasks", records.MemoryTaskViewSet, basename="memory-task")
router.register(
    "memory-context-records", records.ContextRecordViewSet, basename="memory-context-record"
)
urlpatterns = [
    path(
        "embedding-models/",
        embeddings.EmbeddingModelListView.as_view(),
        name="embedding-model-list",
    ),
    path(
        "embedding-models/activate/",
        embeddings.EmbeddingActivateView.as_view(),
        name="embedding-model-activate",
    ),
    *router.urls,
]
