"""Governance control APIs: audit exports, policy chains and the installed policy plugins."""

from __future__ import annotations

from django.http import StreamingHttpResponse
from django.utils.translation import gettext as _
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import mixins, serializers, status
from rest_framework.decorators import action
from rest_framework.response import Response
from rest_framework.views import APIView

from cadre.api.viewsets import TenantViewSet
from cadre.errors import Conflict, NotPermitted
from cadre.governance import export
from cadre.governance.models import AuditExport, PolicyChain
from cadre.governance.policy import all_plugins, resolve_chain
from cadre.governance.policy.services import policy_chain_set

# --- audit exports ------------------------------------------------------------------------


class AuditExportSerializer(serializers.ModelSerializer):
    progress = serializers.FloatField(read_only=True, allow_null=True)
    requested_by = serializers.PrimaryKeyRelatedField(read_only=True)

    class Meta:
        model = AuditExport
        fields = [
            "id",
            "status",
            "formats",
            "since",
            "until",
            "filters",
            "mask",
            "total_rows",
            "rows_written",
            "progress",
            "manifest",
            "error",
            "requested_by",
            "created_at",
            "started_at",
            "finished_at",
        ]
        read_only_fields = fields


class AuditExportCreateSerializer(serializers.Serializer):
    formats = serializers.ListField(
        child=serializers.ChoiceField(choices=export.FORMATS),
        min_length=1,
        max_length=3,
        default=["jsonl"],
    )
    since = serializers.DateTimeField(required=False, allow_null=True)
    until = serializers.DateTimeField(required=False, allow_null=True)
    filters = serializers.DictField(
        child=serializers.CharField(max_length=200), required=False, default=dict
    )
    mask = serializers.BooleanField(default=True)


class AuditExportViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin, TenantViewSet
):
    """Signed audit exports: create (queued as a Celery job), follow progress, download."""

    model = AuditExport
    serializer_class = AuditExportSerializer
    action_verbs = {
        "create": "export",
        "download": "export",
        "list": "export",
        "retrieve": "export",
    }

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return AuditExport.objects.none()
        return AuditExport.objects.restrict(self.actor, "export").select_related("organization")

    @extend_schema(request=AuditExportCreateSerializer, responses={202: AuditExportSerializer})
    def create(self, request, *args, **kwargs):
        incoming = AuditExportCreateSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        data = incoming.validated_data
        job = export.audit_export_create(
            actor=self.actor,
            formats=data["formats"],
            since=data.get("since"),
            until=data.get("until"),
            filters=data["filters"],
            mask=data["mask"],
        )
        return Response(AuditExportSerializer(job).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(
        responses={
            (200, "application/x-tar"): bytes,
            409: OpenApiResponse(description="The export is not ready (`export_not_ready`)."),
        }
    )
    @action(detail=True, methods=["get"])
    def download(self, request, pk=None):
        job = self.get_object()
        bundle = export.stored_bundle(job)
        if bundle is None:
            raise Conflict(
                _("The export is %(status)s, not ready to download.") % {"status": job.status},
                code="export_not_ready",
            )
        response = StreamingHttpResponse(
            export.tar_stream(bundle), content_type="application/x-tar"
        )
        response["Content-Disposition"] = f'attachment; filename="audit-export-{job.pk}.tar"'
        return response


# --- policy chains ------------------------------------------------------------------------


class PluginEntrySerializer(serializers.Serializer):
    plugin = serializers.CharField(max_length=64)
    enabled = serializers.BooleanField(default=True)
    config = serializers.DictField(required=False, default=dict)


class PolicyChainSerializer(serializers.ModelSerializer):
    plugins = PluginEntrySerializer(many=True)

    class Meta:
        model = PolicyChain
        fields = ["id", "scope", "plugins", "version", "updated_by", "updated_at"]
        read_only_fields = ["id", "scope", "version", "updated_by", "updated_at"]
        # `current` before anyone saved a chain is the unsaved default: no id, never updated.
        extra_kwargs = {"id": {"allow_null": True}, "updated_at": {"allow_null": True}}


class PolicyChainWriteSerializer(serializers.Serializer):
    plugins = serializers.ListField(child=serializers.DictField(), max_length=30)


class PolicyChainViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantViewSet):
    """The organization's chain (`current`) and template chains; `policy.manage` throughout."""

    model = PolicyChain
    serializer_class = PolicyChainSerializer
    action_verbs = {
        "list": "manage",
        "retrieve": "manage",
        "current": "manage",
        "replace": "manage",
    }

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return PolicyChain.objects.none()
        return PolicyChain.objects.restrict(self.actor, "manage")

    @extend_schema(request=PolicyChainWriteSerializer, responses=PolicyChainSerializer)
    @action(detail=False, methods=["get", "put"], url_path="current")
    def current(self, request):
        """GET the organization's chain (the default one before the first write); PUT its
        plugin list. A template's chain is at /templates/{id}/policy-chain/."""
        if request.method == "PUT":
            incoming = PolicyChainWriteSerializer(data=request.data)
            incoming.is_valid(raise_exception=True)
            chain = policy_chain_set(actor=self.actor, plugins=incoming.validated_data["plugins"])
            return Response(PolicyChainSerializer(chain).data)
        chain = PolicyChain.objects.filter(
            organization=self.actor.organization, scope=PolicyChain.Scope.ORGANIZATION
        ).first()
        if chain is not None:
            return Response(PolicyChainSerializer(chain).data)
        return Response(
            {
                "id": None,
                "scope": PolicyChain.Scope.ORGANIZATION,
                "plugins": resolve_chain(self.actor.organization).plugins,
                "version": 0,
                "updated_by": None,
                "updated_at": None,
            }
        )


class PluginSerializer(serializers.Serializer):
    name = serializers.CharField()
    stages = serializers.ListField(child=serializers.CharField())
    description = serializers.CharField()
    config_schema = serializers.DictField()


class PolicyPluginListView(APIView):
    """The installed policy plugins, their stages and configuration schemas."""

    @extend_schema(responses=PluginSerializer(many=True))
    def get(self, request):
        if not request.actor.has("policy.manage"):
            raise NotPermitted(_("You do not have the 'policy.manage' permission."))
        return Response(
            [
                {
                    "name": plugin.name,
                    "stages": list(plugin.stages),
                    "description": plugin.description,
                    "config_schema": plugin.config_schema,
                }
                for plugin in all_plugins()
            ]
        )
