"""Memory API routes under /api/v1/: memories, memory-tasks and memory-context-records."""

from __future__ import annotations

from rest_framework.routers import SimpleRouter

from cadre.memory.api import memories, records

router = SimpleRouter()
router.register("memories", memories.MemoryViewSet, basename="memory")
router.register("memory-tasks", records.MemoryTaskViewSet, basename="memory-task")
router.register(
    "memory-context-records", records.ContextRecordViewSet, basename="memory-context-record"
)
urlpatterns = router.urls
