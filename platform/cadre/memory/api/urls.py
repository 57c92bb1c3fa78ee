"""Memory API routes under /api/v1/: memories, memory-viewer, memory-tasks, context records."""

from __future__ import annotations

from rest_framework.routers import SimpleRouter

from cadre.memory.api import memories, records, viewer

router = SimpleRouter()
router.register("memories", memories.MemoryViewSet, basename="memory")
router.register("memory-viewer", viewer.MemoryViewerViewSet, basename="memory-viewer")
router.register("memory-tasks", records.MemoryTaskViewSet, basename="memory-task")
router.register(
    "memory-context-records", records.ContextRecordViewSet, basename="memory-context-record"
)
urlpatterns = router.urls
