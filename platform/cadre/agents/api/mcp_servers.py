"""REST for the organization's MCP servers whose tools agents call: /api/v1/mcp-servers/
(list, create, get, update, discover the tools, set each tool's risk, revoke, restore).

Credentials are write-only: answers say whether some are set, never what they are. Every route
needs `connector.manage` (API key scope `connectors:write`): registering a server decides what
leaves the organization."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import mixins, serializers, status
from rest_framework.decorators import action
from rest_framework.response import Response

from cadre.agents import mcp_tools
from cadre.agents.models import McpServer
from cadre.api.viewsets import TenantViewSet


class McpToolSerializer(serializers.Serializer):
    name = serializers.CharField()
    exposed_name = serializers.CharField(help_text="The name agents' models see and templates use")
    description = serializers.CharField()
    input_schema = serializers.DictField(help_text="The JSON schema the server declared")
    annotations = serializers.DictField()
    default_risk = serializers.ChoiceField(choices=["low", "medium", "high"])
    risk = serializers.ChoiceField(choices=["low", "medium", "high"])


class McpServerSerializer(serializers.ModelSerializer):
    credentials_set = serializers.SerializerMethodField()
    tools = serializers.SerializerMethodField()

    class Meta:
        model = McpServer
        fields = [
            "id",
            "name",
            "description",
            "transport",
            "url",
            "command",
            "args",
            "credentials_set",
            "timeout_seconds",
            "tools",
            "discovered_at",
            "is_active",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields

    def get_credentials_set(self, obj) -> bool:
        return bool(obj.credentials)

    @extend_schema_field(McpToolSerializer(many=True))
    def get_tools(self, obj):
        return McpToolSerializer(mcp_tools.tools_with_risk(obj), many=True).data


class McpServerWriteSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=32)
    description = serializers.CharField(max_length=300, required=False, allow_blank=True)
    transport = serializers.ChoiceField(choices=McpServer.Transport.choices)
    url = serializers.CharField(max_length=500, required=False, allow_blank=True)
    command = serializers.CharField(max_length=500, required=False, allow_blank=True)
    args = serializers.ListField(
        child=serializers.CharField(max_length=1000), max_length=100, required=False
    )
    credentials = serializers.DictField(
        child=serializers.CharField(max_length=4000, allow_blank=True),
        required=False,
        write_only=True,
        help_text="Headers sent to a Streamable HTTP server, or environment variables of a "
        "stdio command. Encrypted at rest; never returned.",
    )
    timeout_seconds = serializers.IntegerField(min_value=1, max_value=300, required=False)


class McpServerUpdateSerializer(McpServerWriteSerializer):
    name = None
    transport = None


class McpToolRisksSerializer(serializers.Serializer):
    risks = serializers.DictField(
        child=serializers.ChoiceField(choices=["low", "medium", "high"], allow_null=True),
        help_text="Risk per tool name; null returns a tool to its default (medium, or high "
        "when the server annotates it destructiveHint).",
    )


class McpServerViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin, TenantViewSet
):
    model = McpServer
    serializer_class = McpServerSerializer
    # There is no connector.view: reading the registry is managing it.
    action_verbs = {"list": "manage", "retrieve": "manage"}

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return McpServer.objects.none()
        return McpServer.objects.restrict(self.actor, "manage")

    @extend_schema(request=McpServerWriteSerializer, responses={201: McpServerSerializer})
    def create(self, request, *args, **kwargs):
        data = McpServerWriteSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        server = mcp_tools.mcp_server_create(actor=self.actor, **data.validated_data)
        return Response(McpServerSerializer(server).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=McpServerUpdateSerializer, responses=McpServerSerializer)
    def partial_update(self, request, *args, **kwargs):
        server = self.get_object()
        data = McpServerUpdateSerializer(data=request.data, partial=True)
        data.is_valid(raise_exception=True)
        server = mcp_tools.mcp_server_update(actor=self.actor, server=server, **data.validated_data)
        return Response(McpServerSerializer(server).data)

    @extend_schema(
        request=None,
        responses=McpServerSerializer,
        description="Connect to the server and keep the tools it lists (with their schemas and "
        "annotations). A server that cannot be reached answers 400 mcp_unavailable.",
    )
    @action(detail=True, methods=["post"])
    def discover(self, request, pk=None):
        server = mcp_tools.mcp_server_discover(actor=self.actor, server=self.get_object())
        return Response(McpServerSerializer(server).data)

    @extend_schema(request=McpToolRisksSerializer, responses=McpServerSerializer)
    @action(detail=True, methods=["put"], url_path="tool-risks")
    def tool_risks(self, request, pk=None):
        server = self.get_object()
        data = McpToolRisksSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        server = mcp_tools.mcp_server_tool_risks_set(
            actor=self.actor, server=server, risks=data.validated_data["risks"]
        )
        return Response(McpServerSerializer(server).data)

    @extend_schema(request=None, responses=McpServerSerializer)
    @action(detail=True, methods=["post"])
    def revoke(self, request, pk=None):
        """Agents can no longer call the server's tools (their calls are refused, nothing is
        sent); the registration and its credentials stay until restored."""
        server = mcp_tools.mcp_server_set_active(
            actor=self.actor, server=self.get_object(), active=False
        )
        return Response(McpServerSerializer(server).data)

    @extend_schema(request=None, responses=McpServerSerializer)
    @action(detail=True, methods=["post"])
    def restore(self, request, pk=None):
        server = mcp_tools.mcp_server_set_active(
            actor=self.actor, server=self.get_object(), active=True
        )
        return Response(McpServerSerializer(server).data)
