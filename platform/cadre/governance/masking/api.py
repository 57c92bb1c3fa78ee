"""Masking API under /api/v1/masking/: the test bench (preview) and organization rules."""

from __future__ import annotations

from django.urls import path
from django.utils.translation import gettext as _
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status
from rest_framework.response import Response
from rest_framework.routers import SimpleRouter
from rest_framework.views import APIView

from cadre.api.viewsets import TenantViewSet
from cadre.errors import NotPermitted
from cadre.governance.masking import services
from cadre.governance.masking.policy import MODES, MaskingPolicy
from cadre.governance.models import MaskingRule


class PolicySerializer(serializers.Serializer):
    default = serializers.ChoiceField(choices=MODES, required=False, default="pseudonymize")
    modes = serializers.DictField(
        child=serializers.ChoiceField(choices=MODES), required=False, default=dict
    )


class StrictCharField(serializers.CharField):
    """A string, not something that can be turned into one (a number is a client mistake)."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class PreviewRequestSerializer(serializers.Serializer):
    text = StrictCharField(max_length=services.MAX_PREVIEW_CHARS, trim_whitespace=False)
    policy = PolicySerializer(required=False)


class DetectionSerializer(serializers.Serializer):
    type = serializers.CharField()
    start = serializers.IntegerField()
    end = serializers.IntegerField()
    score = serializers.FloatField()
    recognizer = serializers.CharField()


class PreviewResponseSerializer(serializers.Serializer):
    text = serializers.CharField(help_text="The masked text")
    detections = DetectionSerializer(many=True)
    policy = PolicySerializer()


class MaskingPreviewView(APIView):
    """Run the masking engine on a sample text with the organization's rules; stores nothing."""

    @extend_schema(request=PreviewRequestSerializer, responses=PreviewResponseSerializer)
    def post(self, request):
        actor = request.actor
        if not any(actor.has(p) for p in services.PREVIEW_PERMISSIONS):
            raise NotPermitted(_("You need the 'policy.manage' or 'audit.view' permission."))
        serializer = PreviewRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        policy = MaskingPolicy.from_dict(serializer.validated_data.get("policy"))
        result = services.masking_preview(
            actor=actor, text=serializer.validated_data["text"], policy=policy
        )
        return Response(
            {
                "text": result.text,
                "detections": [d.as_dict() for d in result.detections],
                "policy": policy.as_dict(),
            }
        )


class MaskingRuleSerializer(serializers.ModelSerializer):
    terms = serializers.ListField(
        child=serializers.CharField(max_length=200), required=False, source="term_list"
    )

    class Meta:
        model = MaskingRule
        fields = [
            "id",
            "name",
            "entity_type",
            "kind",
            "pattern",
            "terms",
            "is_active",
            "created_at",
            "updated_at",
        ]
        read_only_fields = ["id", "created_at", "updated_at"]
        validators: list = []  # uniqueness is the service's job (409, not 400)


# The fields a rule's services take by the same name as the serializer's.
RULE_FIELDS = ("name", "entity_type", "kind", "pattern", "is_active")


class MaskingRuleViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    mixins.DestroyModelMixin,
    TenantViewSet,
):
    """Organization-defined masking rules (regex patterns, dictionaries); policy.manage."""

    model = MaskingRule
    serializer_class = MaskingRuleSerializer
    action_verbs = {"list": "manage", "retrieve": "manage", "metadata": "manage"}

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return MaskingRule.objects.none()
        return MaskingRule.objects.restrict(self.actor, "manage")

    def _fields(self, serializer) -> dict:
        """The rule fields the caller sent, by the services' names (`term_list` is `terms`)."""
        data = serializer.validated_data
        fields = {name: data[name] for name in RULE_FIELDS if name in data}
        if "term_list" in data:
            fields["terms"] = data["term_list"]
        return fields

    def perform_create(self, serializer):
        fields = self._fields(serializer)
        serializer.instance = services.masking_rule_create(
            actor=self.actor,
            name=fields["name"],
            entity_type=fields["entity_type"],
            kind=fields["kind"],
            pattern=fields.get("pattern", ""),
            terms=fields.get("terms"),
            is_active=fields.get("is_active", True),
        )

    def perform_update(self, serializer):
        serializer.instance = services.masking_rule_update(
            actor=self.actor, rule=serializer.instance, **self._fields(serializer)
        )

    def destroy(self, request, *args, **kwargs):
        services.masking_rule_delete(actor=self.actor, rule=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)


router = SimpleRouter()
router.register("masking/rules", MaskingRuleViewSet, basename="masking-rule")

urlpatterns = [
    path("masking/preview", MaskingPreviewView.as_view(), name="masking-preview"),
    *router.urls,
]
