"""Console forms: validation at the edge; choice fields only offer the actor's own objects.

Forms never save: views hand `cleaned_data` to a service, and a service's `CadreError` is put
back on the form with `add_service_error` so the person sees the message next to the field.
"""

from __future__ import annotations

import zoneinfo
from datetime import datetime, time

from django import forms
from django.conf import settings
from django.contrib.auth.password_validation import password_validators_help_text_html
from django.utils import timezone
from django.utils.functional import lazy
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.text import format_lazy
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, pgettext

from cadre.console.department_tree import department_choices
from cadre.console.scoping import restricted_for
from cadre.console.templatetags.console import target_type_label
from cadre.errors import CadreError
from cadre.im import platform_choices
from cadre.memory.models import Kind, Memory, SourceKind
from cadre.tenancy.models import (
    Department,
    Member,
    Organization,
    Position,
    department_subtree_ids,
)
from cadre.tenancy.roles import ROLES, SCOPES


def add_service_error(form: forms.Form, error: CadreError) -> None:
    """Show a service error on the form: field details next to fields, the message on top."""
    field_messages: list[str] = []
    for name, messages in (error.details or {}).items():
        if not isinstance(messages, list | tuple):
            messages = [str(messages)]
        if name in form.fields:
            for message in messages:
                form.add_error(name, str(message))
                field_messages.append(str(message))
    if error.message not in field_messages:
        form.add_error(None, error.message)


class ActorFormMixin:
    """Forms built for one actor: their organization scopes every choice."""

    def __init__(self, *args, actor, **kwargs):
        self.actor = actor
        super().__init__(*args, **kwargs)


def department_field(field: forms.ModelChoiceField, queryset) -> None:
    """Restrict a department field and list its choices as an indented tree."""
    field.queryset = queryset
    field.choices = department_choices(queryset, field.empty_label or "")


ROLE_FORM_CHOICES = [
    (role.name, format_lazy("{} — {}", role.label, role.description)) for role in ROLES.values()
]

# The languages a member can read Cadre in; blank: their browser's, else the organization's.
LANGUAGE_CHOICES = [("", gettext_lazy("Browser or organization default")), *settings.LANGUAGES]


# --- members ------------------------------------------------------------------------------


class MemberForm(ActorFormMixin, forms.Form):
    display_name = forms.CharField(label=gettext_lazy("Name"), max_length=150)
    email = forms.EmailField(
        label=gettext_lazy("Email"),
        required=False,
        help_text=gettext_lazy("Needed to invite them to the console."),
    )
    mobile = forms.CharField(label=gettext_lazy("Mobile"), max_length=32, required=False)
    employee_no = forms.CharField(
        label=gettext_lazy("Employee number"), max_length=64, required=False
    )
    title = forms.CharField(label=gettext_lazy("Job title"), max_length=150, required=False)
    department = forms.ModelChoiceField(
        label=gettext_lazy("Department"),
        queryset=Department.objects.none(),
        required=False,
        empty_label=gettext_lazy("— No department —"),
    )
    manager = forms.ModelChoiceField(
        label=gettext_lazy("Manager"),
        queryset=Member.objects.none(),
        required=False,
        empty_label=gettext_lazy("— No manager —"),
    )
    positions = forms.ModelMultipleChoiceField(
        label=gettext_lazy("Positions"),
        queryset=Position.objects.none(),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text=gettext_lazy("Agents are dispatched to positions."),
    )
    roles = forms.MultipleChoiceField(
        label=gettext_lazy("Roles"),
        choices=ROLE_FORM_CHOICES,
        widget=forms.CheckboxSelectMultiple,
        help_text=gettext_lazy(
            "What this person may do in the console. Employees only chat with agents."
        ),
        error_messages={
            "required": gettext_lazy("Choose at least one role (Employee for most people).")
        },
    )
    language = forms.ChoiceField(
        label=gettext_lazy("Language"),
        choices=LANGUAGE_CHOICES,
        required=False,
        help_text=gettext_lazy(
            "The language Cadre speaks to them in: the console, IM cards and messages, e-mails."
        ),
    )

    def __init__(self, *args, member: Member | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.member = member
        department_field(
            self.fields["department"],
            restricted_for(self.actor, Department, "view").filter(is_archived=False),
        )
        managers = restricted_for(self.actor, Member, "view").exclude(
            status=Member.Status.DEACTIVATED
        )
        if member is not None:
            managers = managers.exclude(pk=member.pk)
        else:
            # Set once the member exists (the member themself chooses it in the console).
            del self.fields["language"]
        self.fields["manager"].queryset = managers
        self.fields["positions"].queryset = restricted_for(self.actor, Position, "view").filter(
            is_archived=False
        )
        if not self.actor.has("member.assign_roles"):
            # Without the permission the field is not offered at all (and so never submitted).
            del self.fields["roles"]
        else:
            self.fields["roles"].initial = ["employee"]


class InviteForm(ActorFormMixin, forms.Form):
    email = forms.EmailField(
        label=gettext_lazy("Email"),
        help_text=gettext_lazy(
            "The invitation link is e-mailed to this address when mail is configured, and "
            "shown once either way."
        ),
    )
    display_name = forms.CharField(
        label=gettext_lazy("Name"),
        max_length=150,
        required=False,
        help_text=gettext_lazy("They can change it when they accept."),
    )
    department = forms.ModelChoiceField(
        label=gettext_lazy("Department"),
        queryset=Department.objects.none(),
        required=False,
        empty_label=gettext_lazy("— No department —"),
    )
    positions = forms.ModelMultipleChoiceField(
        label=gettext_lazy("Positions"),
        queryset=Position.objects.none(),
        required=False,
        widget=forms.CheckboxSelectMultiple,
    )
    roles = forms.MultipleChoiceField(
        label=gettext_lazy("Roles"),
        choices=ROLE_FORM_CHOICES,
        required=False,
        widget=forms.CheckboxSelectMultiple,
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        department_field(
            self.fields["department"],
            restricted_for(self.actor, Department, "view").filter(is_archived=False),
        )
        self.fields["positions"].queryset = restricted_for(self.actor, Position, "view").filter(
            is_archived=False
        )
        if not self.actor.has("member.assign_roles"):
            del self.fields["roles"]
        else:
            self.fields["roles"].initial = ["employee"]


class DeactivateForm(forms.Form):
    reason = forms.CharField(
        label=gettext_lazy("Reason"),
        widget=forms.Textarea(attrs={"rows": 3}),
        max_length=1000,
        required=False,
        help_text=gettext_lazy("Recorded in the audit log."),
    )


class IdentityForm(forms.Form):
    platform = forms.ChoiceField(label=gettext_lazy("Platform"), choices=platform_choices)
    platform_user_id = forms.CharField(
        label=gettext_lazy("Platform user id"),
        max_length=191,
        help_text=gettext_lazy("e.g. a Feishu open_id, a WeCom userid, a Slack member id."),
    )
    tenant_key = forms.CharField(
        label=gettext_lazy("Tenant"),
        max_length=128,
        required=False,
        help_text=gettext_lazy(
            "Feishu tenant key, WeCom corp id or Slack team id; leave blank with a single tenant."
        ),
    )
    display_name = forms.CharField(
        label=gettext_lazy("Name on the platform"), max_length=150, required=False
    )


class MemberFilterForm(ActorFormMixin, forms.Form):
    """The members list's search and filters (GET)."""

    q = forms.CharField(required=False, label=gettext_lazy("Search"))
    status = forms.ChoiceField(
        label=gettext_lazy("Status"),
        choices=[("", gettext_lazy("Any status")), *Member.Status.choices],
        required=False,
    )
    department = forms.ModelChoiceField(
        label=gettext_lazy("Department"),
        queryset=Department.objects.none(),
        required=False,
        empty_label=gettext_lazy("Any department"),
    )
    role = forms.ChoiceField(
        label=gettext_lazy("Role"),
        choices=[("", gettext_lazy("Any role"))] + [(r.name, r.label) for r in ROLES.values()],
        required=False,
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        department_field(self.fields["department"], restricted_for(self.actor, Department, "view"))


# --- departments and positions ------------------------------------------------------------


class DepartmentForm(ActorFormMixin, forms.Form):
    name = forms.CharField(label=gettext_lazy("Name"), max_length=200)
    parent = forms.ModelChoiceField(
        label=gettext_lazy("Parent"),
        queryset=Department.objects.none(),
        required=False,
        empty_label=gettext_lazy("— Top level —"),
    )
    code = forms.SlugField(
        label=gettext_lazy("Code"),
        max_length=64,
        required=False,
        help_text=gettext_lazy("Optional short identifier, e.g. from your HR system."),
    )
    description = forms.CharField(
        label=gettext_lazy("Description"),
        widget=forms.Textarea(attrs={"rows": 3}),
        required=False,
    )

    def __init__(self, *args, department: Department | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        parents = restricted_for(self.actor, Department, "view").filter(is_archived=False)
        if department is not None:
            # A department cannot move under itself or below: do not even offer those.
            below = department_subtree_ids(department.organization_id, {department.pk})
            parents = parents.exclude(pk__in=below)
        department_field(self.fields["parent"], parents)


class PositionForm(ActorFormMixin, forms.Form):
    name = forms.CharField(label=gettext_lazy("Name"), max_length=200)
    code = forms.SlugField(
        label=gettext_lazy("Code"),
        max_length=64,
        required=False,
        help_text=gettext_lazy("Left blank, it is made from the name."),
    )
    department = forms.ModelChoiceField(
        label=gettext_lazy("Department"),
        queryset=Department.objects.none(),
        required=False,
        empty_label=gettext_lazy("— Any department —"),
    )
    description = forms.CharField(
        label=gettext_lazy("Description"),
        widget=forms.Textarea(attrs={"rows": 3}),
        required=False,
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        department_field(
            self.fields["department"],
            restricted_for(self.actor, Department, "view").filter(is_archived=False),
        )


# --- API keys -----------------------------------------------------------------------------


# "<code>org:read</code> — Read the organization…": the scope is a code, its description words.
_scope_label = lazy(
    lambda name, description: format_html("<code>{}</code> — {}", name, description), SafeString
)


class ApiKeyForm(ActorFormMixin, forms.Form):
    name = forms.CharField(
        label=gettext_lazy("Name"),
        max_length=150,
        help_text=gettext_lazy("Say what uses it, e.g. “HR sync job”."),
    )
    scopes = forms.MultipleChoiceField(
        label=gettext_lazy("Scopes"),
        choices=[
            (name, _scope_label(name, description))
            for name, (description, _permissions) in SCOPES.items()
        ],
        widget=forms.CheckboxSelectMultiple,
        error_messages={"required": gettext_lazy("Choose at least one scope.")},
    )
    expires_on = forms.DateField(
        label=gettext_lazy("Expires on"),
        required=False,
        widget=forms.DateInput(attrs={"type": "date"}),
        help_text=gettext_lazy(
            "The key stops working at the end of this day (organization time zone)."
        ),
    )

    def clean_expires_on(self):
        value = self.cleaned_data.get("expires_on")
        if value is not None and value < timezone.localdate(timezone=self.zone()):
            raise forms.ValidationError(_("Choose today or a later date."))
        return value

    def zone(self) -> zoneinfo.ZoneInfo:
        return organization_zone(self.actor.organization)

    def expires_at(self) -> datetime | None:
        value = self.cleaned_data.get("expires_on")
        if value is None:
            return None
        return datetime.combine(value, time.max).replace(tzinfo=self.zone())


def organization_zone(organization) -> zoneinfo.ZoneInfo:
    try:
        return zoneinfo.ZoneInfo(organization.time_zone or "UTC")
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return zoneinfo.ZoneInfo("UTC")


# --- audit --------------------------------------------------------------------------------


class AuditFilterForm(forms.Form):
    action = forms.CharField(
        required=False,
        label=gettext_lazy("Action"),
        help_text=gettext_lazy("A prefix, e.g. member. or apikey.revoke"),
    )
    actor = forms.CharField(required=False, label=gettext_lazy("Actor"))
    target_type = forms.ChoiceField(required=False, label=gettext_lazy("Target type"), choices=[])
    since = forms.DateField(
        required=False, label=gettext_lazy("From"), widget=forms.DateInput(attrs={"type": "date"})
    )
    until = forms.DateField(
        required=False, label=gettext_lazy("To"), widget=forms.DateInput(attrs={"type": "date"})
    )

    def __init__(self, *args, target_types=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["target_type"].choices = [("", _("Any target"))] + [
            (value, target_type_label(value)) for value in target_types
        ]

    def clean(self):
        data = super().clean()
        since, until = data.get("since"), data.get("until")
        if since and until and since > until:
            self.add_error("until", _("The end date is before the start date."))
        return data


# --- organization -------------------------------------------------------------------------

# The languages Cadre speaks, each named in itself ("English", "简体中文").
LOCALES = list(settings.LANGUAGES)


def time_zone_choices(current: str = "") -> list[tuple[str, str]]:
    """The time zones offered: the "Area/City" names and UTC, not the legacy aliases ("Cuba",
    "Zulu"); `current` stays selectable whatever it is."""
    names = sorted(name for name in zoneinfo.available_timezones() if "/" in name or name == "UTC")
    if current and current not in names and current in zoneinfo.available_timezones():
        names = sorted([*names, current])
    return [(name, name) for name in names]


class OrganizationForm(forms.Form):
    name = forms.CharField(label=gettext_lazy("Name"), max_length=200)
    locale = forms.ChoiceField(
        choices=LOCALES,
        label=gettext_lazy("Language"),
        help_text=gettext_lazy(
            "The default for members who chose no language and whose browser asks for none."
        ),
    )
    time_zone = forms.ChoiceField(
        label=gettext_lazy("Time zone"),
        choices=time_zone_choices(),
        help_text=gettext_lazy("Used for dates in the console and in exports."),
    )
    approved_skills = forms.ChoiceField(
        choices=Organization.ApprovedSkills.choices,
        required=False,  # left out: the setting stays as it is
        label=gettext_lazy("Approved skills"),
        help_text=gettext_lazy(
            "When a skill taught by a template's agents is approved: install it into that "
            "template's next version and roll it out, or offer the install on the skill's page."
        ),
    )

    def clean_approved_skills(self) -> str:
        return self.cleaned_data.get("approved_skills") or (self.initial or {}).get(
            "approved_skills", Organization.ApprovedSkills.OFFER
        )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        current = (self.initial or {}).get("locale")
        if current and current not in dict(LOCALES):
            # Keep a locale set through the API selectable rather than silently changing it.
            self.fields["locale"].choices = [*LOCALES, (current, current)]
        zone = (self.initial or {}).get("time_zone")
        if zone:
            self.fields["time_zone"].choices = time_zone_choices(zone)


# --- invitations --------------------------------------------------------------------------


class InvitationAcceptForm(forms.Form):
    display_name = forms.CharField(label=gettext_lazy("Your name"), max_length=150)
    password = forms.CharField(
        label=gettext_lazy("Password"),
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
        help_text=lazy(password_validators_help_text_html, str)(),
    )
    password_confirm = forms.CharField(
        label=gettext_lazy("Repeat the password"),
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
    )

    def clean(self):
        data = super().clean()
        if data.get("password") and data.get("password") != data.get("password_confirm"):
            self.add_error("password_confirm", _("The two passwords differ."))
        return data


class MemoryFilterForm(forms.Form):
    """Filters of the memory list; the scope choices are the scopes the actor may read."""

    q = forms.CharField(required=False, max_length=200, label=gettext_lazy("Text"))
    scope = forms.ChoiceField(required=False, label=gettext_lazy("Scope"))
    kind = forms.ChoiceField(required=False, label=gettext_lazy("Kind"))
    source = forms.ChoiceField(required=False, label=gettext_lazy("Source"))
    status = forms.ChoiceField(required=False, label=gettext_lazy("Status"))
    since = forms.DateField(
        required=False,
        label=gettext_lazy("Observed from"),
        widget=forms.DateInput(attrs={"type": "date"}),
    )
    until = forms.DateField(
        required=False,
        label=gettext_lazy("Observed to"),
        widget=forms.DateInput(attrs={"type": "date"}),
    )

    def __init__(self, *args, scope_choices: list[tuple[str, str]], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["scope"].choices = [("", _("All readable scopes")), *scope_choices]
        self.fields["kind"].choices = [("", _("Any kind")), *Kind.choices]
        self.fields["source"].choices = [("", _("Any source")), *SourceKind.choices]
        self.fields["status"].choices = [
            ("", pgettext("memory status", "Active")),
            (Memory.Status.SUPERSEDED, pgettext("memory status", "Superseded")),
            (Memory.Status.ARCHIVED, pgettext("memory status", "Archived")),
        ]

    def clean(self):
        data = super().clean()
        if data.get("since") and data.get("until") and data["since"] > data["until"]:
            raise forms.ValidationError(_("The start date is after the end date."))
        return data


class MemoryCorrectForm(forms.Form):
    content = forms.CharField(
        label=gettext_lazy("Content"), widget=forms.Textarea(attrs={"rows": 4}), max_length=8000
    )
    reason = forms.CharField(
        label=gettext_lazy("Reason"),
        required=False,
        max_length=1000,
        help_text=gettext_lazy("Why it is corrected; kept in the memory's history."),
    )
    expected_version = forms.IntegerField(widget=forms.HiddenInput, min_value=1)


class IdentityProviderForm(forms.Form):
    KIND_CHOICES = [
        ("oidc", "OpenID Connect (Entra ID, Okta, Google Workspace, Keycloak, Authing…)"),
        ("saml", "SAML 2.0 (AD FS, Entra ID, Okta, Shibboleth, PingFederate…)"),
        ("feishu", gettext_lazy("Feishu / Lark login")),
        ("wecom", gettext_lazy("WeCom login")),
        ("dingtalk", gettext_lazy("DingTalk login")),
    ]

    name = forms.CharField(
        label=gettext_lazy("Name"),
        max_length=150,
        help_text=gettext_lazy('Shown on the button: "Sign in with …".'),
    )
    slug = forms.SlugField(
        label=gettext_lazy("Slug"),
        max_length=64,
        help_text=gettext_lazy("Part of the callback URL."),
    )
    kind = forms.ChoiceField(
        choices=KIND_CHOICES, initial="oidc", required=False, label=gettext_lazy("Protocol")
    )
    issuer = forms.URLField(
        label=gettext_lazy("Issuer"),
        max_length=500,
        required=False,
        assume_scheme="https",
        help_text=gettext_lazy(
            "OpenID Connect only: as the provider states it; discovery is read from the "
            "issuer followed by /.well-known/openid-configuration."
        ),
    )
    saml_metadata_url = forms.URLField(
        max_length=500,
        required=False,
        assume_scheme="https",
        label=gettext_lazy("IdP metadata URL"),
        help_text=gettext_lazy(
            "SAML only: read when you save (and at every later save). Or paste the "
            "metadata XML below."
        ),
    )
    saml_metadata_xml = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 4}),
        label=gettext_lazy("IdP metadata XML"),
        help_text=gettext_lazy(
            "SAML only: the IdP's metadata (EntityDescriptor with its signing certificate "
            "and single sign-on URL), when it has no URL Cadre can reach."
        ),
    )
    client_id = forms.CharField(
        max_length=255,
        required=False,
        label=gettext_lazy("Client id"),
        help_text=gettext_lazy(
            "Not for SAML. Feishu: the App ID (cli_…). WeCom: the corp id. DingTalk: the "
            "Client ID (AppKey)."
        ),
    )
    client_secret = forms.CharField(
        label=gettext_lazy("Client secret"),
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text=gettext_lazy(
            "Stored encrypted and never shown again; leave empty to keep the current one."
        ),
    )
    agent_id = forms.CharField(
        max_length=64,
        required=False,
        label=gettext_lazy("AgentId"),
        help_text=gettext_lazy("WeCom only: the application's AgentId."),
    )
    tenant_key = forms.CharField(
        max_length=128,
        required=False,
        label=gettext_lazy("Tenant key / corp id"),
        help_text=gettext_lazy(
            "Feishu tenant_key or DingTalk corpId sign-ins must come from; empty: any."
        ),
    )
    authorize_base_url = forms.URLField(
        max_length=500,
        required=False,
        assume_scheme="https",
        label=gettext_lazy("Authorization page base URL"),
        help_text=gettext_lazy(
            "IM logins only; empty: the platform's public one (e.g. https://accounts.feishu.cn)."
        ),
    )
    api_base_url = forms.URLField(
        max_length=500,
        required=False,
        assume_scheme="https",
        label=gettext_lazy("API base URL"),
        help_text=gettext_lazy(
            "IM logins only; empty: the platform's public one (e.g. https://open.feishu.cn)."
        ),
    )
    scopes = forms.CharField(
        label=gettext_lazy("Scopes"),
        max_length=255,
        required=False,
        initial="openid email profile",
        help_text=gettext_lazy("OpenID Connect only; empty: openid email profile."),
    )
    claim_email = forms.CharField(
        max_length=64, initial="email", label=gettext_lazy("E-mail claim")
    )
    claim_name = forms.CharField(max_length=64, initial="name", label=gettext_lazy("Name claim"))
    claim_employee_id = forms.CharField(
        max_length=64,
        required=False,
        label=gettext_lazy("Employee id claim"),
        help_text=gettext_lazy(
            "Matched against the member's employee number. IM logins default to "
            "employee_no (Feishu) and job_number (DingTalk)."
        ),
    )
    claim_groups = forms.CharField(
        max_length=64,
        required=False,
        initial="groups",
        label=gettext_lazy("Groups claim"),
        help_text=gettext_lazy(
            "The claim listing the user's groups or departments (WeCom: department, "
            "DingTalk: dept_id_list)."
        ),
    )
    group_roles = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 4}),
        label=gettext_lazy("Groups → roles"),
        help_text=format_lazy(
            gettext_lazy(
                'One line per group: "group value = role, role". Applied on every sign-in to '
                "the roles named here; other roles are left alone. The last owner is never "
                "demoted. Roles: {roles}."
            ),
            roles=", ".join(f"<code>{name}</code>" for name in ROLES),
        ),
    )
    jit_enabled = forms.BooleanField(
        required=False,
        label=gettext_lazy("Create unknown users on first sign-in"),
        help_text=gettext_lazy("Off: only existing members can sign in."),
    )
    is_enabled = forms.BooleanField(required=False, initial=True, label=gettext_lazy("Enabled"))

    def clean_kind(self) -> str:
        return self.cleaned_data.get("kind") or "oidc"

    def clean_scopes(self) -> str:
        return self.cleaned_data.get("scopes") or "openid email profile"

    def clean(self):
        data = super().clean()
        saml = data.get("kind") == "saml"
        if saml and not (data.get("saml_metadata_url") or data.get("saml_metadata_xml")):
            self.add_error("saml_metadata_url", _("Enter the IdP's metadata URL or paste its XML."))
        if not saml and not data.get("client_id"):
            self.add_error("client_id", _("Required."))
        return data

    @staticmethod
    def mapping_text(mapping) -> str:
        return "\n".join(
            f"{entry['value']} = {', '.join(entry['roles'])}" for entry in mapping or []
        )

    def clean_group_roles(self) -> list[dict]:
        mapping = []
        for number, line in enumerate(self.cleaned_data.get("group_roles", "").splitlines(), 1):
            if not line.strip():
                continue
            value, sep, roles = line.rpartition("=")
            roles_list = [role.strip() for role in roles.split(",") if role.strip()]
            if not sep or not value.strip() or not roles_list:
                raise forms.ValidationError(
                    _("Line %(number)s: write it as: group value = role, role") % {"number": number}
                )
            unknown = [role for role in roles_list if role not in ROLES]
            if unknown:
                raise forms.ValidationError(
                    _("Line %(number)s: unknown role %(role)s.")
                    % {"number": number, "role": repr(unknown[0])}
                )
            mapping.append({"value": value.strip(), "roles": roles_list})
        return mapping
