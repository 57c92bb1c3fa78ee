"""Connectors management API under /api/v1/: connectors, their bindings, the unmapped queue.

Everything here needs `connector.manage` (owners and IT admins): credentials are write-only
(never returned), and each connector shows the callback URL to paste into the platform.
"""

from __future__ import annotations

import django_filters
from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status
from rest_framework.decorators import action
from rest_framework.response import Response
from rest_framework.routers import SimpleRouter

from cadre.api.fields import RegisteredChoiceField
from cadre.api.viewsets import TenantViewSet
from cadre.im import platform_choices
from cadre.tenancy.api.serializers import TenantPrimaryKeyRelatedField
from cadre.tenancy.models import Department, Member, Position
from connectors.base import services
from connectors.models import Connector, ConnectorBinding, UnmappedIdentity


class ConnectorSerializer(serializers.ModelSerializer):
    callback_url = serializers.SerializerMethodField()

    class Meta:
        model = Connector
        fields = [
            "id", "platform", "name", "public_id", "callback_url", "settings", "status",
            "created_at", "updated_at", "credentials_rotated_at", "last_event_at",
            "last_failure_at", "last_failure", "failures", "signature_rejections",
        ]  # fmt: skip
        read_only_fields = fields

    def get_callback_url(self, connector: Connector) -> str:
        base = settings.CADRE_BASE_URL
        return f"{base}/connectors/{connector.platform}/{connector.public_id}/events"


class ConnectorCreateSerializer(serializers.Serializer):
    platform = RegisteredChoiceField(choices=platform_choices)
    name = serializers.CharField(max_length=150)
    credentials = serializers.DictField(child=serializers.CharField(max_length=4096))
    settings = serializers.DictField(required=False)


class ConnectorUpdateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=150, required=False)
    settings = serializers.DictField(required=False)
    status = serializers.ChoiceField(choices=Connector.Status.choices, required=False)


class CredentialsSerializer(serializers.Serializer):
    credentials = serializers.DictField(child=serializers.CharField(max_length=4096))


class ManageOnly(TenantViewSet):
    """Reading a connector's setup is as sensitive as changing it: `connector.manage` for all."""

    action_verbs = {"list": "manage", "retrieve": "manage"}

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return self.model.objects.none()
        return self.base_queryset().restrict(self.actor, "manage")


class ConnectorViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin,
    mixins.UpdateModelMixin, ManageOnly,
):  # fmt: skip
    model = Connector
    serializer_class = ConnectorSerializer
    filterset_fields = ["platform", "status"]

    @extend_schema(request=ConnectorCreateSerializer, responses={201: ConnectorSerializer})
    def create(self, request, *args, **kwargs):
        data = ConnectorCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        connector = services.connector_create(
            actor=self.actor,
            platform=data.validated_data["platform"],
            name=data.validated_data["name"],
            credentials=data.validated_data["credentials"],
            settings=data.validated_data.get("settings"),
        )
        return Response(ConnectorSerializer(connector).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=ConnectorUpdateSerializer, responses=ConnectorSerializer)
    def update(self, request, *args, **kwargs):
        connector = self.get_object()
        data = ConnectorUpdateSerializer(data=request.data, partial=kwargs.get("partial", False))
        data.is_valid(raise_exception=True)
        connector = services.connector_update(
            actor=self.actor,
            connector=connector,
            name=data.validated_data.get("name"),
            settings=data.validated_data.get("settings"),
            status=data.validated_data.get("status"),
        )
        return Response(ConnectorSerializer(connector).data)

    @extend_schema(request=CredentialsSerializer, responses=ConnectorSerializer)
    @action(detail=True, methods=["post"], url_path="rotate-credentials")
    def rotate_credentials(self, request, pk=None):
        connector = self.get_object()
        data = CredentialsSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        connector = services.connector_rotate_credentials(
            actor=self.actor, connector=connector, credentials=data.validated_data["credentials"]
        )
        return Response(ConnectorSerializer(connector).data)


class ConnectorField(serializers.PrimaryKeyRelatedField):
    """A connector of the actor's organization that the actor may manage."""

    def get_queryset(self):
        actor = getattr(self.context.get("request"), "actor", None)
        return Connector.objects.restrict(actor, "manage")


class BindingSerializer(serializers.ModelSerializer):
    connector = ConnectorField(queryset=Connector.objects.all())
    positions = TenantPrimaryKeyRelatedField(
        queryset=Position.objects.all(), many=True, required=False
    )
    departments = TenantPrimaryKeyRelatedField(
        queryset=Department.objects.all(), many=True, required=False
    )
    members = TenantPrimaryKeyRelatedField(queryset=Member.objects.all(), many=True, required=False)
    chat_ids = serializers.ListField(child=serializers.CharField(max_length=191), required=False)

    class Meta:
        model = ConnectorBinding
        fields = [
            "id", "connector", "name", "deployment_id", "positions", "departments", "members",
            "chat_ids", "created_at",
        ]  # fmt: skip
        read_only_fields = ["id", "created_at"]


class BindingViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin,
    mixins.DestroyModelMixin, ManageOnly,
):  # fmt: skip
    model = ConnectorBinding
    serializer_class = BindingSerializer
    filterset_fields = ["connector"]

    def base_queryset(self):
        return ConnectorBinding.objects.prefetch_related("positions", "departments", "members")

    def perform_create(self, serializer):
        data = serializer.validated_data
        serializer.instance = services.binding_create(
            actor=self.actor,
            connector=data["connector"],
            name=data.get("name", ""),
            positions=data.get("positions", ()),
            departments=data.get("departments", ()),
            members=data.get("members", ()),
            chat_ids=data.get("chat_ids", ()),
            deployment_id=data.get("deployment_id"),
        )

    def perform_destroy(self, instance):
        services.binding_delete(actor=self.actor, binding=instance)


class UnmappedIdentitySerializer(serializers.ModelSerializer):
    class Meta:
        model = UnmappedIdentity
        fields = [
            "id", "connector", "platform_user_id", "display_name", "email", "mobile",
            "first_seen_at", "last_seen_at", "message_count", "resolved_at",
        ]  # fmt: skip
        read_only_fields = fields


class UnmappedIdentityFilter(django_filters.FilterSet):
    waiting = django_filters.BooleanFilter(
        field_name="resolved_at",
        lookup_expr="isnull",
        label="true: still waiting to be mapped or dismissed; false: resolved",
    )

    class Meta:
        model = UnmappedIdentity
        fields = ["connector", "waiting"]


class UnmappedIdentityViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, ManageOnly):
    """Platform users who wrote but match no member: map them with /im-identities/ (or in the
    console). `?waiting=true` lists the queue: those not yet mapped or dismissed."""

    model = UnmappedIdentity
    serializer_class = UnmappedIdentitySerializer
    filterset_class = UnmappedIdentityFilter


router = SimpleRouter()
router.register("connectors", ConnectorViewSet, basename="connector")
router.register("connector-bindings", BindingViewSet, basename="connector-binding")
router.register("unmapped-identities", UnmappedIdentityViewSet, basename="unmapped-identity")
urlpatterns = router.urls
