"""Evaluation API under /api/v1/evaluation/: suites, cases (written, saved from a turn,
imported from JSONL), replays (runs) and their per-case results. Read with evaluation.view,
write with evaluation.manage (API keys: `templates:write`, capped by the creator's roles);
a case holding a person's turn or memory the reader may not read is not there (404)."""

from __future__ import annotations

from django.urls import path
from django.utils.translation import gettext as _
from drf_spectacular.utils import extend_schema, extend_schema_field, inline_serializer
from rest_framework import mixins, serializers, status
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.response import Response
from rest_framework.routers import SimpleRouter
from rest_framework.viewsets import ViewSet

from cadre.agents.evaluation import gates, selectors, services
from cadre.agents.evaluation.models import EvalCase, EvalResult, EvalRun, EvalSuite
from cadre.agents.models import AgentTemplate, Run
from cadre.api.parsers import BoundedFormParser, BoundedJSONParser, BoundedMultiPartParser
from cadre.api.viewsets import TenantViewSet
from cadre.errors import InvalidInput
from cadre.identifiers import parse_pk
from cadre.tenancy.api.serializers import TenantPrimaryKeyRelatedField

MAX_IMPORT_BYTES = 10 * 1024 * 1024


class JudgeSerializer(serializers.Serializer):
    """A model-judged rubric for the replies: the judge model (a provider configuration, or a
    provider kind with a model name) and the rubric it judges by."""

    provider_config = serializers.IntegerField(required=False, allow_null=True)
    provider = serializers.CharField(max_length=200, required=False)
    model = serializers.CharField(max_length=200, required=False)
    rubric = serializers.CharField(max_length=4000)


class EvalSuiteSerializer(serializers.ModelSerializer):
    case_count = serializers.IntegerField(read_only=True, default=0)
    judge = serializers.SerializerMethodField()

    class Meta:
        model = EvalSuite
        fields = [
            "id",
            "name",
            "kind",
            "description",
            "template",
            "regression_threshold",
            "judge",
            "case_count",
            "created_by",
            "created_at",
        ]
        read_only_fields = fields

    @extend_schema_field(JudgeSerializer(allow_null=True))
    def get_judge(self, suite) -> dict | None:
        """The judge model and rubric the replies are judged by, or null (rule checks only)."""
        return suite.judge or None


class EvalSuiteWriteSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    kind = serializers.ChoiceField(
        choices=EvalSuite.Kind.choices, default=EvalSuite.Kind.CONVERSATION
    )
    description = serializers.CharField(required=False, allow_blank=True, default="")
    template = TenantPrimaryKeyRelatedField(
        queryset=AgentTemplate.objects.all(), required=False, allow_null=True, default=None
    )
    regression_threshold = serializers.FloatField(min_value=0, max_value=1, default=0.05)
    judge = JudgeSerializer(required=False, allow_null=True, default=None)


class EvalSuiteUpdateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=200, required=False)
    description = serializers.CharField(required=False, allow_blank=True)
    regression_threshold = serializers.FloatField(min_value=0, max_value=1, required=False)
    judge = JudgeSerializer(required=False, allow_null=True)


class EvalCaseSerializer(serializers.ModelSerializer):
    class Meta:
        model = EvalCase
        fields = [
            "id",
            "suite",
            "title",
            "input_text",
            "conversation",
            "member",
            "scopes",
            "as_of",
            "tool_results",
            "expectations",
            "source",
            "source_run",
            "created_by",
            "created_at",
        ]
        read_only_fields = fields


class EvalCaseWriteSerializer(serializers.Serializer):
    """A case as sent: `expectations` as one object (JSON), or its keys at the top level."""

    suite = TenantPrimaryKeyRelatedField(queryset=EvalSuite.objects.all())
    title = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    input = serializers.CharField(max_length=services.MAX_TEXT, trim_whitespace=False)
    conversation = serializers.ListField(child=serializers.DictField(), required=False)
    member = serializers.IntegerField(required=False, allow_null=True, min_value=1)
    scopes = serializers.ListField(child=serializers.CharField(max_length=191), required=False)
    as_of = serializers.DateTimeField(required=False)
    tool_results = serializers.ListField(child=serializers.DictField(), required=False)
    expectations = serializers.DictField(required=False)
    reference_reply = serializers.CharField(required=False, allow_blank=True)
    required_facts = serializers.ListField(child=serializers.CharField(), required=False)
    forbidden_facts = serializers.ListField(child=serializers.CharField(), required=False)
    expected_policy = serializers.ChoiceField(choices=services.POLICY_OUTCOMES, required=False)


class FromTurnSerializer(serializers.Serializer):
    suite = TenantPrimaryKeyRelatedField(queryset=EvalSuite.objects.all())
    run = TenantPrimaryKeyRelatedField(queryset=Run.objects.all())
    step_index = serializers.IntegerField(required=False, allow_null=True, min_value=0)
    title = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    required_facts = serializers.ListField(child=serializers.CharField(), required=False)
    forbidden_facts = serializers.ListField(child=serializers.CharField(), required=False)


class ImportSerializer(serializers.Serializer):
    suite = TenantPrimaryKeyRelatedField(queryset=EvalSuite.objects.all())
    file = serializers.FileField(help_text="JSONL: one case per line")


class EvalRunSerializer(serializers.ModelSerializer):
    class Meta:
        model = EvalRun
        fields = [
            "id",
            "suite",
            "baseline",
            "candidate",
            "status",
            "verdict",
            "summary",
            "error",
            "created_by",
            "created_at",
            "started_at",
            "finished_at",
        ]
        read_only_fields = fields


class EvalRunWriteSerializer(serializers.Serializer):
    """`candidate` (and `baseline`, default `{"kind": "current"}`): `{"kind":
    "template_version", "version": id}`, `{"kind": "model", "model_settings": {…}}`,
    `{"kind": "embedding", "embedding_model": "<id>"}` or `{"kind": "current"}`."""

    suite = TenantPrimaryKeyRelatedField(queryset=EvalSuite.objects.all())
    candidate = serializers.DictField()
    baseline = serializers.DictField(required=False)


class JudgeVerdictSerializer(serializers.Serializer):
    """The judge's verdict on one side's reply ("error": "judge_error" with "detail" when its
    answer could not be read)."""

    passed = serializers.BooleanField(source="pass", required=False)
    score = serializers.FloatField(required=False)
    reasons = serializers.CharField(required=False)
    error = serializers.CharField(required=False)
    detail = serializers.CharField(required=False)


class JudgeVerdictsSerializer(serializers.Serializer):
    baseline = JudgeVerdictSerializer(allow_null=True)
    candidate = JudgeVerdictSerializer(allow_null=True)


class EvalResultSerializer(serializers.ModelSerializer):
    judge = serializers.SerializerMethodField()

    class Meta:
        model = EvalResult
        fields = [
            "id",
            "case",
            "baseline",
            "candidate",
            "comparison",
            "judge",
            "baseline_passed",
            "candidate_passed",
            "regressed",
            "created_at",
        ]
        read_only_fields = fields

    @extend_schema_field(JudgeVerdictsSerializer(allow_null=True))
    def get_judge(self, result) -> dict | None:
        """Each side's judge verdict, or null when the suite has no judge."""
        base, cand = result.baseline.get("judge"), result.candidate.get("judge")
        if base is None and cand is None:
            return None
        return JudgeVerdictsSerializer({"baseline": base, "candidate": cand}).data


def _numeric(spec: dict) -> dict:
    """A side as a form body carries it: every value is text and nesting is dotted
    (`model_settings.model`); a version id sent as "12" is the number 12."""
    nested: dict = {}
    for key, value in spec.items():
        target = nested
        *parents, last = str(key).split(".")
        for parent in parents:
            target = target.setdefault(parent, {})
            if not isinstance(target, dict):
                raise InvalidInput(
                    _("%(key)s: conflicting keys.") % {"key": key}, code="invalid_side"
                )
        target[last] = value
    if isinstance(nested.get("version"), str):
        # "²" and "١٢" are digits to str.isdigit() but no key: they stay text, and are refused
        nested["version"] = parse_pk(nested["version"]) or nested["version"]
    return nested


class EvalSuiteViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    mixins.DestroyModelMixin,
    TenantViewSet,
):
    model = EvalSuite
    serializer_class = EvalSuiteSerializer
    filterset_fields = ["kind", "template"]
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def base_queryset(self):
        from django.db.models import Count

        return EvalSuite.objects.annotate(case_count=Count("cases")).order_by("name", "pk")

    @extend_schema(request=EvalSuiteWriteSerializer, responses={201: EvalSuiteSerializer})
    def create(self, request, *args, **kwargs):
        incoming = EvalSuiteWriteSerializer(data=request.data, context={"request": request})
        incoming.is_valid(raise_exception=True)
        suite = services.suite_create(actor=self.actor, **incoming.validated_data)
        return Response(EvalSuiteSerializer(suite).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=EvalSuiteUpdateSerializer, responses={200: EvalSuiteSerializer})
    def partial_update(self, request, *args, **kwargs):
        suite = self.get_object()
        incoming = EvalSuiteUpdateSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        suite = services.suite_update(actor=self.actor, suite=suite, **incoming.validated_data)
        return Response(EvalSuiteSerializer(self.get_queryset().get(pk=suite.pk)).data)

    def destroy(self, request, *args, **kwargs):
        services.suite_delete(actor=self.actor, suite=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)


class EvalCaseViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.DestroyModelMixin,
    TenantViewSet,
):
    model = EvalCase
    serializer_class = EvalCaseSerializer
    filterset_fields = ["suite", "source"]
    parser_classes = [BoundedJSONParser, BoundedMultiPartParser, BoundedFormParser]
    action_verbs = {"from_turn": "manage", "import_jsonl": "manage"}

    def base_queryset(self):
        return EvalCase.objects.all()

    def get_queryset(self):
        queryset = super().get_queryset()
        if getattr(self, "swagger_fake_view", False):
            return queryset
        return queryset.exclude(pk__in=selectors.hidden_case_ids(self.actor))

    def _require_in_organization(self) -> None:
        """Before the permission refusal (403): a case holding another person's turn, or a
        memory scope the caller may not read, is not found (404) whatever the caller's
        permissions, so the refusal does not tell a colleague's turn was saved."""
        super()._require_in_organization()
        value = self.kwargs.get(self.lookup_url_kwarg or self.lookup_field)
        if value is not None and parse_pk(value) in selectors.hidden_case_ids(self.actor):
            raise NotFound()

    @extend_schema(request=EvalCaseWriteSerializer, responses={201: EvalCaseSerializer})
    def create(self, request, *args, **kwargs):
        incoming = EvalCaseWriteSerializer(data=request.data, context={"request": request})
        incoming.is_valid(raise_exception=True)
        data = dict(incoming.validated_data)
        suite = data.pop("suite")
        if "as_of" in data:
            data["as_of"] = data["as_of"].isoformat()
        case = services.case_create(actor=self.actor, suite=suite, data=data)
        return Response(EvalCaseSerializer(case).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=FromTurnSerializer, responses={201: EvalCaseSerializer})
    @action(detail=False, methods=["post"], url_path="from-turn")
    def from_turn(self, request):
        """A case from a real turn (a completed run): "add to evaluation"."""
        incoming = FromTurnSerializer(data=request.data, context={"request": request})
        incoming.is_valid(raise_exception=True)
        data = incoming.validated_data
        expectations = {k: data[k] for k in ("required_facts", "forbidden_facts") if data.get(k)}
        case = services.case_from_turn(
            actor=self.actor,
            suite=data["suite"],
            run=data["run"],
            step_index=data.get("step_index"),
            expectations=expectations,
            title=data.get("title", ""),
        )
        return Response(EvalCaseSerializer(case).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        request={"multipart/form-data": ImportSerializer},
        responses={
            201: inline_serializer(
                "EvalCaseImport",
                {
                    "imported": serializers.IntegerField(),
                    "ids": serializers.ListField(child=serializers.IntegerField()),
                },
            )
        },
    )
    @action(detail=False, methods=["post"], url_path="import", url_name="import")
    def import_jsonl(self, request):
        """Cases from a JSONL file; a bad line refuses the file (400 `invalid_jsonl`, every bad
        line by number in `details.lines`) and nothing is imported."""
        incoming = ImportSerializer(data=request.data, context={"request": request})
        incoming.is_valid(raise_exception=True)
        upload = incoming.validated_data["file"]
        if upload.size > MAX_IMPORT_BYTES:
            raise InvalidInput(_("The file is larger than 10 MB."), code="too_large")
        cases = services.cases_import_jsonl(
            actor=self.actor, suite=incoming.validated_data["suite"], content=upload.read()
        )
        return Response(
            {"imported": len(cases), "ids": [case.pk for case in cases]},
            status=status.HTTP_201_CREATED,
        )

    def destroy(self, request, *args, **kwargs):
        services.case_delete(actor=self.actor, case=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)


class EvalRunViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    TenantViewSet,
):
    model = EvalRun
    serializer_class = EvalRunSerializer
    filterset_fields = ["suite", "status", "verdict"]

    def base_queryset(self):
        return EvalRun.objects.all()

    @extend_schema(request=EvalRunWriteSerializer, responses={202: EvalRunSerializer})
    def create(self, request, *args, **kwargs):
        """Start a replay: queued and executed in the background; poll the run for its status."""
        incoming = EvalRunWriteSerializer(data=request.data, context={"request": request})
        incoming.is_valid(raise_exception=True)
        data = incoming.validated_data
        run = services.eval_run_start(
            actor=self.actor,
            suite=data["suite"],
            candidate=_numeric(data["candidate"]),
            baseline=_numeric(data["baseline"]) if data.get("baseline") else None,
        )
        return Response(EvalRunSerializer(run).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(responses={200: EvalResultSerializer(many=True)})
    @action(detail=True, methods=["get"])
    def results(self, request, pk=None):
        """The run's per-case results (baseline, candidate, comparison), in case order: those
        of the cases the caller may read."""
        run = self.get_object()
        queryset = selectors.results_for(self.actor, run)
        regressed = request.query_params.get("regressed")
        if regressed in ("true", "1"):
            queryset = queryset.filter(regressed=True)
        page = self.paginate_queryset(queryset)
        return self.get_paginated_response(EvalResultSerializer(page, many=True).data)


class EvaluationGatesSerializer(serializers.Serializer):
    """Which changes need a passing replay first; a gate left out of a PUT body keeps its
    setting. Unknown keys are refused (400 `unknown_gate`)."""

    template_publish = serializers.BooleanField(
        required=False, help_text="Publishing a template version needs a passing replay of it."
    )
    template_model_change = serializers.BooleanField(
        required=False,
        help_text="Publishing a version that changes the template's model (provider, provider "
        "configuration or model) needs a passing replay of that model change.",
    )
    embedding_activate = serializers.BooleanField(
        required=False,
        help_text="Switching search to a new embedding model needs a passing retrieval-suite "
        "replay with it as the candidate; a re-embed fills the vectors and waits for a person.",
    )


class EvaluationGatesViewSet(ViewSet):
    """The organization's evaluation gates: read with evaluation.view, set with
    organization.manage (API keys: `org:admin`)."""

    serializer_class = EvaluationGatesSerializer

    @extend_schema(responses=EvaluationGatesSerializer)
    def retrieve(self, request):
        request.actor.require("evaluation.view")
        return Response(gates.gates_of(request.actor.organization))

    @extend_schema(request=EvaluationGatesSerializer, responses=EvaluationGatesSerializer)
    def update(self, request):
        # Permission before validation: a caller who may not change them learns nothing more.
        request.actor.require("organization.manage")
        if not isinstance(request.data, dict):
            raise InvalidInput(_("The body must be an object of gates."), code="invalid_gates")
        unknown = sorted(set(request.data) - set(gates.GATES))
        if unknown:
            raise InvalidInput(
                _("Unknown gates: %(value)s.") % {"value": ', '.join(unknown)}, code="unknown_gate",
                details={key: ["Not a gate."] for key in unknown},
            )  # fmt: skip
        incoming = EvaluationGatesSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        return Response(
            gates.evaluation_gates_set(actor=request.actor, gates=incoming.validated_data)
        )


router = SimpleRouter()
router.register("suites", EvalSuiteViewSet, basename="eval-suite")
router.register("cases", EvalCaseViewSet, basename="eval-case")
router.register("runs", EvalRunViewSet, basename="eval-run")

evaluation_gates = EvaluationGatesViewSet.as_view({"get": "retrieve", "put": "update"})

urlpatterns = [path("gates/", evaluation_gates, name="evaluation-gates"), *router.urls]
