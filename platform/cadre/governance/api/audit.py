"""Read-only audit log API (auditor, IT admin, owner)."""

from __future__ import annotations

import django_filters
from rest_framework import mixins, serializers

from cadre.api.viewsets import TenantViewSet
from cadre.governance.models import AuditEvent


class AuditEventSerializer(serializers.ModelSerializer):
    class Meta:
        model = AuditEvent
        first, *rest = AuditEvent.CHAINED_FIELDS
        fields = ["id", first, "created_at", *rest, "hash"]
        read_only_fields = fields


class AuditEventFilter(django_filters.FilterSet):
    action = django_filters.CharFilter(
        method="by_action", help_text="Exact action, or a prefix ending in '.'"
    )
    since = django_filters.IsoDateTimeFilter(field_name="created_at", lookup_expr="gte")
    until = django_filters.IsoDateTimeFilter(field_name="created_at", lookup_expr="lt")

    class Meta:
        model = AuditEvent
        fields = ["actor_type", "actor_id", "target_type", "target_id", "request_id", "trace_id"]

    def by_action(self, queryset, name, value):
        if value.endswith("."):
            return queryset.filter(action__startswith=value)
        return queryset.filter(action=value)


class AuditEventViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantViewSet):
    model = AuditEvent
    serializer_class = AuditEventSerializer
    filterset_class = AuditEventFilter
