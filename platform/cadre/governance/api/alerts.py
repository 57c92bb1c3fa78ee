"""Alerts API: alert rules (policy.manage) and alerts (read: audit.view; acknowledge and
resolve: policy.manage)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status
from rest_framework.decorators import action
from rest_framework.response import Response

from cadre.api.viewsets import TenantViewSet
from cadre.governance import alerts
from cadre.governance.models import Alert, AlertRule


class AlertRuleSerializer(serializers.ModelSerializer):
    channels = serializers.SerializerMethodField()

    class Meta:
        model = AlertRule
        fields = [
            "id",
            "name",
            "kind",
            "params",
            "severity",
            "channels",
            "is_active",
            "last_evaluated_at",
            "created_at",
        ]
        read_only_fields = fields

    def get_channels(self, rule) -> list[dict]:
        # Webhook secrets are write-only.
        return [
            {k: ("********" if k == "secret" else v) for k, v in channel.items()}
            for channel in rule.channels
        ]


class AlertRuleWriteSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=150)
    kind = serializers.ChoiceField(choices=alerts.RULE_KINDS)
    params = serializers.DictField(required=False, default=dict)
    severity = serializers.ChoiceField(choices=AlertRule.Severity.values, default="warning")
    channels = serializers.ListField(
        child=serializers.DictField(), required=False, default=list, max_length=10
    )


class AlertRuleViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin, TenantViewSet
):
    model = AlertRule
    serializer_class = AlertRuleSerializer
    action_verbs = {"list": "manage", "retrieve": "manage"}

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return AlertRule.objects.none()
        return AlertRule.objects.restrict(self.actor, "manage")

    @extend_schema(request=AlertRuleWriteSerializer, responses={201: AlertRuleSerializer})
    def create(self, request, *args, **kwargs):
        incoming = AlertRuleWriteSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        data = incoming.validated_data
        rule = alerts.alert_rule_create(
            actor=self.actor,
            name=data["name"],
            kind=data["kind"],
            params=data["params"],
            severity=data["severity"],
            channels=data["channels"],
        )
        return Response(AlertRuleSerializer(rule).data, status=status.HTTP_201_CREATED)


class AlertSerializer(serializers.ModelSerializer):
    class Meta:
        model = Alert
        fields = [
            "id",
            "rule",
            "fingerprint",
            "severity",
            "title",
            "details",
            "status",
            "count",
            "first_seen_at",
            "last_seen_at",
            "acknowledged_by",
            "acknowledged_at",
            "resolved_by",
            "resolved_at",
        ]
        read_only_fields = fields


class NoteSerializer(serializers.Serializer):
    note = serializers.CharField(max_length=2000, required=False, allow_blank=True, default="")


class AlertViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantViewSet):
    model = Alert
    serializer_class = AlertSerializer
    filterset_fields = ["status", "severity", "rule"]
    resource = "audit"
    action_verbs = {"acknowledge": "view", "resolve": "view"}  # the service checks policy.manage

    @extend_schema(request=NoteSerializer, responses=AlertSerializer)
    @action(detail=True, methods=["post"])
    def acknowledge(self, request, pk=None):
        incoming = NoteSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        alert = alerts.alert_acknowledge(
            actor=self.actor, alert=self.get_object(), note=incoming.validated_data["note"]
        )
        return Response(AlertSerializer(alert).data)

    @extend_schema(request=NoteSerializer, responses=AlertSerializer)
    @action(detail=True, methods=["post"])
    def resolve(self, request, pk=None):
        incoming = NoteSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        alert = alerts.alert_resolve(
            actor=self.actor, alert=self.get_object(), note=incoming.validated_data["note"]
        )
        return Response(AlertSerializer(alert).data)
