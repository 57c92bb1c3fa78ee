"""Agents REST views: templates and versions, presets, providers, deployments, rollouts, agents,
sessions, runs (with an SSE stream of run events) and event triggers."""

from __future__ import annotations

import asyncio
import json
import math
import time

import django_filters
from asgiref.sync import sync_to_async
from django.db.models import Count, Prefetch
from django.http import StreamingHttpResponse
from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    inline_serializer,
)
from rest_framework import mixins, renderers, serializers, status
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.response import Response
from rest_framework.views import APIView

from cadre.agents import generation, providers, services
from cadre.agents import serializers as s
from cadre.agents.call_chain import run_call_chain
from cadre.agents.models import (
    Agent,
    AgentTemplate,
    Deployment,
    EventTrigger,
    ModelProviderConfig,
    Rollout,
    Run,
    RunEvent,
    Session,
    Step,
    TemplateVersion,
    Wait,
)
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.agents.runtime.lifecycle import triggers
from cadre.agents.selectors import (
    USAGE_GROUPS,
    run_errors_visible,
    run_event_data_for,
    run_may_act,
    transcripts_readable,
    usage_summary,
)
from cadre.agents.template_policy import template_policy_chain, template_policy_chain_set
from cadre.api.parsers import BoundedFormParser, BoundedMultiPartParser
from cadre.api.viewsets import TenantViewSet
from cadre.errors import InvalidInput
from cadre.governance.api.controls import PolicyChainSerializer, PolicyChainWriteSerializer
from cadre.governance.models import PolicyChain

STREAM_POLL_SECONDS = 0.2
STREAM_MAX_SECONDS = 300


class OwnAgentsMixin:
    """Reads need `agent.view` (all agents) or `chat.use` (the querysets then keep the
    actor's own agents, sessions and runs)."""

    def permission(self) -> str:
        if self.verb() == "view":
            return "agent.view" if self.actor.has("agent.view") else "chat.use"
        return super().permission()


class DeploymentReadMixin:
    """There is no `deployment.view`: managers of deployments and viewers of agents read."""

    def permission(self) -> str:
        if self.verb() == "view":
            return "agent.view" if self.actor.has("agent.view") else "deployment.manage"
        return "deployment.manage"


# --- templates ------------------------------------------------------------------------------


class TemplateViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin, TenantViewSet
):
    model = AgentTemplate
    serializer_class = s.TemplateSerializer
    filterset_fields = ["code", "is_archived", "preset"]
    # Any template the actor can see; the chain itself needs `policy.manage` (checked inside).
    action_verbs = {"policy_chain": "view"}

    def base_queryset(self):
        return AgentTemplate.objects.prefetch_related(
            Prefetch("versions", queryset=TemplateVersion.objects.order_by("-number"))
        )

    @extend_schema(request=s.TemplateCreateSerializer, responses={201: s.TemplateSerializer})
    def create(self, request, *args, **kwargs):
        serializer = s.TemplateCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        template = services.template_create(
            actor=self.actor,
            name=data["name"],
            code=data["code"],
            description=data.get("description", ""),
            preset=data.get("preset", ""),
            # `name` here is the template's; its first version takes it too.
            **_version_content(data, exclude=("name",)),
        )
        return Response(s.TemplateSerializer(template).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={201: s.TemplateVersionSerializer})
    @action(detail=True, methods=["post"], url_path="draft")
    def draft(self, request, pk=None):
        version = services.version_draft(actor=self.actor, template=self.get_object())
        return Response(s.TemplateVersionSerializer(version).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        parameters=[
            OpenApiParameter("from", int, required=True),
            OpenApiParameter("to", int, required=True),
        ],
        responses=s.DiffSerializer,
        description="Unified diff per changed field between two version numbers.",
    )
    @action(detail=True, methods=["get"])
    def diff(self, request, pk=None):
        template = self.get_object()
        try:
            numbers = int(request.query_params["from"]), int(request.query_params["to"])
        except (KeyError, ValueError):
            raise InvalidInput(_("Give the version numbers as ?from=&to=.")) from None
        versions = {v.number: v for v in template.versions.filter(number__in=numbers)}
        if len(versions) != len(set(numbers)):
            raise NotFound(_("No such version."))
        changes = services.version_diff(versions[numbers[0]], versions[numbers[1]])
        return Response({"from_version": numbers[0], "to_version": numbers[1], "changes": changes})

    @extend_schema(
        request=s.GenerateSerializer,
        responses={201: s.TemplateVersionSerializer},
        description="Draft SOP, AGENT.md and USER.md from uploaded documents (md, txt, "
        "docx, pdf text) into the template's open draft (those three fields are replaced) or, "
        "when none is open, a new draft version; 409 `not_draft` while a version is in review.",
    )
    @action(
        detail=True, methods=["post"], parser_classes=[BoundedMultiPartParser, BoundedFormParser]
    )
    def generate(self, request, pk=None):
        template = self.get_object()
        serializer = s.GenerateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        documents = [
            (f.name, f.read(generation.MAX_FILE_BYTES + 1))
            for f in serializer.validated_data["files"]
        ]
        version = generation.template_generate(
            actor=self.actor,
            template=template,
            documents=documents,
            notes=serializer.validated_data.get("notes", ""),
        )
        return Response(s.TemplateVersionSerializer(version).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        request=PolicyChainWriteSerializer,
        responses=PolicyChainSerializer,
        description="The template's policy chain (run after the organization's); "
        "PUT replaces its plugin list (the first PUT creates it). Needs `policy.manage`.",
    )
    @action(detail=True, methods=["get", "put"], url_path="policy-chain")
    def policy_chain(self, request, pk=None):
        template = self.get_object()
        self.actor.require("policy.manage")
        if request.method == "PUT":
            incoming = PolicyChainWriteSerializer(data=request.data)
            incoming.is_valid(raise_exception=True)
            chain = template_policy_chain_set(
                actor=self.actor, template=template, plugins=incoming.validated_data["plugins"]
            )
            return Response(PolicyChainSerializer(chain).data)
        chain = template_policy_chain(template)
        if chain is not None:
            return Response(PolicyChainSerializer(chain).data)
        return Response(
            {
                "id": None,
                "scope": PolicyChain.Scope.TEMPLATE,
                "plugins": [],
                "version": 0,
                "updated_by": None,
                "updated_at": None,
            }
        )


class TemplateVersionViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.UpdateModelMixin, TenantViewSet
):
    model = TemplateVersion
    serializer_class = s.TemplateVersionSerializer
    filterset_fields = ["template", "status", "number"]
    http_method_names = ["get", "patch", "post", "head", "options"]

    @extend_schema(request=s.TemplateVersionUpdateSerializer, responses=s.TemplateVersionSerializer)
    def partial_update(self, request, *args, **kwargs):
        version = self.get_object()
        serializer = s.TemplateVersionUpdateSerializer(data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        version = services.version_update(
            actor=self.actor, version=version, **_version_content(serializer.validated_data)
        )
        return Response(s.TemplateVersionSerializer(version).data)

    def _transition(self, service, **kwargs):
        version = service(actor=self.actor, version=self.get_object(), **kwargs)
        return Response(s.TemplateVersionSerializer(version).data)

    @extend_schema(request=None, responses=s.TemplateVersionSerializer)
    @action(detail=True, methods=["post"])
    def submit(self, request, pk=None):
        return self._transition(services.version_submit)

    @extend_schema(request=s.ReasonSerializer, responses=s.TemplateVersionSerializer)
    @action(detail=True, methods=["post"])
    def withdraw(self, request, pk=None):
        data = s.ReasonSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        return self._transition(
            services.version_withdraw, reason=data.validated_data.get("reason", "")
        )

    @extend_schema(request=s.PublishSerializer, responses=s.TemplateVersionSerializer)
    @action(detail=True, methods=["post"])
    def publish(self, request, pk=None):
        data = s.PublishSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        return self._transition(
            services.version_publish,
            reason=data.validated_data.get("reason", ""),
            override_gate=data.validated_data.get("override_gate", ""),
        )


def _version_content(data: dict, exclude: tuple[str, ...] = ()) -> dict:
    """The template version content fields the caller sent, by the services' own names."""
    names = (*TemplateVersion.CONTENT_FIELDS, "change_note")
    return {name: data[name] for name in names if name in data and name not in exclude}


class PresetView(APIView):
    """The built-in presets a template can start from."""

    @extend_schema(responses=s.PresetSerializer(many=True))
    def get(self, request):
        request.actor.require("template.view")
        rows = [
            {
                key: preset.get(key, "")
                for key in ("key", "name", "code", "description", "target_positions")
            }
            for preset in services.presets().values()
        ]
        return Response(s.PresetSerializer(rows, many=True).data)


class ProviderConfigViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.DestroyModelMixin,
    TenantViewSet,
):
    model = ModelProviderConfig
    serializer_class = s.ProviderConfigSerializer

    def permission(self) -> str:
        # Providers hold endpoints and credentials: writing them is `model.manage`, not the
        # template permission their reads share, and is checked before the body is read.
        return "model.manage" if self.verb() != "view" else super().permission()

    def perform_create(self, serializer):
        data = serializer.validated_data
        serializer.instance = providers.provider_config_create(
            actor=self.actor,
            name=data["name"],
            kind=data["kind"],
            base_url=data.get("base_url", ""),
            api_key=data.get("api_key", ""),
            default_model=data.get("default_model", ""),
            parameters=data.get("parameters"),
            prices=data.get("prices"),
            timeout_seconds=data.get("timeout_seconds", 60),
            preset=data.get("preset", ""),
        )

    @extend_schema(
        responses={
            204: None,
            409: OpenApiResponse(
                description="In use (`provider_in_use`): `details` says by what — the "
                "organization's default, template versions, active agents, evaluation suites, "
                "skills drafting. Nothing is deleted."
            ),
        }
    )
    def destroy(self, request, *args, **kwargs):
        return super().destroy(request, *args, **kwargs)

    def perform_destroy(self, instance):
        providers.provider_config_delete(actor=self.actor, config=instance)

    @extend_schema(request=None, responses=s.ProviderConfigSerializer)
    @action(detail=True, methods=["post"], url_path="default")
    def make_default(self, request, pk=None):
        config = providers.provider_config_set_default(actor=self.actor, config=self.get_object())
        return Response(s.ProviderConfigSerializer(config).data)

    @extend_schema(
        request=None,
        responses=s.ConnectionReportSerializer,
        description="Send one tiny request to the endpoint: latency, the models it lists (where "
        "its API has a list) or the exact error. Changes nothing.",
    )
    @action(detail=True, methods=["post"], url_path="test")
    def connection_test(self, request, pk=None):
        report = providers.provider_config_test(actor=self.actor, config=self.get_object())
        return Response(s.ConnectionReportSerializer(report).data)

    @extend_schema(request=s.ProviderPricesSerializer, responses={200: s.ProviderConfigSerializer})
    @action(detail=True, methods=["put"])
    def prices(self, request, pk=None):
        """Replace the provider's prices per million tokens (defaults and per model)."""
        config = self.get_object()
        serializer = s.ProviderPricesSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        config = providers.provider_config_prices_set(
            actor=self.actor, config=config, prices=serializer.validated_data
        )
        return Response(s.ProviderConfigSerializer(config).data)


# --- dispatch -------------------------------------------------------------------------------


class DeploymentViewSet(
    DeploymentReadMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    TenantViewSet,
):
    model = Deployment
    serializer_class = s.DeploymentSerializer
    filterset_fields = ["template", "status"]

    def base_queryset(self):
        return (
            Deployment.objects.select_related("version")
            .prefetch_related("positions", "departments", "members")
            .annotate(agent_count=Count("agents"))
            .order_by("-created_at", "-id")
        )

    @extend_schema(request=s.DeploymentCreateSerializer, responses={201: s.DeploymentSerializer})
    def create(self, request, *args, **kwargs):
        serializer = s.DeploymentCreateSerializer(data=request.data, context={"request": request})
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        deployment = services.deployment_create(
            actor=self.actor,
            name=data["name"],
            template=data["template"],
            version=data.get("version"),
            positions=data.get("positions", ()),
            departments=data.get("departments", ()),
            members=data.get("members", ()),
            channels=data["channels"],
        )
        return Response(s.DeploymentSerializer(deployment).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=s.RolloutStartSerializer, responses={201: s.RolloutSerializer})
    @action(detail=True, methods=["post"])
    def rollout(self, request, pk=None):
        deployment = self.get_object()
        serializer = s.RolloutStartSerializer(data=request.data, context={"request": request})
        serializer.is_valid(raise_exception=True)
        rollout = services.rollout_start(
            actor=self.actor,
            deployment=deployment,
            version=serializer.validated_data["version"],
            strategy=serializer.validated_data["strategy"],
        )
        return Response(s.RolloutSerializer(rollout).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses=s.AgentSerializer(many=True))
    @action(detail=True, methods=["post"], pagination_class=None)
    def sync(self, request, pk=None):
        created = services.deployment_sync(actor=self.actor, deployment=self.get_object())
        return Response(s.AgentSerializer(created, many=True).data)

    @extend_schema(request=s.ReasonSerializer, responses=s.DeploymentSerializer)
    @action(detail=True, methods=["post"])
    def stop(self, request, pk=None):
        data = s.ReasonSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        deployment = services.deployment_stop(
            actor=self.actor,
            deployment=self.get_object(),
            reason=data.validated_data.get("reason", ""),
        )
        return Response(s.DeploymentSerializer(deployment).data)


class RolloutViewSet(
    DeploymentReadMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantViewSet
):
    model = Rollout
    serializer_class = s.RolloutSerializer
    filterset_fields = ["deployment", "status"]

    def base_queryset(self):
        return Rollout.objects.select_related("from_version", "to_version", "deployment")

    @extend_schema(request=None, responses=s.RolloutSerializer)
    @action(detail=True, methods=["post"])
    def advance(self, request, pk=None):
        rollout = services.rollout_advance(actor=self.actor, rollout=self.get_object())
        return Response(s.RolloutSerializer(rollout).data)

    @extend_schema(request=s.ReasonSerializer, responses=s.RolloutSerializer)
    @action(detail=True, methods=["post"])
    def rollback(self, request, pk=None):
        data = s.ReasonSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        rollout = services.rollout_rollback(
            actor=self.actor,
            rollout=self.get_object(),
            reason=data.validated_data.get("reason", ""),
        )
        return Response(s.RolloutSerializer(rollout).data)


class AgentFilter(django_filters.FilterSet):
    class Meta:
        model = Agent
        fields = ["deployment", "member", "status", "version"]


class AgentViewSet(
    OwnAgentsMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.UpdateModelMixin,
    TenantViewSet,
):
    model = Agent
    serializer_class = s.AgentSerializer
    filterset_class = AgentFilter
    http_method_names = ["get", "patch", "head", "options"]

    def base_queryset(self):
        return Agent.objects.select_related("version")

    def permission(self) -> str:
        if self.action == "partial_update":
            return "chat.use" if not self.actor.has("deployment.manage") else "deployment.manage"
        return super().permission()

    def check_object_permissions(self, request, obj):
        pass  # the service decides who may edit USER.md (the member, or deployment managers)

    @extend_schema(request=s.AgentSerializer, responses=s.AgentSerializer)
    def partial_update(self, request, *args, **kwargs):
        agent = self.get_object()
        # Who may edit, before what they sent: the member the agent serves, or a deployment
        # manager (the service checks it again, on the agent's deployment).
        own = self.actor.member is not None and self.actor.member.pk == agent.member_id
        if not (own or self.actor.may("deployment.manage")):
            raise PermissionDenied(
                _("Only the person the agent serves, or a deployment manager, may edit USER.md.")
            )
        user_md = request.data.get("user_md") if isinstance(request.data, dict) else None
        if not isinstance(user_md, str):
            raise InvalidInput(
                _("user_md: a string is required."),
                details={"user_md": ["This field is required."]},
            )
        agent = services.agent_update_user_md(actor=self.actor, agent=agent, user_md=user_md)
        return Response(s.AgentSerializer(agent).data)


class SessionViewSet(
    OwnAgentsMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantViewSet
):
    model = Session
    serializer_class = s.SessionSerializer
    filterset_fields = ["agent", "channel"]

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Session.objects.none()
        # A session's title is its first message: another member's is left out of lists and
        # not found in detail, whatever `agent.view` says.
        return transcripts_readable(self.actor, self.base_queryset())


class EventStreamRenderer(renderers.BaseRenderer):
    media_type = "text/event-stream"
    format = "sse"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        return json.dumps(data).encode()


def _sse(event: RunEvent, data: dict) -> str:
    data = json.dumps({"kind": event.kind, **data}, ensure_ascii=False, default=str)
    return f"id: {event.pk}\nevent: {event.kind}\ndata: {data}\n\n"


def _events_after(run_id: int, after: int) -> tuple[list[RunEvent], str, dict | None]:
    events = list(RunEvent.objects.filter(run_id=run_id, id__gt=after).order_by("id")[:500])
    row = Run.objects.filter(pk=run_id).values_list("status", "output").first()
    run_status, output = row if row is not None else (None, None)
    return events, run_status, output


async def run_event_stream(run_id: int, after: int, max_seconds: float, errors_visible: bool):
    """Server-sent events of a run until it finishes, starts waiting, or time runs out. A
    failed run's internal error only when `errors_visible` (`run_errors_visible`)."""
    deadline = time.monotonic() + max_seconds
    fetch = sync_to_async(_events_after, thread_sensitive=True)
    while True:
        events, run_status, output = await fetch(run_id, after)
        for event in events:
            after = event.pk
            yield _sse(event, run_event_data_for(event.data, run_status, output, errors_visible))
        if not events and (run_status in Run.TERMINAL or run_status == Run.Status.WAITING):
            yield f"event: end\ndata: {json.dumps({'status': run_status})}\n\n"
            return
        if time.monotonic() >= deadline:
            yield ": timeout, reconnect with Last-Event-ID\n\n"
            return
        if not events:
            await asyncio.sleep(STREAM_POLL_SECONDS)


class RunViewSet(OwnAgentsMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantViewSet):
    model = Run
    serializer_class = s.RunSerializer
    filterset_fields = ["agent", "session", "status", "trigger", "parent", "root"]

    def base_queryset(self):
        if self.action == "retrieve":
            return Run.objects.prefetch_related(
                Prefetch("steps", queryset=Step.objects.order_by("index")),
                Prefetch("waits", queryset=Wait.objects.order_by("created_at")),
            )
        return Run.objects.all()

    # Acting on a run without reading it: a deployment manager cancels or rates any run, a
    # decider resumes one; everything else shows the transcript and goes through its gate.
    UNREAD_ACTIONS = ("cancel", "rating", "resume")

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Run.objects.none()
        if self.action in self.UNREAD_ACTIONS:
            return super().get_queryset()
        return transcripts_readable(self.actor, self.base_queryset())

    def get_serializer_context(self):
        return {**super().get_serializer_context(), "run_errors_visible": self._errors_visible()}

    def _errors_visible(self) -> bool:
        return run_errors_visible(self.actor)

    def _run_data(self, run: Run) -> dict:
        """A run as answered to an action: its input and output only to those who may read
        the transcript (a deployment manager cancelling a colleague's run sees its status)."""
        data = s.RunSerializer(run, context={"run_errors_visible": self._errors_visible()}).data
        if not transcripts_readable(self.actor, Run.objects.filter(pk=run.pk)).exists():
            data.update(input={}, output={}, error="", error_message="")
        return data

    def _require_may_act(self, run: Run) -> None:
        if not run_may_act(self.actor, run):
            raise PermissionDenied(
                _("Only the person the run served, or a deployment manager, may do this.")
            )

    def get_serializer_class(self):
        return s.RunDetailSerializer if self.action == "retrieve" else s.RunSerializer

    def permission(self) -> str:
        if self.action in ("create", "cancel", "rating"):
            return "chat.use"
        if self.action == "resume":
            return "confirmation.decide"
        return super().permission()

    def check_object_permissions(self, request, obj):
        pass  # cancel and resume are decided by the runtime services

    @extend_schema(
        request=s.RunCreateSerializer,
        responses={202: s.RunSerializer},
        description="Send a message to one of your agents; the run executes in a "
        "worker. Follow it with GET /runs/{id}/events/ (SSE).",
    )
    def create(self, request, *args, **kwargs):
        serializer = s.RunCreateSerializer(data=request.data, context={"request": request})
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        run = runtime.run_start(
            actor=self.actor, agent=data["agent"], text=data["text"], session=data.get("session")
        )
        data = s.RunSerializer(run, context={"run_errors_visible": self._errors_visible()}).data
        return Response(data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "by", str, enum=sorted(USAGE_GROUPS), description="Group by (default agent)"
            )
        ],
        responses=s.UsageSerializer(many=True),
        description="Runs, tokens and cost of the runs you may see, per member, agent, "
        "template or organization.",
    )
    @action(detail=False, methods=["get"], pagination_class=None)
    def usage(self, request):
        by = request.query_params.get("by", "agent")
        if by not in USAGE_GROUPS:
            raise InvalidInput(
                _("by must be one of %(value)s.") % {"value": ", ".join(sorted(USAGE_GROUPS))}
            )
        return Response(s.UsageSerializer(usage_summary(self.actor, by=by), many=True).data)

    @extend_schema(
        responses=s.CallChainSerializer,
        description="Everything the run did, in order (input, policy decisions, memories "
        "sent, model calls, tool calls and results, confirmations, reply), then the runs it "
        "delegated to, under one trace id. Readable by whoever may read the run.",
    )
    @action(detail=True, methods=["get"], url_path="call-chain")
    def call_chain(self, request, pk=None):
        chain = run_call_chain(self.actor, self.get_object())
        return Response(s.CallChainSerializer(chain).data)

    @extend_schema(request=s.ReasonSerializer, responses=s.RunSerializer)
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        run = self.get_object()
        self._require_may_act(run)
        data = s.ReasonSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        run = runtime.run_cancel(
            actor=self.actor, run=run, reason=data.validated_data.get("reason", "")
        )
        return Response(self._run_data(run))

    @extend_schema(
        request=s.RunRatingSerializer,
        responses=s.RunSerializer,
        description="Say whether the answer did its job (`success` or `failure`, with an "
        "optional note); a new rating replaces the last. The run's member rates their own "
        "runs, a deployment manager any run. The skills the run used get the same outcome, "
        "and the Memory Viewer's recall hit rate counts the rating.",
    )
    @action(detail=True, methods=["post"])
    def rating(self, request, pk=None):
        run = self.get_object()
        self._require_may_act(run)
        data = s.RunRatingSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        run = runtime.run_rate(
            actor=self.actor,
            run=run,
            outcome=data.validated_data["outcome"],
            note=data.validated_data.get("note", ""),
        )
        return Response(self._run_data(run))

    @extend_schema(request=s.RunResumeSerializer, responses=s.WaitSerializer)
    @action(detail=True, methods=["post"])
    def resume(self, request, pk=None):
        run = self.get_object()
        data = s.RunResumeSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        wait = runtime.run_resume_request(
            actor=self.actor,
            run=run,
            payload=data.validated_data["payload"],
            key=data.validated_data.get("key"),
        )
        wait.refresh_from_db()
        return Response(s.WaitSerializer(wait).data)

    @extend_schema(
        parameters=[
            OpenApiParameter("after", int, description="Last event id seen"),
            OpenApiParameter("timeout", int, description="Seconds to stream (≤ 300)"),
        ],
        # each server-sent event: `data` is the JSON of one run event
        responses={
            (200, "text/event-stream"): inline_serializer(
                "RunEventMessage",
                {
                    "event": serializers.CharField(),
                    "data": serializers.CharField(),
                    "id": serializers.CharField(required=False),
                },
            )
        },
        description="Server-sent events of the run (status, step, delta, wait, reply); ends "
        "when the run finishes or waits. Resume with the Last-Event-ID header. A failed run's "
        "`status` event carries its internal `error` only to callers holding model.manage; "
        "others read `error: run_failed` (or `run_cancelled`) and a short `message`.",
    )
    @action(
        detail=True, methods=["get"], renderer_classes=[renderers.JSONRenderer, EventStreamRenderer]
    )
    def events(self, request, pk=None):
        run = self.get_object()
        raw_after = request.headers.get("Last-Event-ID") or request.query_params.get("after")
        try:
            after = int(raw_after or 0)
            seconds = float(request.query_params.get("timeout", 60))
        except ValueError:
            raise InvalidInput(_("after and timeout must be numbers.")) from None
        if not math.isfinite(seconds):  # "nan" would never reach the deadline: a stream forever
            raise InvalidInput(_("timeout must be a number of seconds."))
        seconds = min(max(seconds, 0.0), STREAM_MAX_SECONDS)
        response = StreamingHttpResponse(
            run_event_stream(run.pk, after, seconds, self._errors_visible()),
            content_type="text/event-stream",
        )
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"
        return response


# --- triggers -------------------------------------------------------------------------------


class EventTriggerViewSet(
    DeploymentReadMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    TenantViewSet,
):
    model = EventTrigger
    serializer_class = s.EventTriggerSerializer
    filterset_fields = ["deployment", "is_active"]

    @extend_schema(
        request=s.EventTriggerSerializer, responses={201: s.EventTriggerCreatedSerializer}
    )
    def create(self, request, *args, **kwargs):
        serializer = s.EventTriggerSerializer(data=request.data, context={"request": request})
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        trigger, secret = triggers.trigger_create(
            actor=self.actor,
            name=data["name"],
            deployment=data["deployment"],
            member=data.get("member"),
            member_field=data.get("member_field", ""),
            tolerance_seconds=data.get("tolerance_seconds", 300),
        )
        data = s.EventTriggerSerializer(trigger).data | {"secret": secret}
        return Response(data, status=status.HTTP_201_CREATED)


class TriggerInboundView(APIView):
    """A business system posts a signed event: HMAC-SHA256 over "<timestamp>.<body>" with the
    trigger's secret, in X-Cadre-Timestamp and X-Cadre-Signature: v1=<hex>."""

    authentication_classes: list = []
    permission_classes: list = []
    throttle_classes: list = []  # verified by its signature; not anonymous traffic

    @extend_schema(
        request=OpenApiTypes.OBJECT,
        responses={202: OpenApiTypes.OBJECT},
        auth=[],
        description="Inbound signed business event (see docs/agents.md).",
    )
    def post(self, request, trigger_id: int):
        result = triggers.trigger_receive(
            trigger_id=trigger_id,
            timestamp=request.headers.get("X-Cadre-Timestamp", ""),
            signature=request.headers.get("X-Cadre-Signature", ""),
            body=request.body,
        )
        return Response(
            result, status=status.HTTP_200_OK if result["duplicate"] else status.HTTP_202_ACCEPTED
        )
