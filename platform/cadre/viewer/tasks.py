"""Celery task of the Memory Viewer: computing a vector map.

The task keeps its memory name (`cadre.memory.tasks.memory_map`): queue routing
(settings.CADRE_TASK_QUEUES) and messages already queued name it so, and memory's task
records enqueue it by that name (memory.services.common.enqueue).
"""

from __future__ import annotations

from celery import shared_task

from cadre.memory.models import MemoryMap, MemoryTask
from cadre.memory.tasks import RETRY, run_recorded
from cadre.viewer import vector_map


@shared_task(name="cadre.memory.tasks.memory_map", **RETRY)
def memory_map(self, task_id: int) -> dict | None:
    """Compute a vector map (projection, clusters, labels) for the viewer."""

    def work(record: MemoryTask) -> dict:
        memory_map = MemoryMap.objects.filter(pk=record.params.get("map_id")).first()
        if memory_map is None or memory_map.status == MemoryMap.Status.READY:
            return {"skipped": "map gone or already computed"}
        try:
            return vector_map.map_compute(memory_map)
        except Exception as error:
            if self.request.retries >= (self.max_retries or 0) or self.request.is_eager:
                vector_map.map_failed(memory_map.pk, f"{type(error).__name__}: {error}")
            raise

    return run_recorded(self, task_id, work)
