"""Switching memory search to another embedding model: `POST /api/v1/embedding-models/activate/`
(`memory.manage`, API keys `memory:write`). The model is the installation's; an organization's
gate (evaluation's `embedding_activate`) may require a passing recall check or a reason."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from cadre.memory.models import EmbeddingModel
from cadre.memory.reembed import embedding_activate


class EmbeddingModelSerializer(serializers.ModelSerializer):
    class Meta:
        model = EmbeddingModel
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


class EmbeddingActivateView(APIView):
    """Switch search to a re-embedded model: 409 `reembed_incomplete` while a memory lacks its
    vector, 409 `evaluation_gate` when the organization's gate fails and no reason is given."""

    @extend_schema(
        request=EmbeddingActivateSerializer,
        responses={
            200: EmbeddingModelSerializer,
            404: OpenApiResponse(description="No embedding model with that id."),
        },
    )
    def post(self, request):
        # Permission before validation: a caller who may not switch learns nothing more.
        request.actor.require("memory.manage")
        incoming = EmbeddingActivateSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        model = embedding_activate(
            actor=request.actor,
            model_id=incoming.validated_data["model"],
            override_gate=incoming.validated_data["override_gate"],
        )
        return Response(EmbeddingModelSerializer(model).data)
