"""REST for subscriptions between agents: /api/v1/agent-subscriptions/ (list, create, get,
approve, pause, resume, delete). The services in agents/subscriptions.py decide who may act."""

from __future__ import annotations

from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import mixins, serializers, status
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied
from rest_framework.response import Response

from cadre.agents import subscriptions as services
from cadre.agents.models import Agent, AgentSubscription
from cadre.api.viewsets import TenantViewSet


@extend_schema_field(OpenApiTypes.INT)
class OrganizationAgentField(serializers.PrimaryKeyRelatedField):
    """Any agent of the actor's organization: a member asks to follow a colleague's agent,
    which they cannot read; another organization's agent does not exist."""

    def get_queryset(self):
        actor = getattr(self.context.get("request"), "actor", None)
        if actor is None or actor.organization is None:
            return Agent.objects.none()
        return super().get_queryset().filter(organization=actor.organization)


class AgentSubscriptionSerializer(serializers.ModelSerializer):
    class Meta:
        model = AgentSubscription
        fields = [
            "id",
            "subscriber",
            "publisher",
            "topics",
            "status",
            "max_per_hour",
            "created_by",
            "approved_by",
            "paused_by",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields


class AgentSubscriptionCreateSerializer(serializers.Serializer):
    subscriber = OrganizationAgentField(queryset=Agent.objects.all())
    publisher = OrganizationAgentField(queryset=Agent.objects.all())
    topics = serializers.ListField(
        child=serializers.CharField(max_length=100), max_length=50, required=False
    )
    max_per_hour = serializers.IntegerField(min_value=1, max_value=1000, required=False)


class AgentSubscriptionViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.DestroyModelMixin,
    TenantViewSet,
):
    """Reads: `agent.view` (all) or `chat.use` (subscriptions on either side of one's own
    agents). Writes: `deployment.manage`, or `chat.use` for the parties themselves."""

    model = AgentSubscription
    serializer_class = AgentSubscriptionSerializer
    filterset_fields = ["subscriber", "publisher", "status"]

    def base_queryset(self):
        return AgentSubscription.objects.all()

    def permission(self) -> str:
        if self.verb() == "view":
            return "agent.view" if self.actor.has("agent.view") else "chat.use"
        return "deployment.manage" if self.actor.has("deployment.manage") else "chat.use"

    def check_object_permissions(self, request, obj):
        pass  # the services decide (admins, the publisher's member, the subscriber's member)

    @extend_schema(
        request=AgentSubscriptionCreateSerializer,
        responses={201: AgentSubscriptionSerializer},
        description="Subscribe an agent to another's publications. Admins wire any two "
        "agents; a member's own agent following a colleague's stays pending until approved.",
    )
    def create(self, request, *args, **kwargs):
        # Who may subscribe, before what they sent: an admin, or a member with an agent of
        # their own to subscribe (the service checks the agents named).
        if not self.actor.has("deployment.manage") and not (
            self.actor.member is not None
            and Agent.objects.filter(
                organization=self.actor.organization, member=self.actor.member
            ).exists()
        ):
            raise PermissionDenied(_("You have no agent of your own to subscribe."))
        serializer = AgentSubscriptionCreateSerializer(
            data=request.data, context={"request": request}
        )
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        subscription = services.subscription_create(
            actor=self.actor,
            subscriber=data["subscriber"],
            publisher=data["publisher"],
            topics=data.get("topics"),
            max_per_hour=data.get("max_per_hour"),
        )
        return Response(
            AgentSubscriptionSerializer(subscription).data, status=status.HTTP_201_CREATED
        )

    def perform_destroy(self, instance):
        services.subscription_delete(actor=self.actor, subscription=instance)

    def _act(self, service) -> Response:
        subscription = service(actor=self.actor, subscription=self.get_object())
        return Response(AgentSubscriptionSerializer(subscription).data)

    @extend_schema(request=None, responses=AgentSubscriptionSerializer)
    @action(detail=True, methods=["post"])
    def approve(self, request, pk=None):
        return self._act(services.subscription_approve)

    @extend_schema(request=None, responses=AgentSubscriptionSerializer)
    @action(detail=True, methods=["post"])
    def pause(self, request, pk=None):
        return self._act(services.subscription_pause)

    @extend_schema(request=None, responses=AgentSubscriptionSerializer)
    @action(detail=True, methods=["post"])
    def resume(self, request, pk=None):
        return self._act(services.subscription_resume)
