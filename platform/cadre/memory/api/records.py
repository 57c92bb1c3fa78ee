"""Memory tasks and context records: read-only endpoints over the caller's readable memory."""

from __future__ import annotations

import django_filters
from rest_framework import mixins

from cadre.memory import selectors
from cadre.memory.api.serializers import ContextRecordSerializer, MemoryTaskSerializer
from cadre.memory.api.viewsets import MemoryScopedViewSet
from cadre.memory.models import ContextRecord, MemoryTask


class MemoryTaskFilter(django_filters.FilterSet):
    # A plain number: a model-choice filter would tell "exists elsewhere" from "no such id".
    memory = django_filters.NumberFilter(field_name="memory_id")

    class Meta:
        model = MemoryTask
        fields = ["kind", "status"]


class ContextRecordFilter(django_filters.FilterSet):
    memory = django_filters.NumberFilter(field_name="items__memory_id", distinct=True)

    class Meta:
        model = ContextRecord
        fields = ["run_id", "step_id", "trace_id"]


class MemoryTaskViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, MemoryScopedViewSet):
    model = MemoryTask
    serializer_class = MemoryTaskSerializer
    filterset_class = MemoryTaskFilter

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return MemoryTask.objects.none()
        return selectors.memory_task_queryset(self.actor)


class ContextRecordViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, MemoryScopedViewSet):
    model = ContextRecord
    serializer_class = ContextRecordSerializer
    filterset_class = ContextRecordFilter

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return ContextRecord.objects.none()
        return selectors.context_record_queryset(self.actor).prefetch_related("items")
