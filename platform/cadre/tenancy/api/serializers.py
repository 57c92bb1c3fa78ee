"""Serializers for the tenancy API: output shapes and validated input for the services."""

from __future__ import annotations

import functools
import zoneinfo

from django.utils.translation import gettext as _
from rest_framework import serializers

from cadre.api.viewsets import TenantRelatedFieldMixin
from cadre.tenancy.models import (
    ApiKey,
    Department,
    IMIdentity,
    Invitation,
    Member,
    Organization,
    Position,
)
from cadre.tenancy.roles import GRANTABLE, ROLES, SCOPES


class TenantPrimaryKeyRelatedField(TenantRelatedFieldMixin, serializers.PrimaryKeyRelatedField):
    pass


@functools.cache
def _time_zones() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones())


class OrganizationSerializer(serializers.ModelSerializer):
    class Meta:
        model = Organization
        fields = [
            "id",
            "name",
            "slug",
            "status",
            "locale",
            "time_zone",
            "approved_skills",
            "created_at",
        ]
        read_only_fields = ["id", "slug", "status", "created_at"]

    def validate_time_zone(self, value: str) -> str:
        if value not in _time_zones():
            raise serializers.ValidationError(_("Not an IANA time zone, e.g. 'Asia/Shanghai'."))
        return value


class DepartmentSerializer(serializers.ModelSerializer):
    parent = TenantPrimaryKeyRelatedField(
        queryset=Department.objects.all(), allow_null=True, required=False
    )

    class Meta:
        model = Department
        fields = ["id", "name", "code", "description", "parent", "is_archived", "created_at"]
        read_only_fields = ["id", "created_at"]
        validators: list = []


class PositionSerializer(serializers.ModelSerializer):
    department = TenantPrimaryKeyRelatedField(
        queryset=Department.objects.all(), allow_null=True, required=False
    )
    code = serializers.SlugField(max_length=64, required=False, allow_blank=True)

    class Meta:
        model = Position
        fields = ["id", "name", "code", "description", "department", "is_archived", "created_at"]
        read_only_fields = ["id", "created_at"]
        validators: list = []


class IMIdentitySerializer(serializers.ModelSerializer):
    member = TenantPrimaryKeyRelatedField(queryset=Member.objects.all())

    class Meta:
        model = IMIdentity
        fields = [
            "id",
            "member",
            "platform",
            "tenant_key",
            "platform_user_id",
            "display_name",
            "created_at",
        ]
        read_only_fields = ["id", "created_at"]
        validators: list = []


class MemberSerializer(serializers.ModelSerializer):
    department = TenantPrimaryKeyRelatedField(
        queryset=Department.objects.all(), allow_null=True, required=False
    )
    manager = TenantPrimaryKeyRelatedField(
        queryset=Member.objects.all(), allow_null=True, required=False
    )
    positions = TenantPrimaryKeyRelatedField(
        queryset=Position.objects.all(), many=True, required=False
    )
    roles = serializers.ListField(
        child=serializers.ChoiceField(choices=list(ROLES)), required=False
    )
    has_login = serializers.SerializerMethodField()
    im_identities = IMIdentitySerializer(many=True, read_only=True)

    class Meta:
        model = Member
        fields = [
            "id",
            "display_name",
            "email",
            "mobile",
            "employee_no",
            "title",
            "department",
            "positions",
            "manager",
            "roles",
            "language",
            "status",
            "has_login",
            "im_identities",
            "sso_link_held",
            "created_at",
            "deactivated_at",
        ]
        read_only_fields = ["id", "status", "sso_link_held", "created_at", "deactivated_at"]
        validators: list = []

    def get_has_login(self, member: Member) -> bool:
        return member.user_id is not None


class SignInLockSerializer(serializers.Serializer):
    locked = serializers.BooleanField()
    failures = serializers.IntegerField(help_text="Failed passwords counted for the account.")
    locked_until = serializers.DateTimeField(allow_null=True)


class MemberInviteSerializer(serializers.Serializer):
    email = serializers.EmailField()
    display_name = serializers.CharField(max_length=150, required=False, allow_blank=True)
    roles = serializers.ListField(
        child=serializers.ChoiceField(choices=list(ROLES)), required=False
    )
    department = TenantPrimaryKeyRelatedField(
        queryset=Department.objects.all(), allow_null=True, required=False
    )
    positions = TenantPrimaryKeyRelatedField(
        queryset=Position.objects.all(), many=True, required=False
    )


class InvitationSerializer(serializers.ModelSerializer):
    state = serializers.CharField(read_only=True)

    class Meta:
        model = Invitation
        fields = ["id", "member", "email", "state", "created_at", "expires_at", "accepted_at"]


class InvitationCreatedSerializer(serializers.Serializer):
    member = MemberSerializer()
    invitation = InvitationSerializer()
    invite_url = serializers.URLField()
    emailed = serializers.BooleanField(
        help_text="Whether the link was e-mailed to the address (mail configured to deliver and "
        "accepted by the mail server); otherwise send invite_url yourself."
    )


class DeactivateSerializer(serializers.Serializer):
    reason = serializers.CharField(required=False, allow_blank=True, max_length=1000)


class ApiKeySerializer(serializers.ModelSerializer):
    state = serializers.CharField(read_only=True)
    created_by = serializers.PrimaryKeyRelatedField(read_only=True)

    class Meta:
        model = ApiKey
        fields = [
            "id",
            "name",
            "prefix",
            "scopes",
            "state",
            "created_by",
            "created_at",
            "expires_at",
            "last_used_at",
            "last_used_ip",
            "revoked_at",
        ]
        read_only_fields = fields


class ApiKeyCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=150)
    scopes = serializers.ListField(
        child=serializers.ChoiceField(choices=list(SCOPES)), allow_empty=False
    )
    expires_at = serializers.DateTimeField(required=False, allow_null=True)


class ApiKeyCreatedSerializer(ApiKeySerializer):
    secret = serializers.CharField(read_only=True, help_text="Shown once; store it now.")

    class Meta(ApiKeySerializer.Meta):
        fields = [*ApiKeySerializer.Meta.fields, "secret"]
        read_only_fields = fields


class RoleSerializer(serializers.Serializer):
    name = serializers.CharField()
    label = serializers.CharField()
    description = serializers.CharField()
    permissions = serializers.ListField(child=serializers.CharField())


class GrantSerializer(serializers.Serializer):
    id = serializers.IntegerField(read_only=True)
    member = TenantPrimaryKeyRelatedField(queryset=Member.objects.all())
    permission = serializers.CharField()
    target_type = serializers.ChoiceField(choices=list(GRANTABLE))
    target_id = serializers.IntegerField()
