"""Budgets and usage API: budgets (read: budget.view; write: budget.manage), the per-call
usage records, their sums by department, member, template, model or day, and a CSV export."""

from __future__ import annotations

from django.http import HttpResponse
from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, serializers, status
from rest_framework.decorators import action
from rest_framework.response import Response

from cadre.api.viewsets import TenantViewSet
from cadre.errors import InvalidInput
from cadre.governance import budgets, usage
from cadre.governance.models import Budget, UsageRecord
from cadre.tenancy.api.serializers import TenantPrimaryKeyRelatedField
from cadre.tenancy.models import Department, Member


class BudgetSerializer(serializers.ModelSerializer):
    template = serializers.IntegerField(source="template_id", read_only=True, allow_null=True)
    subject = serializers.SerializerMethodField()
    percent_used = serializers.SerializerMethodField()

    class Meta:
        model = Budget
        fields = [
            "id",
            "scope",
            "department",
            "member",
            "template",
            "subject",
            "period",
            "metric",
            "limit",
            "enforcement",
            "is_active",
            "period_start",
            "used_tokens",
            "used_cost",
            "reserved_tokens",
            "reserved_cost",
            "percent_used",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields

    def get_subject(self, budget) -> str:
        names = self.context.get("template_names")
        name = names.get(budget.template_id) if names is not None else None
        return budgets.subject_label(budget, name)

    def get_percent_used(self, budget) -> float:
        return round(float(budget.used) * 100 / float(budget.limit), 1) if budget.limit else 0.0


class BudgetWriteSerializer(serializers.Serializer):
    scope = serializers.ChoiceField(choices=Budget.Scope.choices)
    department = TenantPrimaryKeyRelatedField(
        queryset=Department.objects.all(), required=False, allow_null=True, default=None
    )
    member = TenantPrimaryKeyRelatedField(
        queryset=Member.objects.all(), required=False, allow_null=True, default=None
    )
    template = serializers.IntegerField(
        required=False, allow_null=True, default=None, min_value=1, source="template_id"
    )
    period = serializers.ChoiceField(choices=Budget.Period.choices)
    metric = serializers.ChoiceField(choices=Budget.Metric.choices)
    limit = serializers.DecimalField(max_digits=20, decimal_places=6)
    enforcement = serializers.ChoiceField(
        choices=Budget.Enforcement.choices, default=Budget.Enforcement.HARD
    )
    is_active = serializers.BooleanField(default=True)


class BudgetUpdateSerializer(serializers.Serializer):
    period = serializers.ChoiceField(choices=Budget.Period.choices, required=False)
    metric = serializers.ChoiceField(choices=Budget.Metric.choices, required=False)
    limit = serializers.DecimalField(max_digits=20, decimal_places=6, required=False)
    enforcement = serializers.ChoiceField(choices=Budget.Enforcement.choices, required=False)
    is_active = serializers.BooleanField(required=False)


class BudgetViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    mixins.DestroyModelMixin,
    TenantViewSet,
):
    model = Budget
    serializer_class = BudgetSerializer
    filterset_fields = ["scope", "period", "metric", "enforcement", "is_active"]
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def base_queryset(self):
        return Budget.objects.select_related("department", "member")

    def get_serializer_context(self):
        # Template names in one query for a page of budgets (templates live in agents).
        context = super().get_serializer_context()
        if self.action == "list" and not getattr(self, "swagger_fake_view", False):
            ids = list(
                self.get_queryset().exclude(template_id=None).values_list("template_id", flat=True)
            )
            context["template_names"] = budgets.template_names(self.actor.organization.pk, ids)
        return context

    @extend_schema(request=BudgetWriteSerializer, responses={201: BudgetSerializer})
    def create(self, request, *args, **kwargs):
        incoming = BudgetWriteSerializer(data=request.data, context={"request": request})
        incoming.is_valid(raise_exception=True)
        budget = budgets.budget_create(actor=self.actor, **incoming.validated_data)
        return Response(BudgetSerializer(budget).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=BudgetUpdateSerializer, responses={200: BudgetSerializer})
    def partial_update(self, request, *args, **kwargs):
        budget = self.get_object()
        incoming = BudgetUpdateSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        budget = budgets.budget_update(actor=self.actor, budget=budget, **incoming.validated_data)
        return Response(BudgetSerializer(budget).data)

    def perform_destroy(self, instance):
        budgets.budget_delete(actor=self.actor, budget=instance)


class UsageRecordSerializer(serializers.ModelSerializer):
    template = serializers.IntegerField(source="template_id", read_only=True, allow_null=True)
    run = serializers.IntegerField(source="run_id", read_only=True, allow_null=True)

    class Meta:
        model = UsageRecord
        fields = [
            "id",
            "member",
            "department",
            "template",
            "run",
            "purpose",
            "provider",
            "model",
            "input_tokens",
            "cached_input_tokens",
            "cache_write_tokens",
            "output_tokens",
            "cost",
            "created_at",
        ]
        read_only_fields = fields


class UsageSummarySerializer(serializers.Serializer):
    key = serializers.CharField()
    label = serializers.CharField()
    calls = serializers.IntegerField()
    input_tokens = serializers.IntegerField()
    cached_input_tokens = serializers.IntegerField()
    cache_write_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()
    total_tokens = serializers.IntegerField()
    cost = serializers.DecimalField(max_digits=20, decimal_places=6)


class UsageWindowSerializer(serializers.Serializer):
    by = serializers.ChoiceField(choices=list(usage.GROUPS), default="department")
    since = serializers.DateTimeField(required=False, default=None)
    until = serializers.DateTimeField(required=False, default=None)


WINDOW = [
    OpenApiParameter("since", OpenApiTypes.DATETIME, description="from (inclusive)"),
    OpenApiParameter("until", OpenApiTypes.DATETIME, description="to (exclusive)"),
]


class UsageViewSet(mixins.ListModelMixin, TenantViewSet):
    """Settled model calls (every call metered to a budget account) and their sums."""

    model = UsageRecord
    serializer_class = UsageRecordSerializer
    filterset_fields = ["purpose", "model", "member", "department"]

    def _window(self, request) -> dict:
        incoming = UsageWindowSerializer(data=request.query_params)
        if not incoming.is_valid():
            raise InvalidInput(_("invalid usage window"), details=incoming.errors)
        return incoming.validated_data

    def base_queryset(self):
        return UsageRecord.objects.filter(status=UsageRecord.Status.SETTLED)

    @extend_schema(
        parameters=[
            OpenApiParameter("by", OpenApiTypes.STR, enum=list(usage.GROUPS)),
            *WINDOW,
        ],
        responses=UsageSummarySerializer(many=True),
    )
    @action(detail=False, methods=["get"], pagination_class=None)
    def summary(self, request):
        window = self._window(request)
        rows = usage.usage_summary(self.actor, **window)
        return Response(UsageSummarySerializer(rows, many=True).data)

    @extend_schema(parameters=WINDOW, responses={(200, "text/csv"): OpenApiTypes.STR})
    @action(detail=False, methods=["get"], url_path="export")
    def export(self, request):
        window = self._window(request)
        records = usage.usage_records(self.actor, since=window["since"], until=window["until"])
        response = HttpResponse(usage.usage_csv(records), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = 'attachment; filename="usage.csv"'
        return response
