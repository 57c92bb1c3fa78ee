"""Forms of the agents area: templates and versions, generation, deployments, rollouts,
agent search and chat. They validate at the edge; the agents services decide."""

from __future__ import annotations

import json

from django import forms
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from cadre.agents import services
from cadre.agents.models import (
    Agent,
    ModelProviderConfig,
    Rollout,
    TemplateVersion,
    channel_choices,
)
from cadre.agents.runtime.lifecycle.services import MAX_INPUT_CHARS
from cadre.console.forms import ActorFormMixin, department_field
from cadre.console.scoping import in_organization_of, restricted_for
from cadre.tenancy.models import Department, Member, Position

# The structured fields of a version, edited as JSON, with the shape each must have.
JSON_FIELDS = {
    "model_settings": (dict, gettext_lazy("an object")),
    "skills": (list, gettext_lazy("a list")),
    "tool_permissions": (dict, gettext_lazy("an object")),
    "memory_policy": (dict, gettext_lazy("an object")),
    "hooks": (dict, gettext_lazy("an object")),
}


class JSONTextField(forms.CharField):
    """A JSON value in a textarea: errors say where the JSON is broken and what was expected."""

    widget = forms.Textarea(attrs={"rows": 8, "class": "mono", "spellcheck": "false"})

    def __init__(self, *args, kind: type, kind_label: str, **kwargs):
        self.kind, self.kind_label = kind, kind_label
        kwargs.setdefault("required", False)
        super().__init__(*args, strip=True, **kwargs)

    def prepare_value(self, value):
        if isinstance(value, dict | list):
            return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)
        return value

    def clean(self, value):
        text = super().clean(value)
        if not text:
            return self.kind()
        try:
            parsed = json.loads(text)
        except json.JSONDecodeError as error:
            raise forms.ValidationError(
                _("Not valid JSON: %(error)s (line %(line)s, column %(column)s).")
                % {"error": error.msg, "line": error.lineno, "column": error.colno},
                code="invalid_json",
            ) from None
        if not isinstance(parsed, self.kind):
            raise forms.ValidationError(
                _("Must be %(kind)s.") % {"kind": self.kind_label}, code="invalid_json"
            )
        return parsed


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    """Several uploaded files (the pattern Django's documentation gives)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("widget", MultipleFileInput(attrs={"accept": ".md,.txt,.docx,.pdf"}))
        super().__init__(*args, **kwargs)

    def clean(self, data, initial=None):
        single = super().clean
        if isinstance(data, list | tuple):
            return [single(item, initial) for item in data]
        return [single(data, initial)] if data else []


# --- templates ------------------------------------------------------------------------------


class TemplateCreateForm(forms.Form):
    name = forms.CharField(max_length=200, label=gettext_lazy("Name"))
    code = forms.SlugField(
        max_length=64,
        label=gettext_lazy("Code"),
        help_text=gettext_lazy("A short identifier, unique in the organization (sales-key)."),
    )
    description = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}), required=False, label=gettext_lazy("Description")
    )
    preset = forms.ChoiceField(
        required=False,
        label=gettext_lazy("Start from"),
        help_text=gettext_lazy(
            "A built-in preset fills the SOP, AGENT.md, tools and memory policy."
        ),
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["preset"].choices = [("", _("— An empty template —"))] + [
            (key, preset["name"]) for key, preset in services.presets().items()
        ]


class VersionForm(ActorFormMixin, forms.Form):
    name = forms.CharField(max_length=200, label=gettext_lazy("Name"))
    target_positions = forms.CharField(
        required=False,
        label=gettext_lazy("Target positions"),
        help_text=gettext_lazy("Position codes, separated by commas."),
    )
    sop = forms.CharField(
        label="SOP", required=False, widget=forms.Textarea(attrs={"rows": 12, "class": "mono"})
    )
    agent_md = forms.CharField(
        label="AGENT.md", required=False, widget=forms.Textarea(attrs={"rows": 10, "class": "mono"})
    )
    user_md_template = forms.CharField(
        label=gettext_lazy("USER.md template"),
        required=False,
        widget=forms.Textarea(attrs={"rows": 6, "class": "mono"}),
        help_text=gettext_lazy(
            "Placeholders: {{member.display_name}}, {{member.title}}, {{member.email}}, "
            "{{member.department}}, {{member.positions}}, {{organization.name}}."
        ),
    )
    provider_config = forms.ChoiceField(
        required=False,
        label=gettext_lazy("Model provider"),
        help_text=gettext_lazy("Providers are added and tested under Models."),
    )
    model = forms.ChoiceField(required=False, label=gettext_lazy("Model"))
    model_settings = JSONTextField(
        kind=dict,
        kind_label=gettext_lazy("an object"),
        label=gettext_lazy("Other model settings"),
        help_text=gettext_lazy(
            "<code>parameters</code>, <code>budget</code>, <code>timeout_seconds</code> — e.g. "
            '<code>{"parameters": {"temperature": 0.2}, "budget": {"max_steps": 6}}</code>. '
            "The provider and model are chosen above."
        ),
    )
    skills = JSONTextField(
        kind=list,
        kind_label=gettext_lazy("a list"),
        label=gettext_lazy("Skills"),
        help_text='<code>[{"package": "acme/crm-notes", "range": "^1"}]</code>',
    )
    tool_permissions = JSONTextField(
        kind=dict,
        kind_label=gettext_lazy("an object"),
        label=gettext_lazy("Tool permissions"),
        help_text='<code>{"im_send": {"risk": "medium", "confirmation": "high_risk"}}</code>',
    )
    memory_policy = JSONTextField(
        kind=dict,
        kind_label=gettext_lazy("an object"),
        label=gettext_lazy("Memory policy"),
        help_text=gettext_lazy(
            '<code>{"read_scopes": ["agent", "user"], "write_scopes": ["agent"]}</code>. Memory an '
            "agent writes to organization, department or position scope for a member without "
            "memory.manage waits for review: no agent is sent it until a reviewer accepts it."
        ),
    )
    hooks = JSONTextField(
        kind=dict,
        kind_label=gettext_lazy("an object"),
        label=gettext_lazy("Hooks"),
        help_text=gettext_lazy(
            'Per hook point, in order: <code>{"assemble_context": [{"name": '
            '"memory_retrieval", "enabled": true}]}</code>'
        ),
    )
    change_note = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        label=gettext_lazy("Change note"),
    )

    # The selects write these keys of model_settings (and "provider", the chosen one's kind);
    # the JSON field holds the rest.
    SELECTED = ("provider_config", "model")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        configs = list(
            in_organization_of(self.actor, ModelProviderConfig)
            .filter(is_active=True)
            .order_by("name", "pk")
        )
        self.configs = {str(config.pk): config for config in configs}
        self.default = default = next((config for config in configs if config.is_default), None)
        self.fields["provider_config"].choices = [
            (
                "",
                _("Organization default — %(name)s") % {"name": default.name}
                if default
                else _("Organization default — none set (the built-in offline model)"),
            ),
            *[
                (str(config.pk), f"{config.name} ({config.get_kind_display()})")
                for config in configs
            ],
        ]
        # The kind the version names (kept when neither a provider nor a default is chosen).
        self.named_kind = named = self.initial.get("provider_kind", "offline")
        if not self.initial.get("provider_config") and default and named != default.kind:
            # The default does not use a model named for another kind (agents.providers.resolve).
            self.initial["model"] = ""
        groups = []
        for config in configs:
            names = dict.fromkeys(n for n in [config.default_model, *config.known_models] if n)
            if names:
                groups.append((config.name, [(name, name) for name in names]))
        current = self.initial.get("model")
        if current and not any(current == name for _, group in groups for name, _ in group):
            groups.append((_("In this version"), [(current, current)]))
        self.fields["model"].choices = [("", _("The provider's own default model")), *groups]

    @classmethod
    def initial_for(cls, version: TemplateVersion) -> dict:
        settings = dict(version.model_settings or {})
        initial = {
            name: getattr(version, name) for name in cls.base_fields if hasattr(version, name)
        }
        initial["target_positions"] = ", ".join(version.target_positions or [])
        initial["provider_config"] = str(settings.pop("provider_config", "") or "")
        initial["model"] = settings.pop("model", "")
        initial["provider_kind"] = settings.pop("provider", "offline")
        initial["model_settings"] = settings
        return initial

    def clean(self):
        data = super().clean()
        # Browsers post a textarea's lines ending in CRLF: stored as written, every save
        # would change every line of the version's diff.
        for name in ("sop", "agent_md", "user_md_template", "change_note"):
            if isinstance(data.get(name), str):
                data[name] = data[name].replace("\r\n", "\n")
        settings = dict(data.get("model_settings") or {})
        config = self.configs.get(data.pop("provider_config", "") or "")
        model = data.pop("model", "")
        for key in (*self.SELECTED, "provider"):
            settings.pop(key, None)
        # The kind goes with the choice: the default's, when the version relies on it, so that
        # the model chosen from its list is used (see agents.providers.resolve).
        chosen = config or self.default
        settings["provider"] = chosen.kind if chosen is not None else self.named_kind
        if config is not None:
            settings["provider_config"] = config.pk
        if model:
            settings["model"] = model
        if "model_settings" in data:
            data["model_settings"] = settings
        return data

    def clean_target_positions(self) -> list[str]:
        raw = self.cleaned_data["target_positions"]
        return [code.strip() for code in raw.split(",") if code.strip()]


class ReasonForm(forms.Form):
    reason = forms.CharField(max_length=1000, required=False)
    # Publishing only: why to go ahead although an evaluation gate fails (audited).
    override_gate = forms.CharField(max_length=500, required=False)


class GenerateForm(forms.Form):
    files = MultipleFileField(
        required=False,
        label=gettext_lazy("Documents"),
        help_text=gettext_lazy(
            "Markdown, text, Word (.docx) or PDF (text, not scanned); 5 MB each."
        ),
    )
    notes = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 4}),
        label=gettext_lazy("Notes"),
        help_text=gettext_lazy("What experienced people would tell a newcomer in this role."),
    )

    def clean(self):
        data = super().clean()
        if not data.get("files") and not (data.get("notes") or "").strip():
            raise forms.ValidationError(_("Upload at least one document or write notes."))
        return data


class DiffForm(forms.Form):
    a = forms.IntegerField(label=gettext_lazy("From version"), min_value=1)
    b = forms.IntegerField(label=gettext_lazy("To version"), min_value=1)
    layout = forms.ChoiceField(
        choices=[("split", gettext_lazy("Side by side")), ("unified", gettext_lazy("Unified"))],
        required=False,
        label=gettext_lazy("Layout"),
    )


# --- deployments ----------------------------------------------------------------------------


class DeploymentForm(ActorFormMixin, forms.Form):
    name = forms.CharField(max_length=200, label=gettext_lazy("Name"))
    version = forms.ModelChoiceField(
        queryset=TemplateVersion.objects.none(),
        label=gettext_lazy("Template version"),
        help_text=gettext_lazy("Only published versions can be dispatched."),
    )
    positions = forms.ModelMultipleChoiceField(
        queryset=Position.objects.none(),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label=gettext_lazy("Positions"),
    )
    departments = forms.ModelMultipleChoiceField(
        queryset=Department.objects.none(),
        required=False,
        label=gettext_lazy("Departments"),
        help_text=gettext_lazy("Sub-departments are included."),
    )
    members = forms.ModelMultipleChoiceField(
        queryset=Member.objects.none(), required=False, label=gettext_lazy("Members")
    )
    channels = forms.MultipleChoiceField(
        choices=channel_choices,
        initial=["console"],
        widget=forms.CheckboxSelectMultiple,
        label=gettext_lazy("Channels"),
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["version"].queryset = (
            restricted_for(self.actor, TemplateVersion, "view")
            .filter(status=TemplateVersion.Status.PUBLISHED, template__is_archived=False)
            .select_related("template")
            .order_by("template__name", "-number")
        )
        self.fields["version"].label_from_instance = lambda v: f"{v.template.name} · v{v.number}"
        self.fields["positions"].queryset = restricted_for(self.actor, Position, "view").filter(
            is_archived=False
        )
        department_field(
            self.fields["departments"],
            restricted_for(self.actor, Department, "view").filter(is_archived=False),
        )
        self.fields["departments"].choices = [
            choice for choice in self.fields["departments"].choices if choice[0] != ""
        ]
        self.fields["members"].queryset = restricted_for(self.actor, Member, "view").filter(
            status=Member.Status.ACTIVE
        )

    def clean(self):
        data = super().clean()
        if not (data.get("positions") or data.get("departments") or data.get("members")):
            raise forms.ValidationError(_("Choose at least one position, department or member."))
        return data


class RolloutForm(forms.Form):
    # No empty choice: the newest published version is chosen until another is picked, so
    # "Start rollout" never posts nothing (a post without one gets the message below).
    version = forms.ModelChoiceField(
        queryset=TemplateVersion.objects.none(),
        label=gettext_lazy("New version"),
        empty_label=None,
        error_messages={"required": gettext_lazy("Choose the published version to roll out.")},
    )
    strategy = forms.ChoiceField(
        choices=Rollout.Strategy.choices, initial="all", label=gettext_lazy("Strategy")
    )

    def __init__(self, *args, deployment, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["version"].queryset = (
            TemplateVersion.objects.filter(
                template_id=deployment.template_id, status=TemplateVersion.Status.PUBLISHED
            )
            .exclude(pk=deployment.version_id)
            .order_by("-number")
        )
        self.fields["version"].label_from_instance = lambda v: f"v{v.number} · {v.name}"
        self.fields["version"].initial = self.fields["version"].queryset.first()


# --- agents and chat ------------------------------------------------------------------------


class AgentFilterForm(ActorFormMixin, forms.Form):
    q = forms.CharField(required=False, label=gettext_lazy("Search"))
    member = forms.ModelChoiceField(
        queryset=Member.objects.none(), required=False, empty_label=gettext_lazy("Any member")
    )
    position = forms.ModelChoiceField(
        queryset=Position.objects.none(), required=False, empty_label=gettext_lazy("Any position")
    )
    version = forms.ModelChoiceField(
        queryset=TemplateVersion.objects.none(),
        required=False,
        empty_label=gettext_lazy("Any version"),
    )
    status = forms.ChoiceField(
        choices=[("", gettext_lazy("Any status")), *Agent.Status.choices], required=False
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["member"].queryset = restricted_for(self.actor, Member, "view")
        self.fields["position"].queryset = restricted_for(self.actor, Position, "view")
        self.fields["version"].queryset = (
            restricted_for(self.actor, TemplateVersion, "view")
            .filter(status=TemplateVersion.Status.PUBLISHED)
            .select_related("template")
            .order_by("template__name", "-number")
        )
        self.fields["version"].label_from_instance = lambda v: f"{v.template.name} · v{v.number}"


class ChatMessageForm(forms.Form):
    text = forms.CharField(
        max_length=MAX_INPUT_CHARS,
        widget=forms.Textarea(
            attrs={"rows": 3, "placeholder": gettext_lazy("Write to your agent…")}
        ),
        label=gettext_lazy("Message"),
    )
