"""The organization's embedding models: `GET /api/v1/embedding-models/` (the models its search
uses, used or is being re-embedded under, with its own status of each) and switching its search
to another one, `POST /api/v1/embedding-models/activate/`. Both need `model.manage` (API keys
`models:write`): changing the model search compares meanings with is model management, not a
memory write. The switch is the organization's: another organization's search, models and
audit trail are untouched, and its gate (evaluation's `embedding_activate`) may require a
passing recall check or a reason."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from cadre.memory.models import OrganizationEmbeddingModel
from cadre.memory.reembed import embedding_activate, embedding_models


class EmbeddingModelSerializer(serializers.ModelSerializer):
    """An embedding model as the organization uses it (`status` is the organization's)."""

    id = serializers.CharField(source="model_id", help_text="the embedding model's id")
    provider = serializers.CharField(source="model.provider")
    name = serializers.CharField(source="model.name")
    dimension = serializers.IntegerField(source="model.dimension")

    class Meta:
        model = OrganizationEmbeddingModel
        fields = ["id", "provider", "name", "dimension", "status", "activated_at"]
        read_only_fields = fields


class EmbeddingActivateSerializer(serializers.Serializer):
    model = serializers.CharField(max_length=128, help_text="the embedding model's id")
    override_gate = serializers.CharField(
        max_length=500,
        required=False,
        allow_blank=True,
        default="",
        help_text="why to switch although the evaluation gate fails (audited)",
    )


class EmbeddingModelListView(APIView):
    """The organization's embedding models: the active one, those a re-embed is filling and
    those retired (only its own; another organization's switches are not shown)."""

    @extend_schema(responses=EmbeddingModelSerializer(many=True))
    def get(self, request):
        request.actor.require("model.manage")
        uses = embedding_models(request.actor.organization)
        return Response(EmbeddingModelSerializer(uses, many=True).data)


class EmbeddingActivateView(APIView):
    """Switch the organization's search to a re-embedded model: 409 `reembed_incomplete` while
    one of its memories lacks its vector, 409 `evaluation_gate` when its gate fails and no
    reason is given, 404 for a model it has not been re-embedded under."""

    @extend_schema(
        request=EmbeddingActivateSerializer,
        responses={
            200: EmbeddingModelSerializer,
            404: OpenApiResponse(description="No embedding model with that id."),
        },
    )
    def post(self, request):
        # Permission before validation: a caller who may not switch learns nothing more.
        request.actor.require("model.manage")
        incoming = EmbeddingActivateSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        use = embedding_activate(
            actor=request.actor,
            model_id=incoming.validated_data["model"],
            override_gate=incoming.validated_data["override_gate"],
        )
        return Response(EmbeddingModelSerializer(use).data)
