"""Read-only audit log API (auditor, IT admin, owner), and the public key that audit exports
and chain digests are signed with (anyone: verifiers need it to trust nothing else)."""

from __future__ import annotations

import django_filters
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from cadre import signing
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


class AuditPublicKeySerializer(serializers.Serializer):
    algorithm = serializers.CharField(help_text="Always Ed25519.")
    key_id = serializers.CharField(
        help_text="SHA-256 (hex) of the raw public key: the fingerprint to pin "
        "(audit_export_verify --key-id)."
    )
    public_key_pem = serializers.CharField(
        help_text="The public key, SubjectPublicKeyInfo PEM (audit_export_verify --public-key)."
    )


class AuditPublicKeyView(APIView):
    """The instance's public signing key: verify audit export manifests and the signed
    chain-head digests against it (docs/audit.md). Public: a public key is no secret."""

    authentication_classes: list = []
    permission_classes: list = []

    @extend_schema(responses=AuditPublicKeySerializer, operation_id="audit_public_key", auth=[])
    def get(self, request):
        return Response(signing.published_key())
