"""Skill lifecycle API under /api/v1/skills/: candidates (list, detail, upload, a reviewer's
edit, decisions, resubmission), the employee's proposals (confirm, dismiss), review stages,
distillations."""

from __future__ import annotations

import django_filters
from django.urls import path
from django.utils.translation import gettext as _
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import mixins, serializers, status
from rest_framework.decorators import action
from rest_framework.response import Response
from rest_framework.routers import SimpleRouter
from rest_framework.views import APIView

from cadre.api.parsers import BoundedFormParser, BoundedJSONParser, BoundedMultiPartParser
from cadre.api.viewsets import TenantViewSet
from cadre.errors import InvalidInput, NotPermitted
from cadre.skills import selectors, services
from cadre.skills.models import (
    DistillationRecord,
    ReviewDecision,
    SkillCandidate,
    SkillEvidence,
    SkillProposal,
)
from hub.api.views import read_upload
from hub.bundles import read_bundle

MAX_FILES_JSON = 64


# --- serializers -------------------------------------------------------------------------------


class EvidenceSerializer(serializers.ModelSerializer):
    class Meta:
        model = SkillEvidence
        fields = ["id", "kind", "summary", "data", "weight", "created_at"]
        read_only_fields = fields


class DecisionSerializer(serializers.ModelSerializer):
    decided_by_name = serializers.CharField(source="decided_by.display_name", default=None)

    class Meta:
        model = ReviewDecision
        fields = [
            "id",
            "revision",
            "stage_index",
            "stage_name",
            "decision",
            "comment",
            "decided_by",
            "decided_by_name",
            "sole_reviewer",
            "justification",
            "created_at",
        ]
        read_only_fields = fields


class ScoreComponentSerializer(serializers.Serializer):
    key = serializers.CharField()
    value = serializers.FloatField(allow_null=True)
    weight = serializers.FloatField()
    detail = serializers.CharField()
    data = serializers.DictField()


class CandidateSerializer(serializers.ModelSerializer):
    package = serializers.CharField(source="package.full_name", default=None, allow_null=True)
    published = serializers.SerializerMethodField()
    current_stage = serializers.DictField(allow_null=True, read_only=True)
    score_components = ScoreComponentSerializer(many=True, read_only=True)

    class Meta:
        model = SkillCandidate
        fields = [
            "id",
            "name",
            "description",
            "source",
            "status",
            "requested_by",
            "department",
            "package",
            "stages",
            "stage_index",
            "current_stage",
            "revision",
            "fingerprint",
            "changelog",
            "scan_verdict",
            "score",
            "score_components",
            "published",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields

    def get_published(self, candidate) -> dict | None:
        version = candidate.published_version
        if version is None:
            return None
        return {
            "package": candidate.package.full_name if candidate.package else None,
            "version": version.version,
            "key_id": version.key_id,
        }


class DiffFileSerializer(serializers.Serializer):
    path = serializers.CharField()
    status = serializers.CharField()
    lines = serializers.ListField(child=serializers.CharField())


class MayDecideSerializer(serializers.Serializer):
    allowed = serializers.BooleanField()
    reason = serializers.CharField()
    sole_reviewer = serializers.BooleanField(
        help_text="You asked for it and no other member can decide the stage: you may decide "
        "it, with `sole_reviewer_justification`"
    )


class SkillTextSerializer(serializers.Serializer):
    name = serializers.CharField()
    description = serializers.CharField()
    body = serializers.CharField()


class CandidateDetailSerializer(CandidateSerializer):
    evidence = EvidenceSerializer(many=True, read_only=True)
    decisions = DecisionSerializer(many=True, read_only=True)
    validation = serializers.DictField(read_only=True)
    scan_findings = serializers.ListField(child=serializers.DictField(), read_only=True)
    files = serializers.SerializerMethodField()
    diff = serializers.SerializerMethodField()
    may_decide = serializers.SerializerMethodField()
    skill = serializers.SerializerMethodField()

    class Meta(CandidateSerializer.Meta):
        fields = [
            *CandidateSerializer.Meta.fields,
            "validation",
            "scan_findings",
            "evidence",
            "decisions",
            "files",
            "skill",
            "diff",
            "may_decide",
        ]
        read_only_fields = fields

    @extend_schema_field(SkillTextSerializer(allow_null=True))
    def get_skill(self, candidate) -> dict | None:
        """SKILL.md's name, description and body: what a reviewer edits."""
        return selectors.candidate_skill_text(candidate)

    def get_files(self, candidate) -> list[dict]:
        return [
            {"path": path, "size": len(content)}
            for path, content in sorted(selectors.decode_files(candidate.files).items())
        ]

    def get_diff(self, candidate) -> dict:
        against, rows = selectors.candidate_diff(candidate)
        return {"against": against, "files": DiffFileSerializer(rows, many=True).data}

    @extend_schema_field(MayDecideSerializer)
    def get_may_decide(self, candidate) -> dict:
        rule = selectors.decide_rule(self.context["request"].actor, candidate)
        return {"allowed": rule.allowed, "reason": rule.reason, "sole_reviewer": rule.sole_reviewer}


class DecideSerializer(serializers.Serializer):
    decision = serializers.ChoiceField(choices=services.DECISIONS)
    comment = serializers.CharField(max_length=4000, required=False, allow_blank=True, default="")
    sole_reviewer_justification = serializers.CharField(
        max_length=4000,
        required=False,
        allow_blank=True,
        default="",
        help_text="Required when you decide your own candidate as sole reviewer "
        "(`may_decide.sole_reviewer`); audited and shown on the Hub version",
    )
    changelog = serializers.CharField(
        max_length=2000,
        required=False,
        allow_null=True,
        allow_blank=True,
        default=None,
        help_text="Sets the public changelog of the version this becomes (the comment never "
        "does: it stays internal)",
    )
    revision = serializers.IntegerField(
        required=False,
        allow_null=True,
        default=None,
        help_text="The revision you read: 409 revision_changed if it was edited meanwhile",
    )


class EditSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=64, required=False)
    description = serializers.CharField(max_length=1024, required=False)
    body = serializers.CharField(max_length=200_000, required=False, trim_whitespace=False)
    changelog = serializers.CharField(max_length=2000, required=False, allow_blank=True)
    note = serializers.CharField(
        max_length=4000,
        required=False,
        allow_blank=True,
        default="",
        help_text="Why you edit (internal, shown with the review's decisions)",
    )
    revision = serializers.IntegerField(
        required=False,
        allow_null=True,
        default=None,
        help_text="The revision you edit: 409 revision_changed if it changed meanwhile",
    )


class UploadSerializer(serializers.Serializer):
    bundle = serializers.FileField(help_text="zip or tar.gz of the skill folder")
    note = serializers.CharField(max_length=4000, required=False, allow_blank=True, default="")
    changelog = serializers.CharField(
        max_length=2000,
        required=False,
        allow_blank=True,
        default="",
        help_text="The public changelog of the version it becomes",
    )


class ResubmitSerializer(serializers.Serializer):
    files = serializers.DictField(
        child=serializers.CharField(allow_blank=True, trim_whitespace=False),
        required=False,
        help_text="path -> new text; other files are kept (or send a multipart `bundle`)",
    )
    note = serializers.CharField(max_length=4000, required=False, allow_blank=True, default="")
    changelog = serializers.CharField(max_length=2000, required=False, allow_blank=True)


class ProposalSerializer(serializers.ModelSerializer):
    package = serializers.CharField(source="package.full_name", default=None, allow_null=True)

    class Meta:
        model = SkillProposal
        fields = [
            "id",
            "status",
            "kind",
            "name",
            "summary",
            "correction",
            "package",
            "files",
            "drafted_by",
            "run",
            "session",
            "candidate",
            "created_at",
            "decided_at",
        ]
        read_only_fields = fields


class DismissSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=2000, required=False, allow_blank=True, default="")


class StageSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100)
    roles = serializers.ListField(child=serializers.CharField(max_length=32), required=False)
    permission = serializers.CharField(max_length=64, required=False, allow_blank=True)
    allow_requester = serializers.BooleanField(required=False, default=False)


class StagesSerializer(serializers.Serializer):
    stages = StageSerializer(many=True)


class DistillationSerializer(serializers.ModelSerializer):
    class Meta:
        model = DistillationRecord
        fields = [
            "id",
            "name",
            "kept",
            "reason",
            "check_method",
            "figures",
            "steps",
            "successes",
            "failures",
            "memory_ids",
            "candidate",
            "created_at",
        ]
        read_only_fields = fields


# --- views -------------------------------------------------------------------------------------


class CandidateFilter(django_filters.FilterSet):
    mine = django_filters.BooleanFilter(method="by_mine", help_text="Only those I asked for")
    to_decide = django_filters.BooleanFilter(
        method="by_to_decide", help_text="Only those waiting for a stage I may decide"
    )

    class Meta:
        model = SkillCandidate
        fields = ["status", "source", "name"]

    def by_mine(self, queryset, name, value):
        member = getattr(self.request.actor, "member", None)
        return queryset.filter(requested_by=member) if value and member else queryset

    def by_to_decide(self, queryset, name, value):
        if not value:
            return queryset
        return selectors.decidable(self.request.actor, queryset)


class _VisibleOnly:
    """Reads and writes are checked per object by the selectors and services."""

    def check_permissions(self, request):
        super(TenantViewSet, self).check_permissions(request)  # an authenticated actor

    def check_object_permissions(self, request, obj):
        super(TenantViewSet, self).check_object_permissions(request, obj)


class CandidateViewSet(
    _VisibleOnly, mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantViewSet
):
    """Candidates the actor reviews (or asked for). `POST` uploads a bundle as a candidate."""

    model = SkillCandidate
    filterset_class = CandidateFilter
    parser_classes = [BoundedJSONParser, BoundedMultiPartParser, BoundedFormParser]

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return SkillCandidate.objects.none()
        queryset = selectors.candidates_visible(self.actor)
        if self.action == "retrieve":
            queryset = queryset.prefetch_related("evidence", "decisions__decided_by")
        return queryset

    def get_serializer_class(self):
        return CandidateDetailSerializer if self.action != "list" else CandidateSerializer

    def _detail(self, candidate, code=status.HTTP_200_OK) -> Response:
        fresh = self.get_queryset().prefetch_related("evidence", "decisions__decided_by")
        candidate = fresh.get(pk=candidate.pk)
        return Response(
            CandidateDetailSerializer(candidate, context={"request": self.request}).data,
            status=code,
        )

    @extend_schema(
        request={"multipart/form-data": UploadSerializer},
        responses={201: CandidateDetailSerializer},
        description="Upload a skill bundle (zip or tar.gz) as a candidate for review.",
    )
    def create(self, request):
        if not self.actor.has("skill.publish"):
            raise NotPermitted(_("Uploading a skill candidate needs 'skill.publish'."))
        has = hasattr(request.data, "get")
        note = str(request.data.get("note", ""))[:4000] if has else ""
        changelog = str(request.data.get("changelog", ""))[:2000] if has else ""
        candidate = services.candidate_upload(
            actor=self.actor, data=read_upload(request), note=note, changelog=changelog
        )
        return self._detail(candidate, status.HTTP_201_CREATED)

    @extend_schema(request=DecideSerializer, responses=CandidateDetailSerializer)
    @action(detail=True, methods=["post"])
    def decisions(self, request, pk=None):
        candidate = self.get_object()
        incoming = DecideSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        decided = services.candidate_decide(
            actor=self.actor,
            candidate=candidate,
            decision=incoming.validated_data["decision"],
            comment=incoming.validated_data["comment"],
            sole_reviewer_justification=incoming.validated_data["sole_reviewer_justification"],
            changelog=incoming.validated_data["changelog"],
            revision=incoming.validated_data["revision"],
        )
        return self._detail(decided)

    @extend_schema(
        request=EditSerializer,
        responses=CandidateDetailSerializer,
        description="A reviewer who may decide the current stage edits the candidate's "
        "SKILL.md name, description or body (a new revision, checked and scored again) and its "
        "public changelog, before deciding. Audited as skills.candidate.edit.",
    )
    @action(detail=True, methods=["post"])
    def edit(self, request, pk=None):
        candidate = self.get_object()
        incoming = EditSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        data = incoming.validated_data
        edited = services.candidate_edit(
            actor=self.actor,
            candidate=candidate,
            name=data.get("name"),
            description=data.get("description"),
            body=data.get("body"),
            changelog=data.get("changelog"),
            note=data["note"],
            revision=data["revision"],
        )
        return self._detail(edited)

    @extend_schema(
        request={"application/json": ResubmitSerializer, "multipart/form-data": UploadSerializer},
        responses=CandidateDetailSerializer,
    )
    @action(detail=True, methods=["post"])
    def resubmit(self, request, pk=None):
        candidate = self.get_object()
        changelog = None
        if request.content_type.startswith("multipart/"):
            bundle = read_bundle(read_upload(request))
            files = {f.path: f.content for f in bundle.files}
            note = str(request.data.get("note", ""))[:4000]
            if "changelog" in request.data:
                changelog = str(request.data.get("changelog", ""))[:2000]
        else:
            incoming = ResubmitSerializer(data=request.data)
            incoming.is_valid(raise_exception=True)
            changed = incoming.validated_data.get("files") or {}
            if not changed or len(changed) > MAX_FILES_JSON:
                raise InvalidInput(
                    _("Send the changed files as {path: text}, or a multipart bundle."),
                    details={"files": ["Between 1 and 64 files."]},
                )
            files = selectors.decode_files(candidate.files)
            files.update({path: text.encode("utf-8") for path, text in changed.items()})
            note = incoming.validated_data["note"]
            changelog = incoming.validated_data.get("changelog")
        resubmitted = services.candidate_resubmit(
            actor=self.actor, candidate=candidate, files=files, note=note, changelog=changelog
        )
        return self._detail(resubmitted)


class ProposalViewSet(
    _VisibleOnly, mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantViewSet
):
    """The skill changes drafted from the actor's own corrections, waiting for them."""

    model = SkillProposal
    serializer_class = ProposalSerializer
    filterset_fields = ["status"]

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return SkillProposal.objects.none()
        return selectors.proposals_for(self.actor)

    @extend_schema(request=None, responses={201: CandidateDetailSerializer})
    @action(detail=True, methods=["post"])
    def confirm(self, request, pk=None):
        proposal = self.get_object()
        via = "api" if self.actor.kind == "api_key" else "console"
        candidate = services.proposal_confirm(actor=self.actor, proposal=proposal, via=via)
        candidate = (
            selectors.candidates_visible(self.actor)
            .prefetch_related("evidence", "decisions")
            .get(pk=candidate.pk)
        )
        return Response(
            CandidateDetailSerializer(candidate, context={"request": request}).data,
            status=status.HTTP_201_CREATED,
        )

    @extend_schema(request=DismissSerializer, responses=ProposalSerializer)
    @action(detail=True, methods=["post"])
    def dismiss(self, request, pk=None):
        proposal = self.get_object()
        incoming = DismissSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        dismissed = services.proposal_dismiss(
            actor=self.actor,
            proposal=proposal,
            reason=incoming.validated_data["reason"],
            via="api" if self.actor.kind == "api_key" else "console",
        )
        return Response(ProposalSerializer(dismissed).data)


class StagesView(APIView):
    """The organization's review stages; replacing them needs `policy.manage`."""

    @extend_schema(responses=StagesSerializer, operation_id="skills_stages_get")
    def get(self, request):
        if not request.actor.may("skill.review") and not request.actor.has("policy.manage"):
            raise NotPermitted(
                _("Reading the review stages needs 'skill.review' or 'policy.manage'.")
            )
        return Response({"stages": selectors.stages_for(request.actor.organization)})

    @extend_schema(
        request=StagesSerializer, responses=StagesSerializer, operation_id="skills_stages_set"
    )
    def put(self, request):
        request.actor.require("policy.manage")
        incoming = StagesSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        stages = services.review_stages_set(
            actor=request.actor, stages=[dict(s) for s in incoming.validated_data["stages"]]
        )
        return Response({"stages": stages})


class DistillationViewSet(mixins.ListModelMixin, TenantViewSet):
    """What memory-to-skill looked at: each cluster, kept or dropped, and why (reviewers)."""

    model = DistillationRecord
    serializer_class = DistillationSerializer
    filterset_fields = ["kept"]
    action_verbs = {"list": "review"}

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return DistillationRecord.objects.none()
        return DistillationRecord.objects.restrict(self.actor, "review")


router = SimpleRouter()
router.register("candidates", CandidateViewSet, basename="skill-candidate")
router.register("proposals", ProposalViewSet, basename="skill-proposal")
router.register("distillations", DistillationViewSet, basename="skill-distillation")

urlpatterns = [
    path("stages/", StagesView.as_view(), name="skill-stages"),
    *router.urls,
]
