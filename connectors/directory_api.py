"""IM directory sync API under /api/v1/: start a sync, follow its runs, work the conflicts queue.

Like the rest of the connectors API it needs `connector.manage` (scope `connectors:write` for
API keys): a sync writes members, and the conflicts show directory records.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status
from rest_framework.decorators import action
from rest_framework.response import Response
from rest_framework.routers import SimpleRouter

from cadre.tenancy.api.serializers import TenantPrimaryKeyRelatedField
from cadre.tenancy.models import Member
from connectors.api import ConnectorField, ManageOnly
from connectors.directory.sync import directory_conflict_resolve, directory_sync_start
from connectors.models import Connector, DirectoryConflict, DirectorySync


class DirectorySyncSerializer(serializers.ModelSerializer):
    counts = serializers.DictField(child=serializers.IntegerField(), read_only=True)
    errors = serializers.ListField(child=serializers.DictField(), read_only=True)

    class Meta:
        model = DirectorySync
        fields = [
            "id", "connector", "kind", "status", "phase", "progress_done", "progress_total",
            "counts", "error_code", "error", "errors", "requested_by", "created_at",
            "started_at", "finished_at",
        ]  # fmt: skip
        read_only_fields = fields


class DirectoryConflictSerializer(serializers.ModelSerializer):
    directory_values = serializers.DictField(read_only=True)
    local_values = serializers.DictField(read_only=True)
    # "" until resolved: declared so the schema says so (a read-only model field loses it).
    resolution = serializers.ChoiceField(
        choices=DirectoryConflict.Resolution.choices, allow_blank=True, read_only=True
    )

    class Meta:
        model = DirectoryConflict
        fields = [
            "id", "connector", "sync", "kind", "platform_user_id", "member", "directory_values",
            "local_values", "fields", "message", "status", "resolution", "resolved_by",
            "resolved_at", "created_at", "updated_at",
        ]  # fmt: skip
        read_only_fields = fields


class DirectorySyncStartSerializer(serializers.Serializer):
    connector = ConnectorField(queryset=Connector.objects.all())


class ConflictResolveSerializer(serializers.Serializer):
    resolution = serializers.ChoiceField(choices=DirectoryConflict.Resolution.choices)
    member = TenantPrimaryKeyRelatedField(
        queryset=Member.objects.all(), required=False, allow_null=True
    )


class DirectorySyncViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, ManageOnly):
    """Directory sync runs (full, nightly reconciliation, one per contact-change event), newest
    first. POST starts a full sync of a connector's contact directory (202; one at a time:
    409 `sync_running`); follow its progress here."""

    model = DirectorySync
    serializer_class = DirectorySyncSerializer
    filterset_fields = ["connector", "kind", "status"]

    @extend_schema(request=DirectorySyncStartSerializer, responses={202: DirectorySyncSerializer})
    def create(self, request, *args, **kwargs):
        data = DirectorySyncStartSerializer(data=request.data, context={"request": request})
        data.is_valid(raise_exception=True)
        sync = directory_sync_start(actor=self.actor, connector=data.validated_data["connector"])
        return Response(DirectorySyncSerializer(sync).data, status=status.HTTP_202_ACCEPTED)


class DirectoryConflictViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, ManageOnly):
    """The review queue: what a sync would not decide alone. `?status=open` lists the queue."""

    model = DirectoryConflict
    serializer_class = DirectoryConflictSerializer
    filterset_fields = ["connector", "kind", "status"]
    action_verbs = {**ManageOnly.action_verbs, "resolve": "manage"}

    @extend_schema(request=ConflictResolveSerializer, responses=DirectoryConflictSerializer)
    @action(detail=True, methods=["post"])
    def resolve(self, request, pk=None):
        conflict = self.get_object()
        data = ConflictResolveSerializer(data=request.data, context={"request": request})
        data.is_valid(raise_exception=True)
        conflict = directory_conflict_resolve(
            actor=self.actor,
            conflict=conflict,
            resolution=data.validated_data["resolution"],
            member=data.validated_data.get("member"),
        )
        return Response(DirectoryConflictSerializer(conflict).data, status=status.HTTP_200_OK)


router = SimpleRouter()
router.register("directory-syncs", DirectorySyncViewSet, basename="directory-sync")
router.register("directory-conflicts", DirectoryConflictViewSet, basename="directory-conflict")
urlpatterns = router.urls
