"""Confirmations API: the decider's queue, details, approve / reject / cancel."""

from __future__ import annotations

import django_filters
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers
from rest_framework.decorators import action
from rest_framework.response import Response

from cadre.api.viewsets import TenantViewSet
from cadre.governance import confirmations
from cadre.governance.models import Confirmation


class ConfirmationSerializer(serializers.ModelSerializer):
    may_decide = serializers.SerializerMethodField()

    class Meta:
        model = Confirmation
        fields = [
            "id",
            "status",
            "tool",
            "arguments",
            "summary",
            "risk_level",
            "risk_reasons",
            "blast_radius",
            "requester",
            "agent_id",
            "run_id",
            "step_index",
            "decider_ids",
            "required_approvals",
            "may_decide",
            "decided_via",
            "decided_by",
            "decided_at",
            "decision_reason",
            "trace_id",
            "expires_at",
            "created_at",
        ]
        read_only_fields = fields

    def get_may_decide(self, confirmation) -> bool:
        request = self.context.get("request")
        member = getattr(getattr(request, "actor", None), "member", None)
        return (
            confirmation.status == Confirmation.Status.PENDING
            and member is not None
            and member.pk in confirmation.decider_ids
        )


class DecisionSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=2000, required=False, allow_blank=True, default="")


class ConfirmationFilter(django_filters.FilterSet):
    mine = django_filters.BooleanFilter(method="by_mine", help_text="Only those I may decide")

    class Meta:
        model = Confirmation
        fields = ["status", "risk_level", "run_id"]

    def by_mine(self, queryset, name, value):
        member = getattr(self.request.actor, "member", None)
        if not value or member is None:
            return queryset
        return queryset.filter(decider_ids__contains=[member.pk])


class ConfirmationViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantViewSet):
    """Everyone sees the confirmations they requested or may decide; deciders and auditors
    see all. Approve / reject check the decider rule in the service."""

    model = Confirmation
    serializer_class = ConfirmationSerializer
    filterset_class = ConfirmationFilter
    # Reading and deciding are checked per object (the decider list), not by a role.
    action_verbs = {"approve": "view", "reject": "view", "cancel": "view"}

    def check_permissions(self, request):
        super(TenantViewSet, self).check_permissions(request)  # authenticated actor only

    def _decide(self, request, decision: str):
        confirmation = self.get_object()
        incoming = DecisionSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        via = "api" if self.actor.kind == "api_key" else "console"
        decided = confirmations.confirmation_decide(
            confirmation=confirmation,
            actor=self.actor,
            decision=decision,
            via=via,
            reason=incoming.validated_data["reason"],
        )
        return Response(self.get_serializer(decided).data)

    @extend_schema(request=DecisionSerializer, responses=ConfirmationSerializer)
    @action(detail=True, methods=["post"])
    def approve(self, request, pk=None):
        return self._decide(request, "approve")

    @extend_schema(request=DecisionSerializer, responses=ConfirmationSerializer)
    @action(detail=True, methods=["post"])
    def reject(self, request, pk=None):
        return self._decide(request, "reject")

    @extend_schema(request=DecisionSerializer, responses=ConfirmationSerializer)
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        confirmation = self.get_object()
        incoming = DecisionSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        cancelled = confirmations.confirmation_cancel(
            actor=self.actor, confirmation=confirmation, reason=incoming.validated_data["reason"]
        )
        return Response(self.get_serializer(cancelled).data)
