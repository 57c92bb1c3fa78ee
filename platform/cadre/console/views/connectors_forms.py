"""Forms of the connectors pages: per-platform credential fields (write-only), bindings, mapping
and the identity import upload."""

from __future__ import annotations

from django import forms
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from cadre.console.department_tree import department_choices
from cadre.console.forms import ActorFormMixin
from cadre.console.scoping import restricted_for
from cadre.console.views.connectors_setup import (
    STREAM_MODES,
    credential_fields,
    extra_for,
    setting_fields,
)
from cadre.im import platform_choices
from cadre.tenancy.models import Department, Member, Position
from connectors.directory.identity_import import MAX_BYTES

CREDENTIAL_PREFIX = "credential_"
SETTING_PREFIX = "setting_"


def _secret_field(label: str, help_text: str, required: bool) -> forms.CharField:
    # render_value=False: a secret typed once is never sent back to a browser, not even when
    # the form is shown again with errors.
    return forms.CharField(
        label=label,
        help_text=help_text,
        required=required,
        max_length=4096,
        strip=True,
        widget=forms.PasswordInput(
            render_value=False, attrs={"autocomplete": "new-password", "spellcheck": "false"}
        ),
    )


def _setting_field(setting) -> forms.Field:
    if setting.choices:
        return forms.ChoiceField(
            label=setting.label,
            choices=setting.choices,
            required=False,
            help_text=setting.help,
        )
    if setting.kind == "url":
        return forms.URLField(
            label=setting.label,
            required=setting.required,
            help_text=setting.help,
            assume_scheme="https",
        )
    if setting.kind == "integer":
        return forms.IntegerField(
            label=setting.label, required=setting.required, help_text=setting.help, min_value=0
        )
    return forms.CharField(
        label=setting.label, required=setting.required, help_text=setting.help, max_length=200
    )


class PlatformChoiceForm(forms.Form):
    platform = forms.ChoiceField(choices=platform_choices, label=gettext_lazy("Platform"))


class ConnectorForm(forms.Form):
    """A new connector of one platform: its name, credentials and settings."""

    name = forms.CharField(
        max_length=150,
        label=gettext_lazy("Name"),
        help_text=gettext_lazy("e.g. “Feishu — headquarters”."),
    )

    def __init__(self, *args, platform: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.platform = platform
        for key, label, help_text, required in credential_fields(platform):
            self.fields[CREDENTIAL_PREFIX + key] = _secret_field(label, help_text, required)
        for setting in setting_fields(platform):
            self.fields[SETTING_PREFIX + setting.name] = _setting_field(setting)

    def credential_bound_fields(self):
        return [self[name] for name in self.fields if name.startswith(CREDENTIAL_PREFIX)]

    def setting_bound_fields(self):
        return [self[name] for name in self.fields if name.startswith(SETTING_PREFIX)]

    def clean(self):
        data = super().clean()
        mode = data.get(SETTING_PREFIX + "mode")
        extra = extra_for(self.platform)
        if mode in STREAM_MODES and extra is not None and not extra.installed:
            self.add_error(
                SETTING_PREFIX + "mode",
                _(
                    "This mode needs the %(module)s package, which is not installed on this "
                    "server. Install it with %(command)s, or choose HTTP callbacks."
                )
                % {"module": extra.module, "command": extra.command},
            )
        return data

    def credentials(self) -> dict:
        return {
            name.removeprefix(CREDENTIAL_PREFIX): value
            for name, value in self.cleaned_data.items()
            if name.startswith(CREDENTIAL_PREFIX) and value
        }

    def settings(self) -> dict:
        return {
            name.removeprefix(SETTING_PREFIX): value
            for name, value in self.cleaned_data.items()
            if name.startswith(SETTING_PREFIX) and value not in (None, "")
        }


class RotateCredentialsForm(forms.Form):
    """New credentials; an empty field keeps the stored value (which is never shown)."""

    def __init__(self, *args, platform: str, **kwargs):
        super().__init__(*args, **kwargs)
        for key, label, help_text, _required in credential_fields(platform):
            self.fields[CREDENTIAL_PREFIX + key] = _secret_field(
                label, help_text or _("Leave empty to keep the stored value."), False
            )

    def clean(self):
        data = super().clean()
        if not any(data.get(name) for name in self.fields):
            raise forms.ValidationError(_("Enter at least one new credential."))
        return data

    def merged(self, stored: dict) -> dict:
        given = {
            name.removeprefix(CREDENTIAL_PREFIX): value
            for name, value in self.cleaned_data.items()
            if value
        }
        return {**stored, **given}


class BindingForm(ActorFormMixin, forms.Form):
    name = forms.CharField(
        max_length=150,
        required=False,
        label=gettext_lazy("Name"),
        help_text=gettext_lazy("e.g. “Sales team”."),
    )
    deployment = forms.TypedChoiceField(
        label=gettext_lazy("Deployment"),
        coerce=int,
        required=False,
        empty_value=None,
        help_text=gettext_lazy("Messages from these people go to their agent of this deployment."),
    )
    positions = forms.ModelMultipleChoiceField(
        queryset=Position.objects.none(),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label=gettext_lazy("Positions"),
    )
    departments = forms.ModelMultipleChoiceField(
        queryset=Department.objects.none(), required=False, label=gettext_lazy("Departments")
    )
    members = forms.ModelMultipleChoiceField(
        queryset=Member.objects.none(), required=False, label=gettext_lazy("Members")
    )
    chat_ids = forms.CharField(
        label=gettext_lazy("Group chats"),
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text=gettext_lazy(
            "Platform chat ids, one per line (Feishu oc_…, Slack C…, WeCom chatid)."
        ),
    )

    def __init__(self, *args, deployments: list[tuple[int, str]], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["deployment"].choices = [("", _("— Any of their agents —")), *deployments]
        self.fields["positions"].queryset = restricted_for(self.actor, Position, "view").filter(
            is_archived=False
        )
        departments = restricted_for(self.actor, Department, "view").filter(is_archived=False)
        self.fields["departments"].queryset = departments
        self.fields["departments"].choices = department_choices(departments, "")[1:]
        self.fields["members"].queryset = (
            restricted_for(self.actor, Member, "view")
            .filter(status=Member.Status.ACTIVE)
            .order_by("display_name")
        )

    def clean_chat_ids(self) -> list[str]:
        ids = [line.strip() for line in self.cleaned_data["chat_ids"].splitlines()]
        ids = [chat_id for chat_id in ids if chat_id]
        if any(len(chat_id) > 191 for chat_id in ids):
            raise forms.ValidationError(_("A chat id is longer than 191 characters."))
        return ids

    def clean(self):
        data = super().clean()
        if not any(data.get(key) for key in ("positions", "departments", "members", "chat_ids")):
            raise forms.ValidationError(
                _(
                    "Choose whom this binding serves: positions, departments, members or "
                    "group chats."
                )
            )
        return data


class MapIdentityForm(ActorFormMixin, forms.Form):
    member = forms.ModelChoiceField(
        queryset=Member.objects.none(),
        empty_label=gettext_lazy("— Choose a member —"),
        label=gettext_lazy("Member"),
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["member"].queryset = (
            restricted_for(self.actor, Member, "manage")
            .filter(status=Member.Status.ACTIVE)
            .order_by("display_name")
        )
        self.fields["member"].label_from_instance = lambda member: (
            f"{member.display_name} ({member.email})" if member.email else member.display_name
        )


class IdentityImportForm(forms.Form):
    file = forms.FileField(
        label=gettext_lazy("CSV file"),
        help_text=gettext_lazy(
            "UTF-8, with a header row: platform_user_id and one of member_email, "
            "employee_no or mobile; optional tenant_key and display_name."
        ),
    )

    def clean_file(self):
        upload = self.cleaned_data["file"]
        if upload.size > MAX_BYTES:
            raise forms.ValidationError(
                _("The file is larger than %(size)d KiB.") % {"size": MAX_BYTES // 1024}
            )
        return upload.read()


class IdentityImportApplyForm(forms.Form):
    """The previewed file, sent back unchanged; it is checked again before anything is written."""

    content = forms.CharField(widget=forms.HiddenInput, strip=False, max_length=MAX_BYTES)
