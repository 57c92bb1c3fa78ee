"""Tenancy models: the organization, its chart (departments, positions), members, keys."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser, BaseUserManager
from django.contrib.auth.models import PermissionsMixin
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models.functions import Lower
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from cadre.crypto import EncryptedTextField
from cadre.im import platform_choices
from cadre.tenancy.querysets import TenantQuerySet
from cadre.tenancy.roles import ROLE_CHOICES


class UserManager(BaseUserManager):
    use_in_migrations = True

    def create_user(self, email: str, password: str | None = None, **extra):
        if not email:
            raise ValueError("users need an email address")
        user = self.model(email=self.normalize_email(email).lower(), **extra)
        user.set_password(password)
        user.save(using=self._db)
        return user

    def create_superuser(self, email: str, password: str | None = None, **extra):
        extra.setdefault("is_staff", True)
        extra.setdefault("is_superuser", True)
        return self.create_user(email, password, **extra)


class User(AbstractBaseUser, PermissionsMixin):
    """A console login. Employees who only chat in IM need no user, only a Member."""

    email = models.EmailField(unique=True)
    display_name = models.CharField(max_length=150, blank=True)
    is_active = models.BooleanField(default=True)
    is_staff = models.BooleanField(default=False)
    date_joined = models.DateTimeField(default=timezone.now)

    USERNAME_FIELD = "email"
    EMAIL_FIELD = "email"
    REQUIRED_FIELDS: list[str] = []

    objects = UserManager()

    def __str__(self) -> str:
        return self.display_name or self.email


class Organization(models.Model):
    class Status(models.TextChoices):
        ACTIVE = "active", _("Active")
        SUSPENDED = "suspended", _("Suspended")

    class ApprovedSkills(models.TextChoices):
        """What happens when a skill taught by a template's agents is approved (docs/hub.md)."""

        OFFER = "offer", _("Offer a one-click install into the template")
        AUTOMATIC = "automatic", _("Install it into the template's next version")

    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=64, unique=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)
    locale = models.CharField(max_length=16, default="en")
    time_zone = models.CharField(max_length=64, default="UTC")
    # db_default: rows written by code that predates the column (a rolling deploy, a migration
    # test's historical model) get the default too.
    approved_skills = models.CharField(
        max_length=16,
        choices=ApprovedSkills.choices,
        default=ApprovedSkills.OFFER,
        db_default=ApprovedSkills.OFFER,
    )
    settings = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return self.name


class TenantModel(models.Model):
    """Base for every row owned by an organization; `resource` names it in permissions."""

    resource = ""
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")

    objects = TenantQuerySet.as_manager()

    class Meta:
        abstract = True


def department_subtree_ids(organization_id: int, roots: set[int]) -> set[int]:
    """The given departments and every department below them."""
    children: dict[int | None, list[int]] = {}
    rows = Department.objects.filter(organization_id=organization_id).values_list("id", "parent_id")
    for pk, parent_id in rows:
        children.setdefault(parent_id, []).append(pk)
    found, stack = set(), list(roots)
    while stack:
        pk = stack.pop()
        if pk not in found:
            found.add(pk)
            stack.extend(children.get(pk, []))
    return found


def _department_grant(actor, permission: str, field: str) -> models.Q | None:
    roots = actor.granted_ids(permission, Department)
    if not roots:
        return None
    return models.Q(**{f"{field}__in": department_subtree_ids(actor.organization.pk, roots)})


class Department(TenantModel):
    resource = "department"

    name = models.CharField(max_length=200)
    code = models.SlugField(max_length=64, blank=True)
    description = models.TextField(blank=True)
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="children"
    )
    is_archived = models.BooleanField(default=False)
    # The identity provider's id for the group this department mirrors (SCIM externalId).
    external_id = models.CharField(max_length=191, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(
                "organization",
                "parent",
                Lower("name"),
                name="department_unique_sibling_name",
                nulls_distinct=False,
            )
        ]
        permissions = [
            ("department_manage", "Manage this department and its sub-departments"),
            ("member_manage", "Manage the members of this department and its sub-departments"),
            ("skill_review", "Review the skills of this department"),
        ]

    def __str__(self) -> str:
        return self.name

    @classmethod
    def grant_filter(cls, actor, permission: str) -> models.Q | None:
        return _department_grant(actor, permission, "pk")


class Position(TenantModel):
    """A role in the org chart that agents are dispatched to, e.g. "Key account sales"."""

    resource = "position"

    name = models.CharField(max_length=200)
    code = models.SlugField(max_length=64)
    description = models.TextField(blank=True)
    department = models.ForeignKey(
        Department, null=True, blank=True, on_delete=models.SET_NULL, related_name="positions"
    )
    is_archived = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint("organization", "code", name="position_unique_code"),
        ]
        permissions = [("position_manage", "Manage this position")]

    def __str__(self) -> str:
        return self.name


class Member(TenantModel):
    """A person in an organization: an employee with agents, an admin, or both."""

    resource = "member"

    class Status(models.TextChoices):
        INVITED = "invited", _("Invited")
        ACTIVE = "active", _("Active")
        DEACTIVATED = "deactivated", _("Deactivated")

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="memberships",
    )
    display_name = models.CharField(max_length=150)
    email = models.EmailField(blank=True)
    mobile = models.CharField(max_length=32, blank=True)
    employee_no = models.CharField(max_length=64, blank=True)
    title = models.CharField(max_length=150, blank=True)
    department = models.ForeignKey(
        Department, null=True, blank=True, on_delete=models.SET_NULL, related_name="members"
    )
    positions = models.ManyToManyField(Position, blank=True, related_name="members")
    manager = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="reports"
    )
    roles = ArrayField(
        models.CharField(max_length=32, choices=ROLE_CHOICES), default=list, blank=True
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)
    created_at = models.DateTimeField(default=timezone.now)
    deactivated_at = models.DateTimeField(null=True, blank=True)
    # The language the member reads Cadre in (docs/i18n.md): set by the member, an admin or SCIM
    # (preferredLanguage / locale); blank = the browser's, else the organization's default.
    language = models.CharField(
        max_length=16, choices=settings.LANGUAGES, blank=True, default="", db_default=""
    )
    # The locale the member's IM platform reported (Slack's users.info), used for IM messages
    # when the member set no language.
    platform_language = models.CharField(max_length=16, blank=True, default="", db_default="")
    # Someone other than the member changed what single sign-on finds them by (e-mail, employee
    # number, an IM account): no provider account not yet linked to them may take this member
    # over until they sign in through one already theirs, or an owner allows it (a person who
    # may edit colleagues must not become one by pointing their e-mail at an account of theirs).
    sso_link_held = models.BooleanField(default=False, db_default=False)
    # Directory attributes an identity provider provisions over SCIM (RFC 7643 userName,
    # externalId, name.givenName / name.familyName); blank for members added in Cadre.
    user_name = models.CharField(max_length=191, blank=True)
    external_id = models.CharField(max_length=191, blank=True)
    given_name = models.CharField(max_length=150, blank=True)
    family_name = models.CharField(max_length=150, blank=True)
    # Set when the identity provider deleted the user: the member stays (deactivated, data kept
    # under retention) but SCIM no longer serves it.
    scim_deleted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["display_name"]
        constraints = [
            models.UniqueConstraint(
                "organization",
                "user",
                name="member_unique_user",
                condition=models.Q(user__isnull=False),
            ),
            models.UniqueConstraint(
                "organization",
                Lower("email"),
                name="member_unique_email",
                condition=~models.Q(email=""),
            ),
            models.UniqueConstraint(
                "organization",
                Lower("user_name"),
                name="member_unique_user_name",
                condition=~models.Q(user_name=""),
            ),
        ]
        indexes = [models.Index(fields=["organization", "status"])]

    def __str__(self) -> str:
        return self.display_name

    @classmethod
    def grant_filter(cls, actor, permission: str) -> models.Q | None:
        return _department_grant(actor, permission, "department_id")

    @property
    def is_active(self) -> bool:
        return self.status == self.Status.ACTIVE


class IMIdentity(TenantModel):
    """A member's account on an IM platform, keyed by platform and platform user id."""

    resource = "member"

    member = models.ForeignKey(Member, on_delete=models.CASCADE, related_name="im_identities")
    platform = models.CharField(max_length=16, choices=platform_choices)
    # The platform's tenant (Feishu tenant key, WeCom corp id, Slack team id); blank if single.
    tenant_key = models.CharField(max_length=128, blank=True)
    platform_user_id = models.CharField(max_length=191)
    display_name = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["platform", "platform_user_id"]
        constraints = [
            models.UniqueConstraint(
                "organization",
                "platform",
                "tenant_key",
                "platform_user_id",
                name="imidentity_unique_platform_user",
            )
        ]

    def __str__(self) -> str:
        return f"{self.platform}:{self.platform_user_id}"

    @classmethod
    def grant_filter(cls, actor, permission: str) -> models.Q | None:
        return _department_grant(actor, permission, "member__department_id")


class ApiKey(TenantModel):
    """An organization API key. Only a SHA-256 of the secret is stored; the prefix is shown."""

    resource = "apikey"

    name = models.CharField(max_length=150)
    prefix = models.CharField(max_length=16, unique=True)
    key_hash = models.CharField(max_length=64)
    scopes = ArrayField(models.CharField(max_length=32), default=list)
    created_by = models.ForeignKey(Member, on_delete=models.PROTECT, related_name="api_keys")
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    last_used_ip = models.GenericIPAddressField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.ForeignKey(
        Member, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def state(self) -> str:
        if self.revoked_at:
            return "revoked"
        if self.expires_at and self.expires_at <= timezone.now():
            return "expired"
        return "active"


class Invitation(TenantModel):
    """A single-use link that gives an invited member a console login."""

    resource = "member"

    member = models.ForeignKey(Member, on_delete=models.CASCADE, related_name="invitations")
    email = models.EmailField()
    token_hash = models.CharField(max_length=64, unique=True)
    invited_by = models.ForeignKey(Member, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    accepted_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"Invitation for {self.email}"

    @classmethod
    def grant_filter(cls, actor, permission: str) -> models.Q | None:
        return _department_grant(actor, permission, "member__department_id")

    @property
    def state(self) -> str:
        if self.accepted_at:
            return "accepted"
        if self.revoked_at:
            return "revoked"
        if self.expires_at <= timezone.now():
            return "expired"
        return "pending"


class ScimToken(TenantModel):
    """A bearer token an identity provider uses to provision one organization over SCIM 2.0.

    `scim_<prefix>_<secret>`; only a SHA-256 of it is stored, the prefix finds the row.
    """

    resource = "apikey"

    name = models.CharField(max_length=150)
    prefix = models.CharField(max_length=16, unique=True)
    token_hash = models.CharField(max_length=64)
    created_by = models.ForeignKey(
        Member, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def state(self) -> str:
        return "revoked" if self.revoked_at else "active"


class IdentityProvider(TenantModel):
    """An identity provider members of one organization sign in with (several allowed): OpenID
    Connect, SAML 2.0, or an IM platform's login."""

    class Kind(models.TextChoices):
        OIDC = "oidc", "OpenID Connect"
        SAML = "saml", "SAML 2.0"
        FEISHU = "feishu", _("Feishu / Lark login")
        WECOM = "wecom", _("WeCom login")
        DINGTALK = "dingtalk", _("DingTalk login")

    name = models.CharField(max_length=150)
    slug = models.SlugField(max_length=64)
    # OIDC, or one of the IM platforms' own OAuth logins (which are not OpenID Connect: no
    # discovery, no id_token; the user is read from the platform's user-info API).
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.OIDC)
    # The issuer exactly as the provider's discovery document and id_tokens state it; the
    # discovery document is read from <issuer>/.well-known/openid-configuration. Blank for the
    # IM logins.
    issuer = models.URLField(max_length=500, blank=True)
    # IM logins: the platform's authorization page and API base URLs (blank: the public ones,
    # e.g. https://accounts.feishu.cn and https://open.feishu.cn); a private deployment or a
    # test points them elsewhere.
    authorize_base_url = models.URLField(max_length=500, blank=True)
    api_base_url = models.URLField(max_length=500, blank=True)
    # WeCom: the self-built application's AgentId. Feishu/DingTalk: the tenant key / corp id
    # sign-ins must come from (blank: any the platform lets through).
    agent_id = models.CharField(max_length=64, blank=True)
    tenant_key = models.CharField(max_length=128, blank=True)
    # OIDC's client id, the IM platforms' app id; blank for SAML.
    client_id = models.CharField(max_length=255, blank=True)
    client_secret = EncryptedTextField(blank=True)
    scopes = models.CharField(max_length=255, default="openid email profile")
    # SAML: the IdP's metadata as last read (from saml_metadata_url when set, else pasted), and
    # the IdP entity id it names; assertions must be signed with a key it lists.
    saml_metadata_url = models.URLField(max_length=500, blank=True)
    saml_metadata_xml = models.TextField(blank=True)
    saml_entity_id = models.CharField(max_length=500, blank=True)
    saml_metadata_read_at = models.DateTimeField(null=True, blank=True)
    # SAML: Cadre's own key pair as the SP of this provider (made on first use): it signs
    # AuthnRequests and logout messages, and assertions are encrypted to it. A `next` pair is
    # published in the SP metadata (signing and encryption) before it becomes current, so the
    # IdP can learn it first (docs/sso.md, "Rotating the SP key pair").
    saml_sp_private_key = EncryptedTextField(blank=True, db_default="")
    saml_sp_certificate = models.TextField(blank=True, db_default="")
    saml_sp_next_private_key = EncryptedTextField(blank=True, db_default="")
    saml_sp_next_certificate = models.TextField(blank=True, db_default="")
    # Which id_token claim (OIDC), user-info field (IM logins) or assertion attribute (SAML,
    # by Name or FriendlyName) carries what: providers differ (Entra puts the e-mail in
    # "preferred_username", Feishu the employee id in "employee_no").
    claim_email = models.CharField(max_length=64, default="email")
    claim_name = models.CharField(max_length=64, default="name")
    claim_employee_id = models.CharField(max_length=64, blank=True)
    # Groups → roles: the claim carrying the user's groups (or departments), and which of its
    # values grant which Cadre roles: [{"value": "cadre-admins", "roles": ["it_admin"]}, …].
    # Applied on every sign-in to the roles the mapping names; other roles are left alone.
    claim_groups = models.CharField(max_length=64, default="groups", blank=True)
    group_roles = models.JSONField(default=list, blank=True)
    # Just-in-time creation of unknown users: off unless an admin turns it on.
    jit_enabled = models.BooleanField(default=False)
    is_enabled = models.BooleanField(default=True)
    last_error = models.CharField(max_length=500, blank=True)
    last_error_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint("organization", "slug", name="identity_provider_unique_slug")
        ]

    def __str__(self) -> str:
        return self.name


class SsoIdentity(TenantModel):
    """A member's account at an identity provider (its `sub`): later sign-ins match on it, so a
    member whose e-mail changes at the provider is still the same member."""

    provider = models.ForeignKey(
        IdentityProvider, on_delete=models.CASCADE, related_name="identities"
    )
    subject = models.CharField(max_length=255)
    member = models.ForeignKey(Member, on_delete=models.CASCADE, related_name="sso_identities")
    created_at = models.DateTimeField(default=timezone.now)
    last_signed_in_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint("provider", "subject", name="sso_identity_unique_subject")
        ]

    def __str__(self) -> str:
        return f"{self.provider_id}:{self.subject}"


class SsoSession(TenantModel):
    """A Cadre sign-in session that came from an identity provider, with what the provider
    calls that session (OIDC `sid`, SAML NameID + SessionIndex): the provider ends it by
    back-channel logout (OIDC) or a LogoutRequest (SAML), and a sign-out of Cadre ends the
    provider's session (OIDC RP-initiated logout)."""

    provider = models.ForeignKey(
        IdentityProvider, on_delete=models.CASCADE, related_name="sessions"
    )
    member = models.ForeignKey(Member, on_delete=models.CASCADE, related_name="sso_sessions")
    session_key = models.CharField(max_length=64, db_index=True)
    # The account at the provider: the OIDC `sub`, the SAML NameID.
    subject = models.CharField(max_length=255)
    name_id_format = models.CharField(max_length=255, blank=True)
    # OIDC `sid` of the id_token, or the SAML SessionIndex.
    provider_session_id = models.CharField(max_length=255, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    ended_at = models.DateTimeField(null=True, blank=True)
    end_reason = models.CharField(max_length=32, blank=True)

    class Meta:
        indexes = [models.Index(fields=["provider", "subject"], name="sso_session_subject")]

    def __str__(self) -> str:
        return f"{self.provider_id}:{self.subject}:{self.session_key[:8]}"


class Notice(TenantModel):
    """A short message for one member: shown in their console, sent over IM where they have an
    identity (`cadre.tenancy.services.notices`). `key` makes sending it again a no-op."""

    resource = "member"

    member = models.ForeignKey(Member, on_delete=models.CASCADE, related_name="notices")
    kind = models.CharField(max_length=64)
    key = models.CharField(max_length=200)
    title = models.CharField(max_length=200)
    body = models.TextField(blank=True)
    url = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    read_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [models.UniqueConstraint("member", "key", name="notice_unique_key")]

    def __str__(self) -> str:
        return self.title
