"""Tenancy API: organization, departments, positions, members, identities, keys, grants."""

from __future__ import annotations

import django_filters
from django.conf import settings
from django.contrib.contenttypes.models import ContentType
from django.db.models import CharField, Q
from django.db.models.functions import Cast
from django.utils.translation import gettext as _
from drf_spectacular.utils import OpenApiParameter, extend_schema
from guardian.models import UserObjectPermission
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.response import Response

from cadre.api.viewsets import TenantViewSet
from cadre.identifiers import parse_pk
from cadre.tenancy import services
from cadre.tenancy.api import serializers as s
from cadre.tenancy.models import (
    ApiKey,
    Department,
    IMIdentity,
    Invitation,
    Member,
    Organization,
    Position,
)
from cadre.tenancy.roles import GRANTABLE, ROLES, grant_codename
from cadre.tenancy.services.signin import signin_lock_state, signin_unlock


class OrganizationViewSet(viewsets.ViewSet):
    """The caller's own organization."""

    serializer_class = s.OrganizationSerializer

    @extend_schema(responses=s.OrganizationSerializer)
    def retrieve(self, request):
        request.actor.require("organization.view")
        return Response(s.OrganizationSerializer(request.actor.organization).data)

    @extend_schema(request=s.OrganizationSerializer, responses=s.OrganizationSerializer)
    def partial_update(self, request):
        # Permission before validation: a caller who may not change it learns nothing more.
        request.actor.require("organization.manage")
        organization = Organization.objects.get(pk=request.actor.organization.pk)
        serializer = s.OrganizationSerializer(organization, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        organization = services.organization_update(
            actor=request.actor, organization=organization, **serializer.validated_data
        )
        return Response(s.OrganizationSerializer(organization).data)


def _id_filter(field_name: str, label: str):
    """Filter by a related object's id without looking it up.

    A model-choice filter answers 400 for an id that does not exist but 200 for one of
    another organization, which would let an outsider probe for ids; a plain number filter
    answers the same (no rows) for both.
    """
    return django_filters.NumberFilter(field_name=field_name, label=label)


def _refuse_archived_create(data: dict) -> None:
    """A new department or position starts active; archiving is a later, audited step.

    Form and multipart bodies always carry `is_archived` (an absent HTML checkbox is false),
    so only a true value is refused.
    """
    if data.get("is_archived"):
        raise ValidationError(
            {"is_archived": [_("A new record cannot be archived; create it first.")]}
        )


class DepartmentFilter(django_filters.FilterSet):
    q = django_filters.CharFilter(field_name="name", lookup_expr="icontains")
    parent = _id_filter("parent_id", "Parent department id")

    class Meta:
        model = Department
        fields = ["parent", "is_archived", "code"]


class DepartmentViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    mixins.DestroyModelMixin,
    TenantViewSet,
):
    model = Department
    serializer_class = s.DepartmentSerializer
    filterset_class = DepartmentFilter

    def perform_create(self, serializer):
        data = serializer.validated_data
        _refuse_archived_create(data)
        serializer.instance = services.department_create(
            actor=self.actor,
            name=data["name"],
            parent=data.get("parent"),
            code=data.get("code", ""),
            description=data.get("description", ""),
        )

    def perform_update(self, serializer):
        serializer.instance = services.department_update(
            actor=self.actor, department=serializer.instance, **serializer.validated_data
        )

    @extend_schema(
        description="Archive the department (it must have no active members or "
        "sub-departments). History is kept; nothing is deleted.",
        responses={200: s.DepartmentSerializer},
    )
    def destroy(self, request, *args, **kwargs):
        department = services.department_archive(actor=self.actor, department=self.get_object())
        return Response(s.DepartmentSerializer(department).data)


class PositionFilter(django_filters.FilterSet):
    q = django_filters.CharFilter(field_name="name", lookup_expr="icontains")
    department = _id_filter("department_id", "Department id")

    class Meta:
        model = Position
        fields = ["department", "is_archived", "code"]


class PositionViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    mixins.DestroyModelMixin,
    TenantViewSet,
):
    model = Position
    serializer_class = s.PositionSerializer
    filterset_class = PositionFilter

    def perform_create(self, serializer):
        data = serializer.validated_data
        _refuse_archived_create(data)
        serializer.instance = services.position_create(
            actor=self.actor,
            name=data["name"],
            code=data.get("code", ""),
            description=data.get("description", ""),
            department=data.get("department"),
        )

    def perform_update(self, serializer):
        serializer.instance = services.position_update(
            actor=self.actor, position=serializer.instance, **serializer.validated_data
        )

    @extend_schema(
        description="Archive the position. History is kept; nothing is deleted.",
        responses={200: s.PositionSerializer},
    )
    def destroy(self, request, *args, **kwargs):
        position = services.position_update(
            actor=self.actor, position=self.get_object(), is_archived=True
        )
        return Response(s.PositionSerializer(position).data)


class MemberFilter(django_filters.FilterSet):
    q = django_filters.CharFilter(method="search")
    role = django_filters.CharFilter(field_name="roles", lookup_expr="contains", method="by_role")
    position = django_filters.NumberFilter(field_name="positions")
    department = _id_filter("department_id", "Department id")
    manager = _id_filter("manager_id", "Manager's member id")

    class Meta:
        model = Member
        fields = ["status", "department", "manager"]

    def search(self, queryset, name, value):
        return queryset.filter(
            Q(display_name__icontains=value)
            | Q(email__icontains=value)
            | Q(employee_no__iexact=value)
        )

    def by_role(self, queryset, name, value):
        return queryset.filter(roles__contains=[value])


class MemberViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    TenantViewSet,
):
    model = Member
    serializer_class = s.MemberSerializer
    filterset_class = MemberFilter

    def base_queryset(self):
        return Member.objects.select_related("department").prefetch_related(
            "positions", "im_identities"
        )

    def perform_create(self, serializer):
        data = serializer.validated_data
        serializer.instance = services.member_create(
            actor=self.actor,
            display_name=data["display_name"],
            email=data.get("email", ""),
            mobile=data.get("mobile", ""),
            employee_no=data.get("employee_no", ""),
            title=data.get("title", ""),
            department=data.get("department"),
            manager=data.get("manager"),
            positions=data.get("positions"),
            roles=data.get("roles"),
        )

    def perform_update(self, serializer):
        data = dict(serializer.validated_data)
        positions = data.pop("positions", None)
        serializer.instance = services.member_update(
            actor=self.actor, member=serializer.instance, positions=positions, **data
        )

    @extend_schema(request=s.MemberInviteSerializer, responses={201: s.InvitationCreatedSerializer})
    @action(detail=False, methods=["post"])
    def invite(self, request):
        serializer = s.MemberInviteSerializer(data=request.data, context={"request": request})
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        member, invitation, token = services.member_invite(
            actor=self.actor,
            email=data["email"],
            display_name=data.get("display_name", ""),
            roles=data.get("roles"),
            department=data.get("department"),
            positions=data.get("positions"),
        )
        url = f"{settings.CADRE_BASE_URL}/invite/{token}/"
        # E-mailed when mail delivers (as from the console); the link is returned either way.
        emailed = services.invitation_email(actor=self.actor, invitation=invitation, url=url)
        return Response(
            {
                "member": s.MemberSerializer(member).data,
                "invitation": s.InvitationSerializer(invitation).data,
                "invite_url": url,
                "emailed": emailed,
            },
            status=status.HTTP_201_CREATED,
        )

    @extend_schema(request=s.DeactivateSerializer, responses=s.MemberSerializer)
    @action(detail=True, methods=["post"])
    def deactivate(self, request, pk=None):
        serializer = s.DeactivateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        member = services.member_deactivate(
            actor=self.actor,
            member=self.get_object(),
            reason=serializer.validated_data.get("reason", ""),
        )
        return Response(s.MemberSerializer(member).data)

    @extend_schema(request=None, responses=s.MemberSerializer)
    @action(detail=True, methods=["post"])
    def reactivate(self, request, pk=None):
        member = services.member_reactivate(actor=self.actor, member=self.get_object())
        return Response(s.MemberSerializer(member).data)

    @extend_schema(
        request=None,
        responses=s.MemberSerializer,
        description="Let single sign-on link the member again after someone else changed the "
        "e-mail, employee number or IM account it finds them by (`sso_link_held`; an owner "
        "only; audited as member.sso_link_allow).",
    )
    @action(detail=True, methods=["post"], url_path="sso-link/allow")
    def sso_link_allow(self, request, pk=None):
        member = services.member_sso_link_allow(actor=self.actor, member=self.get_object())
        return Response(s.MemberSerializer(member).data)

    @extend_schema(
        responses=s.SignInLockSerializer,
        description="Whether the member's console sign-in is locked after failed passwords.",
    )
    @action(detail=True, methods=["get"], url_path="sign-in-lock")
    def sign_in_lock(self, request, pk=None):
        member = self.get_object()
        self.actor.require("member.manage", member)
        return Response(s.SignInLockSerializer(signin_lock_state(member)).data)

    @extend_schema(
        request=None,
        responses=s.SignInLockSerializer,
        description="Lift the sign-in lock of the member's account and of the addresses that "
        "failed against it (audited as member.signin_unlock).",
    )
    @action(detail=True, methods=["post"], url_path="sign-in-lock/unlock")
    def sign_in_unlock(self, request, pk=None):
        lock = signin_unlock(actor=self.actor, member=self.get_object())
        return Response(s.SignInLockSerializer(lock).data)


class InvitationFilter(django_filters.FilterSet):
    member = _id_filter("member_id", "Member id")

    class Meta:
        model = Invitation
        fields = ["member"]


class InvitationViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantViewSet):
    model = Invitation
    serializer_class = s.InvitationSerializer
    filterset_class = InvitationFilter

    @extend_schema(request=None, responses=s.InvitationSerializer)
    @action(detail=True, methods=["post"])
    def revoke(self, request, pk=None):
        invitation = services.invitation_revoke(actor=self.actor, invitation=self.get_object())
        return Response(s.InvitationSerializer(invitation).data)


class IMIdentityFilter(django_filters.FilterSet):
    member = _id_filter("member_id", "Member id")

    class Meta:
        model = IMIdentity
        fields = ["member", "platform", "platform_user_id"]


class IMIdentityViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.DestroyModelMixin,
    TenantViewSet,
):
    model = IMIdentity
    serializer_class = s.IMIdentitySerializer
    filterset_class = IMIdentityFilter

    def perform_create(self, serializer):
        data = serializer.validated_data
        serializer.instance = services.im_identity_create(
            actor=self.actor,
            member=data["member"],
            platform=data["platform"],
            platform_user_id=data["platform_user_id"],
            tenant_key=data.get("tenant_key", ""),
            display_name=data.get("display_name", ""),
        )

    def perform_destroy(self, instance):
        services.im_identity_delete(actor=self.actor, identity=instance)


class ApiKeyFilter(django_filters.FilterSet):
    created_by = _id_filter("created_by_id", "Creator's member id")

    class Meta:
        model = ApiKey
        fields = ["created_by"]


class ApiKeyViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.DestroyModelMixin,
    TenantViewSet,
):
    model = ApiKey
    serializer_class = s.ApiKeySerializer
    filterset_class = ApiKeyFilter

    def base_queryset(self):
        return ApiKey.objects.select_related("created_by")

    @extend_schema(request=s.ApiKeyCreateSerializer, responses={201: s.ApiKeyCreatedSerializer})
    def create(self, request, *args, **kwargs):
        serializer = s.ApiKeyCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        key, secret = services.api_key_create(
            actor=self.actor,
            name=data["name"],
            scopes=data["scopes"],
            expires_at=data.get("expires_at"),
        )
        data = s.ApiKeySerializer(key).data | {"secret": secret}
        return Response(data, status=status.HTTP_201_CREATED)

    @extend_schema(
        description="Revoke the key: it stops working at once; the record is kept.",
        responses={200: s.ApiKeySerializer},
    )
    def destroy(self, request, *args, **kwargs):
        key = services.api_key_revoke(actor=self.actor, key=self.get_object())
        return Response(s.ApiKeySerializer(key).data)


class RoleViewSet(viewsets.ViewSet):
    """The built-in roles and the permissions each carries."""

    @extend_schema(responses=s.RoleSerializer(many=True))
    def list(self, request):
        return Response(
            [
                {
                    "name": r.name,
                    "label": r.label,
                    "description": r.description,
                    "permissions": sorted(r.permissions),
                }
                for r in ROLES.values()
            ]
        )


_GRANT_TARGETS = {"department": Department, "position": Position}


def _grant_rows(actor):
    """Guardian rows on this organization's grantable objects."""
    condition = Q(pk__in=[])
    for target_type in GRANTABLE:
        model = _GRANT_TARGETS[target_type]
        ids = (
            model.objects.filter(organization=actor.organization)
            .annotate(text_pk=Cast("pk", CharField()))
            .values("text_pk")
        )
        condition |= Q(content_type=ContentType.objects.get_for_model(model), object_pk__in=ids)
    return (
        UserObjectPermission.objects.filter(condition)
        .select_related("permission", "content_type")
        .order_by("pk")
    )


def _grant_permission(codename: str) -> str:
    return codename.replace("_", ".", 1)


class GrantViewSet(viewsets.ViewSet):
    """Object-level grants: a permission on one department or position for one member.

    Listing needs `grant.manage` or `audit.view` (who holds what is part of the audit
    picture); granting and revoking need `grant.manage`.
    """

    model = UserObjectPermission  # what a grant row is (the cross-tenant sweep reads this)
    serializer_class = s.GrantSerializer

    def _require_read(self, request) -> None:
        if not (request.actor.has("grant.manage") or request.actor.has("audit.view")):
            raise PermissionDenied(_("You need the 'grant.manage' or 'audit.view' permission."))

    def _rows(self, request, rows) -> list[dict]:
        rows = list(rows)
        members = dict(
            Member.objects.filter(
                organization=request.actor.organization, user_id__in={r.user_id for r in rows}
            ).values_list("user_id", "pk")
        )
        return [
            {
                "id": row.pk,
                "member": members.get(row.user_id),
                "permission": _grant_permission(row.permission.codename),
                "target_type": row.content_type.model,
                "target_id": int(row.object_pk),
            }
            for row in rows
        ]

    def _get_row(self, request, pk):
        key = parse_pk(pk)
        if key is None:
            raise NotFound()
        row = _grant_rows(request.actor).filter(pk=key).first()
        if row is None:
            raise NotFound()
        return row

    @extend_schema(responses=s.GrantSerializer(many=True))
    def list(self, request):
        self._require_read(request)
        return Response(self._rows(request, _grant_rows(request.actor)))

    @extend_schema(request=s.GrantSerializer, responses={201: s.GrantSerializer})
    def create(self, request):
        request.actor.require("grant.manage")
        serializer = s.GrantSerializer(data=request.data, context={"request": request})
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        model = _GRANT_TARGETS[data["target_type"]]
        target = model.objects.restrict(request.actor).filter(pk=data["target_id"]).first()
        if target is None:
            raise ValidationError({"target_id": [_("No such object in your organization.")]})
        services.object_grant(
            actor=request.actor, member=data["member"], permission=data["permission"], target=target
        )
        row = _grant_rows(request.actor).get(
            user_id=data["member"].user_id,
            object_pk=str(target.pk),
            permission__codename=grant_codename(data["permission"]),
            content_type=ContentType.objects.get_for_model(model),
        )
        return Response(self._rows(request, [row])[0], status=status.HTTP_201_CREATED)

    @extend_schema(
        responses=s.GrantSerializer, parameters=[OpenApiParameter("id", int, OpenApiParameter.PATH)]
    )
    def retrieve(self, request, pk=None):
        self._require_read(request)
        return Response(self._rows(request, [self._get_row(request, pk)])[0])

    @extend_schema(
        responses={204: None}, parameters=[OpenApiParameter("id", int, OpenApiParameter.PATH)]
    )
    def destroy(self, request, pk=None):
        row = self._get_row(request, pk)
        request.actor.require("grant.manage")
        member = Member.objects.filter(
            organization=request.actor.organization, user_id=row.user_id
        ).first()
        target = row.content_type.get_object_for_this_type(pk=row.object_pk)
        services.object_grant_revoke(
            actor=request.actor,
            member=member,
            permission=_grant_permission(row.permission.codename),
            target=target,
        )
        return Response(status=status.HTTP_204_NO_CONTENT)
