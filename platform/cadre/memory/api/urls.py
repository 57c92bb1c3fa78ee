"""Memory API routes under /api/v1/: memories, memory-viewer, memory-tasks, context records,
and switching the embedding model."""

from __future__ import annotations

from django.urls import path
from rest_framework.routers import SimpleRouter

from cadre.memory.api import embeddings, memories, records, viewer

router = SimpleRouter()
router.register("memories", memories.MemoryViewSet, basename="memory")
router.register("memory-viewer", viewer.MemoryViewerViewSet, basename="memory-viewer")
router.register("memory-tasks", records.MemoryTaskViewSet, basename="memory-task")
router.register(
    "memory-context-records", records.ContextRecordViewSet, basename="memory-context-record"
)
urlpatterns = [
    path(
        "embedding-models/activate/",
        embeddings.EmbeddingActivateView.as_view(),
        name="embedding-model-activate",
    ),
    *router.urls,
]
