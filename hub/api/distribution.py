"""Hub API for distribution and outcomes: agents' skill installs (apply an offered update,
roll back), a skill's templates and its one-click install into one, the skills a run had in
its context, and the run's outcome feedback."""

from __future__ import annotations

from django.utils.translation import gettext as _
from drf_spectacular.utils import (
    OpenApiParameter,
    extend_schema,
    extend_schema_serializer,
    inline_serializer,
)
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from cadre.agents.models import AgentTemplate
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.api.pagination import PagePagination
from cadre.errors import NotFound, NotPermitted
from cadre.identifiers import parse_pk
from hub import distribution, outcomes, selectors
from hub.models import SkillInstall, SkillUsage


class InstallEventSerializer(serializers.Serializer):
    action = serializers.CharField()
    from_version = serializers.CharField(source="from_version.version", allow_null=True)
    to_version = serializers.CharField(source="to_version.version", allow_null=True)
    actor = serializers.CharField(source="actor_label")
    reason = serializers.CharField()
    created_at = serializers.DateTimeField()


class InstallSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    agent = serializers.IntegerField(source="agent_id")
    agent_name = serializers.CharField(source="agent.name")
    package = serializers.CharField(source="package.full_name")
    requested = serializers.CharField()
    policy = serializers.ChoiceField(choices=SkillInstall.Policy.choices)
    version = serializers.CharField(source="version.version", allow_null=True)
    pending_version = serializers.CharField(source="pending_version.version", allow_null=True)
    error = serializers.CharField()
    updated_at = serializers.DateTimeField()


class InstallDetailSerializer(InstallSerializer):
    history = InstallEventSerializer(many=True, source="events.all")
    rollback_to = serializers.SerializerMethodField()

    def get_rollback_to(self, install) -> str | None:
        previous = distribution.previous_version(install)
        return previous.version if previous else None


class RollbackSerializer(serializers.Serializer):
    reason = serializers.CharField(required=False, allow_blank=True, max_length=300)


@extend_schema_serializer(component_name="SkillUsage")  # agents' run usage is "Usage"
class UsageSerializer(serializers.Serializer):
    package = serializers.CharField(source="package.full_name")
    version = serializers.CharField(source="version.version")
    loaded = serializers.BooleanField()
    body_loaded = serializers.BooleanField()
    relevance = serializers.CharField()
    skip_reason = serializers.CharField()
    outcome = serializers.SerializerMethodField()
    feedback = serializers.CharField()

    def get_outcome(self, usage) -> str:
        return outcomes.usage_outcome(usage)


class FeedbackSerializer(serializers.Serializer):
    outcome = serializers.ChoiceField(choices=SkillUsage.Outcome.choices)
    note = serializers.CharField(required=False, allow_blank=True, max_length=500)


@extend_schema_serializer(component_name="RunFeedbackResponse")  # memory's is "FeedbackResponse"
class FeedbackResponseSerializer(serializers.Serializer):
    run = serializers.IntegerField()
    outcome = serializers.CharField()
    skills = UsageSerializer(many=True)


def _installs(request):
    return (
        selectors.installs_visible(request.actor)
        .select_related("agent", "package__namespace", "version", "pending_version")
        .order_by("agent__name", "package__namespace__handle", "package__name")
    )


def _install(request, pk: int) -> SkillInstall:
    install = _installs(request).filter(pk=pk).first()
    if install is None:
        raise NotFound(_("No such skill install."))
    return install


def _detail(request, pk: int) -> Response:
    install = (
        _installs(request).prefetch_related("events__from_version", "events__to_version").get(pk=pk)
    )
    return Response(InstallDetailSerializer(install).data)


class InstallListView(APIView):
    pagination_class = PagePagination  # also what the schema documents

    @extend_schema(
        parameters=[
            OpenApiParameter("agent", int),
            OpenApiParameter("package", str, description="@namespace/name"),
            OpenApiParameter("pending", bool, description="only installs with an offered update"),
        ],
        responses=InstallSerializer(many=True),
        operation_id="hub_installs_list",
    )
    def get(self, request):
        installs = _installs(request)
        params = request.query_params
        if (agent := parse_pk(params.get("agent", ""))) is not None:
            installs = installs.filter(agent_id=agent)
        if params.get("package"):
            handle, name = selectors.parse_full_name(params["package"])
            installs = installs.filter(package__namespace__handle=handle, package__name=name)
        if params.get("pending") in ("1", "true"):
            installs = installs.filter(pending_version__isnull=False)
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(installs, request, view=self)
        return paginator.get_paginated_response(InstallSerializer(page, many=True).data)


class InstallDetailView(APIView):
    @extend_schema(responses=InstallDetailSerializer, operation_id="hub_install_retrieve")
    def get(self, request, pk: int):
        return _detail(request, _install(request, pk).pk)


class InstallApplyView(APIView):
    @extend_schema(request=None, responses=InstallDetailSerializer)
    def post(self, request, pk: int):
        install = distribution.install_apply_update(
            actor=request.actor, install=_install(request, pk)
        )
        return _detail(request, install.pk)


class InstallRollbackView(APIView):
    @extend_schema(request=RollbackSerializer, responses=InstallDetailSerializer)
    def post(self, request, pk: int):
        install = _install(request, pk)
        serializer = RollbackSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        install = distribution.install_rollback(
            actor=request.actor,
            install=install,
            reason=serializer.validated_data.get("reason", ""),
        )
        return _detail(request, install.pk)


def _usages(run):
    return (
        SkillUsage.objects.filter(run=run)
        .select_related("package__namespace", "version", "run")
        .order_by("package__namespace__handle", "package__name")
    )


class RunSkillsView(APIView):
    @extend_schema(
        responses=inline_serializer("RunSkills", {"results": UsageSerializer(many=True)}),
        operation_id="hub_run_skills",
    )
    def get(self, request, run_id: int):
        run = selectors.run_get(request.actor, run_id)
        return Response({"results": UsageSerializer(_usages(run), many=True).data})


class RunFeedbackView(APIView):
    @extend_schema(
        request=FeedbackSerializer,
        responses=FeedbackResponseSerializer,
        description="Say whether the run did its job: every skill version it had in its "
        "context gets this outcome (it overrides the run's status in the success rates).",
    )
    def post(self, request, run_id: int):
        run, readable = selectors.run_to_rate(request.actor, run_id)
        serializer = FeedbackSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        runtime.run_rate(  # the run's rating; its skills get the outcome (skills_rated)
            actor=request.actor,
            run=run,
            outcome=serializer.validated_data["outcome"],
            note=serializer.validated_data.get("note", ""),
        )
        return Response(
            {
                "run": run.pk,
                "outcome": serializer.validated_data["outcome"],
                # A deployment manager rates a colleague's run without reading it (as in the
                # runs API); the skills that matched would tell them what it was asked.
                "skills": UsageSerializer(_usages(run), many=True).data if readable else [],
            }
        )


class TemplateSkillSerializer(serializers.Serializer):
    template = serializers.IntegerField(source="template.pk")
    template_name = serializers.CharField(source="template.name")
    version = serializers.IntegerField(source="version.number", allow_null=True)
    reference = serializers.DictField(allow_null=True)
    agents = serializers.IntegerField(help_text="agents of the template that have the skill")
    taught = serializers.BooleanField(help_text="the template's agents taught this skill")
    offer = serializers.BooleanField(help_text="installing it would change the template")
    can_install = serializers.BooleanField()


class TemplateInstallSerializer(serializers.Serializer):
    template = serializers.IntegerField()
    version = serializers.CharField(
        required=False, allow_blank=True, max_length=64, help_text="default: latest"
    )
    override_gate = serializers.CharField(
        required=False, allow_blank=True, max_length=500, help_text="as for a template publish"
    )


@extend_schema_serializer(component_name="TemplateSkillInstall")
class TemplateInstallResultSerializer(serializers.Serializer):
    template = serializers.IntegerField()
    template_name = serializers.CharField()
    package = serializers.CharField()
    version = serializers.CharField()
    template_version = serializers.IntegerField()
    new_template_version = serializers.BooleanField()
    rollouts = serializers.ListField(child=serializers.IntegerField())
    deployments_left = serializers.ListField(child=serializers.IntegerField())
    agents = serializers.IntegerField()


class PackageTemplatesView(APIView):
    """The templates that have a skill (or taught it), and one-click install into a template."""

    @extend_schema(
        responses=inline_serializer(
            "PackageTemplates", {"results": TemplateSkillSerializer(many=True)}
        ),
        operation_id="hub_skill_templates_list",
    )
    def get(self, request, namespace: str, name: str):
        package = selectors.package_get(request.actor, namespace, name)
        rows = distribution.package_templates(request.actor, package)
        return Response({"results": TemplateSkillSerializer(rows, many=True).data})

    @extend_schema(
        request=TemplateInstallSerializer,
        responses={201: TemplateInstallResultSerializer},
        operation_id="hub_skill_templates_install",
        description="Install the skill into the template and roll it out: the template's next "
        "version references it and the deployments on the version it replaces move onto it "
        "(needs template.manage and deployment.manage; the template's publish gates apply).",
    )
    def post(self, request, namespace: str, name: str):
        package = selectors.package_get(request.actor, namespace, name)
        # Authorized before the body is read: a caller who may not install learns nothing more.
        if not (
            request.actor.may("template.manage", AgentTemplate)
            and request.actor.has("deployment.manage")
        ):
            raise NotPermitted(
                _("Installing a skill into a template needs template.manage and deployment.manage.")
            )
        serializer = TemplateInstallSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        template = (
            AgentTemplate.objects.filter(organization=request.actor.organization)
            .filter(pk=data["template"])
            .first()
        )
        if template is None:
            raise NotFound(_("No such template."), code="template_not_found")
        version = None
        if data.get("version"):
            version = selectors.resolve_version(package, data["version"])
        result = distribution.template_skill_install(
            actor=request.actor,
            package=package,
            template=template,
            version=version,
            override_gate=data.get("override_gate", ""),
        )
        return Response(TemplateInstallResultSerializer(result).data, status=201)
