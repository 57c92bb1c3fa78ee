"""Memory Viewer routes under /api/v1/: memory-viewer/ and memories/{id}/trail/."""

from __future__ import annotations

from rest_framework.routers import SimpleRouter

from cadre.viewer import api

router = SimpleRouter()
router.register("memory-viewer", api.MemoryViewerViewSet, basename="memory-viewer")
router.register("memories", api.MemoryTrailViewSet, basename="memory")
urlpatterns = router.urls
