"""The template editor's pickers: a draft's skills, tool permissions, memory policy, hook
pipeline and target positions chosen from what the organization has, parsed into the same
content the Advanced (JSON) view edits. `cadre.agents.services.version_update` (and its
`validate_content`) decides, as for the JSON view; a service error lands on its section."""

from __future__ import annotations

from dataclasses import dataclass

from django import forms
from django.utils.html import conditional_escape, format_html
from django.utils.safestring import mark_safe
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, gettext_noop, pgettext_lazy

from cadre.agents.hooks.registry import registered
from cadre.agents.mcp_tools import tools_with_risk, wildcard
from cadre.agents.models import HOOK_POINTS, McpServer, TemplateVersion
from cadre.agents.services import CONFIRMATION_POLICIES, MEMORY_SCOPES, RISK_LEVELS
from cadre.agents.tools.registry import all_tools
from cadre.console.scoping import in_organization_of, restricted_for
from cadre.console.views.agents_forms import VersionForm
from cadre.memory.models import DERIVED_KINDS, STATEMENT_KINDS
from cadre.tenancy.models import Position
from hub.models import SkillInstall
from hub.selectors import annotate_latest, packages_visible

# What a version that does not name them reads and writes (runtime.records.grants).
DEFAULT_READ_SCOPES = ["agent", "user"]
DEFAULT_WRITE_SCOPES = ["agent"]
SCOPE_LABELS = {
    "agent": gettext_lazy("Agent — what this agent learned"),
    "user": gettext_lazy("User — the person the agent serves"),
    "position": gettext_lazy("Position — shared by everyone in the role"),
    "department": gettext_lazy("Department — shared by the member's department"),
    "organization": gettext_lazy("Organization — shared by everyone"),
}
CONFIRMATION_LABELS = {
    "never": gettext_lazy("Never ask"),
    "high_risk": gettext_lazy("Ask when high risk"),
    "always": gettext_lazy("Always ask"),
}
RISK_LABELS = {
    "low": pgettext_lazy("risk level", "Low"),
    "medium": pgettext_lazy("risk level", "Medium"),
    "high": pgettext_lazy("risk level", "High"),
    "critical": pgettext_lazy("risk level", "Critical"),
}
HOOK_POINT_LABELS = {
    "on_init": gettext_lazy("When a run starts"),
    "assemble_context": gettext_lazy("Assembling the context"),
    "process_memory": gettext_lazy("After the run: memory"),
    "compact": gettext_lazy("After the run: compaction"),
    "post_process": gettext_lazy("After the run: post-processing"),
    "on_spawn": gettext_lazy("When a run starts a subagent"),
}
SECTIONS = ("skills", "tool_permissions", "memory_policy", "hooks")


# The built-in tools' and hooks' descriptions as the editor shows them: the registries keep
# the English the model reads; a person reads `described()`, looked up by that English.
BUILTIN_DESCRIPTIONS = (
    gettext_noop("Pause until an external event with this key arrives (or the timeout passes)."),
    gettext_noop(
        "Ask another agent (by id) to do something; its answer comes back to you. Only "
        "the message and the memories you list are shared."
    ),
    gettext_noop("Make an HTTP request to an allow-listed host."),
    gettext_noop(
        "Send an IM message to members (names, emails or ids) or groups ('group:<name>')."
    ),
    gettext_noop("Search the memories this agent may read."),
    gettext_noop(
        "Remember a fact, preference or requirement (scope: agent, user, position, "
        "department or organization, as the template allows)."
    ),
    gettext_noop(
        "Publish a structured message to the agents that subscribe to you: a topic, a "
        "summary and optional data. Only the memories you list are shared (never your "
        "member's personal ones)."
    ),
    gettext_noop("Create a task or reminder for the member."),
    gettext_noop(
        "Retrieve memories under the agent's scopes for the input; each passes the policy "
        "chain (masking) before it joins the context."
    ),
    gettext_noop(
        "Send the user's long-lived memories (preferences and requirements by default) on "
        "every turn, oldest first, each through the policy chain; they change only when "
        "the memories do, so the prompt prefix stays cacheable."
    ),
    gettext_noop(
        "Load the agent's installed Hub skills: every description, the body when relevant "
        "to the input; verify each version's signature and record its use."
    ),
    gettext_noop(
        "Extract memories from the turn and write them with provenance under the agent's "
        "writable scopes."
    ),
    gettext_noop(
        "Record the run's tool calls (arguments, result, outcome) as tool trajectories "
        "and the finished task (steps, outcome) as an experience; the next message's "
        "correction or approval becomes that experience's feedback."
    ),
    gettext_noop(
        "Run memory's dedup funnel (near duplicates, judge, conflict rule) on the "
        "memories this run wrote, so the next turn reads the merged state."
    ),
    gettext_noop(
        "When the session's history passes its share of the context budget, summarise the "
        "older turns with provenance labels (user requirement, model assumption, tool "
        "fact, superseded plan) and the turns each covers; the next call reads the "
        "summary."
    ),
    gettext_noop(
        "Spot an employee's correction of the agent's answer, draft a skill change and "
        "ask them to confirm it (a confirmed change becomes a skill candidate)."
    ),
    gettext_noop(
        "A subagent gets the tools, memory scopes and budget the parent asked for, within "
        "the parent's own."
    ),
)


def described(description: str) -> str:
    """A registered tool's or hook's description in the reader's language (as it is when
    no translation exists: an MCP server's own words, a test's hook)."""
    return _(description) if description else ""


class SectionField(forms.Field):
    """A structured field built from the pickers in `clean()`; it holds the section's errors
    (the form's and the service's) and renders nothing itself."""

    widget = forms.HiddenInput

    def __init__(self, **kwargs):
        kwargs.setdefault("required", False)
        super().__init__(**kwargs)


# --- skills -------------------------------------------------------------------------------


class SkillReferenceForm(forms.Form):
    """One Hub skill of the version: the package, a version range or a dist-tag, updates."""

    package = forms.ChoiceField(required=False, label=gettext_lazy("Skill"))
    selector = forms.ChoiceField(
        choices=[("range", gettext_lazy("Version range")), ("tag", gettext_lazy("Dist-tag"))],
        initial="range",
        label=gettext_lazy("Select by"),
    )
    requested = forms.CharField(
        required=False,
        max_length=128,
        label=gettext_lazy("Range or tag"),
        widget=forms.TextInput(attrs={"placeholder": gettext_lazy("^1  or  latest")}),
    )
    policy = forms.ChoiceField(
        choices=SkillInstall.Policy.choices,
        initial=SkillInstall.Policy.AUTO,
        label=gettext_lazy("Updates"),
    )

    def __init__(self, *args, package_choices=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["package"].choices = package_choices

    def clean(self):
        data = super().clean()
        if data.get("DELETE"):
            return data
        if not data.get("package"):
            if (data.get("requested") or "").strip():
                self.add_error("package", _("Choose a skill."))
            return data
        if not (data.get("requested") or "").strip():
            self.add_error(
                "requested", _("Give a version range (^1, ~1.2) or a dist-tag (latest).")
            )
        return data

    def reference(self) -> dict | None:
        data = getattr(self, "cleaned_data", None) or {}
        if data.get("DELETE") or not data.get("package"):
            return None
        return {
            "package": data["package"],
            data.get("selector") or "range": data["requested"].strip(),
            "policy": data.get("policy") or SkillInstall.Policy.AUTO,
        }


SkillFormSet = forms.formset_factory(SkillReferenceForm, extra=1, can_delete=True)


def skill_initial(skills: list) -> list[dict]:
    rows = []
    for entry in skills or []:
        if not isinstance(entry, dict):
            continue
        tag = entry.get("tag")
        rows.append(
            {
                "package": entry.get("package", ""),
                "selector": "tag" if tag else "range",
                "requested": tag or entry.get("range", ""),
                "policy": entry.get("policy") or SkillInstall.Policy.AUTO,
            }
        )
    return rows


def skill_choices(actor, skills: list) -> list:
    """The Hub skills the organization may install — those already on its agents first —
    with their latest version; references the version holds stay choosable."""
    packages = list(packages_visible(actor).order_by("namespace__handle", "name"))
    latest = annotate_latest(packages)
    installed = set(
        in_organization_of(actor, SkillInstall)
        .filter(package__in=packages)
        .values_list("package_id", flat=True)
    )

    def label(package) -> str:
        version = latest.get(package.pk)
        summary = (
            " — " + _("%(version)s latest") % {"version": version.version}
            if version is not None
            else ""
        )
        return f"{package.full_name}{summary}"

    groups = [
        (_("Installed on your agents"), [p for p in packages if p.pk in installed]),
        (_("Available in the Hub"), [p for p in packages if p.pk not in installed]),
    ]
    choices: list = [("", _("— Choose a skill —"))]
    known = set()
    for title, members in groups:
        if members:
            choices.append((title, [(p.full_name, label(p)) for p in members]))
            known |= {p.full_name for p in members}
    held = [
        str(entry["package"])
        for entry in skills or []
        if isinstance(entry, dict) and entry.get("package")
    ]
    held = [name for name in dict.fromkeys(held) if name not in known]
    if held:
        choices.append((_("In this version"), [(name, name) for name in held]))
    return choices


# A position in the target positions' picker: its name (data) and code (an identifier).
POSITION_CHOICE = '<span translate="no">{}</span> (<code>{}</code>)'


# --- tools --------------------------------------------------------------------------------


@dataclass
class ToolRow:
    name: str
    source: str
    description: str
    own_risk: str
    allow: forms.BoundField
    risk: forms.BoundField
    confirmation: forms.BoundField
    hosts: forms.BoundField | None = None

    @property
    def name_html(self) -> str:
        """The tool's name inside the controls' names (edit.html): an identifier."""
        return format_html('<span translate="no">{}</span>', self.name)


def organization_tools(actor) -> list[dict]:
    """Every tool a template of the organization may grant: the built-in tools, then each
    active MCP server's discovered tools and its wildcard."""
    tools = [
        {
            "name": tool.name,
            "source": _("Built-in"),
            "description": described(tool.description),
            "own_risk": tool.risk,
        }
        for tool in all_tools()
    ]
    servers = in_organization_of(actor, McpServer).filter(is_active=True).order_by("name")
    for server in servers:
        # the server's name is its organization's identifier, not words to translate
        named = format_html('<span translate="no">{}</span>', server.name)
        source = format_html("MCP · {}", named)
        tools.append(
            {
                "name": wildcard(server.name),
                "source": source,
                "description": mark_safe(  # noqa: S308 - the sentence is escaped, the name too
                    conditional_escape(_("Every tool of %(server)s, each at its own risk."))
                    % {"server": named}
                ),
                "own_risk": "",
            }
        )
        tools += [
            {
                "name": tool["exposed_name"],
                "source": source,
                "description": tool.get("description") or "",
                "own_risk": tool["risk"],
            }
            for tool in tools_with_risk(server)
        ]
    return tools


# --- hooks --------------------------------------------------------------------------------


def hook_rows(configured: dict) -> list[dict]:
    """Per hook point with hooks: its hooks in the version's order, each on or off. A point
    the version does not configure shows the registered defaults, in registration order."""
    points = []
    for point in HOOK_POINTS:
        hooks = {hook.name: hook for hook in registered(point)}
        if not hooks:
            continue
        entries = (configured or {}).get(point)
        if entries is None:
            rows = [(hook, hook.default) for hook in hooks.values()]
        else:
            listed = [e for e in entries if isinstance(e, dict) and e.get("name") in hooks]
            rows = [(hooks[e["name"]], e.get("enabled", True) is not False) for e in listed]
            named = {e["name"] for e in listed}
            rows += [(hook, False) for name, hook in hooks.items() if name not in named]
        points.append(
            {
                "point": point,
                "label": HOOK_POINT_LABELS.get(point, point),
                "hooks": [
                    {
                        "name": hook.name,
                        "enabled": enabled,
                        "description": described(hook.description),
                    }
                    for hook, enabled in rows
                ],
            }
        )
    return points


def _pipeline(entries) -> list[tuple]:
    """What a point's entries run: the enabled hooks in order, with their config."""
    return [
        (e.get("name"), e.get("config") or {})
        for e in entries or []
        if isinstance(e, dict) and e.get("enabled", True) is not False
    ]


def _default_pipeline(point: str) -> list[tuple]:
    return [(hook.name, {}) for hook in registered(point) if hook.default]


# --- the form -----------------------------------------------------------------------------


class VersionPickerForm(VersionForm):
    """The draft editor without JSON: the structured fields from pickers. The model settings
    the selects do not cover (parameters, budget…) are kept as they are; the Advanced (JSON)
    view edits them."""

    target_positions = forms.MultipleChoiceField(
        required=False,
        label=gettext_lazy("Target positions"),
        widget=forms.CheckboxSelectMultiple,
        help_text=gettext_lazy(
            "The positions this role is meant for; a deployment dispatches to them."
        ),
    )
    model_settings = SectionField()
    skills = SectionField()
    tool_permissions = SectionField()
    memory_policy = SectionField()
    hooks = SectionField()
    read_scopes = forms.MultipleChoiceField(
        required=False,
        label=gettext_lazy("Reads memory of"),
        choices=[(scope, SCOPE_LABELS[scope]) for scope in MEMORY_SCOPES],
        widget=forms.CheckboxSelectMultiple,
    )
    write_scopes = forms.MultipleChoiceField(
        required=False,
        label=gettext_lazy("Writes memory to"),
        choices=[(scope, SCOPE_LABELS[scope]) for scope in MEMORY_SCOPES],
        widget=forms.CheckboxSelectMultiple,
        help_text=gettext_lazy(
            "Memory an agent writes to organization, department or position scope for a "
            "member without memory.manage waits for review."
        ),
    )
    retention_days = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=36500,
        label=gettext_lazy("Retention (days)"),
        help_text=gettext_lazy(
            "Whole days, 1 or more; empty: none named. Recorded in the memory policy; "
            "memories expire by the organization's retention settings (per kind), which this "
            "number does not override."
        ),
    )
    retrieve_derived = forms.MultipleChoiceField(
        required=False,
        label=gettext_lazy("Also retrieve what runs recorded"),
        choices=[(kind.value, kind.label) for kind in DERIVED_KINDS],
        widget=forms.CheckboxSelectMultiple,
        help_text=gettext_lazy(
            "Retrieval finds what people stated (facts, preferences, requirements); "
            "tick a kind to retrieve it too."
        ),
    )

    field_order = ["name", "target_positions"]
    PICKER_FIELDS = ("read_scopes", "write_scopes", "retention_days", "retrieve_derived")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        initial = self.initial
        # Positions: the organization's, and any code the version names that is not one.
        positions = restricted_for(self.actor, Position, "view").filter(is_archived=False)
        # (a position's name is the organization's data and its code an identifier: neither is
        # translated)
        choices = [
            (p.code, format_html(POSITION_CHOICE, p.name, p.code))
            for p in positions.order_by("name")
        ]
        codes = {code for code, _ in choices}
        choices += [
            (
                code,
                mark_safe(  # noqa: S308 - the sentence is escaped, the code too
                    conditional_escape(_("%(code)s (no such position)"))
                    % {"code": format_html("<code>{}</code>", code)}
                ),
            )
            for code in initial.get("target_positions") or []
            if code not in codes
        ]
        self.fields["target_positions"].choices = choices
        # Skills.
        self.skill_formset = SkillFormSet(
            self.data if self.is_bound else None,
            prefix="skill",
            initial=skill_initial(initial.get("skills")),
            form_kwargs={"package_choices": skill_choices(self.actor, initial.get("skills"))},
        )
        # Tools: one row per tool the organization has, and any the version names.
        rules = initial.get("tool_permissions") or {}
        tools = organization_tools(self.actor)
        listed = {tool["name"] for tool in tools}
        tools += [
            {"name": name, "source": _("In this version"), "description": "", "own_risk": ""}
            for name in rules
            if name not in listed
        ]
        self.tools = tools
        for tool in tools:
            name, rule = tool["name"], rules.get(tool["name"])
            rule = rule if isinstance(rule, dict) else {}
            # The table's columns name the fields; each control names its tool for a reader.
            self.fields[f"allow-{name}"] = forms.BooleanField(
                required=False,
                initial=tool["name"] in rules,
                label=_("Allow %(tool)s") % {"tool": name},
                # named by a hidden text in edit.html, the tool's name marked as code
                widget=forms.CheckboxInput(attrs={"aria-labelledby": f"tool-allow-{name}"}),
            )
            # A template's risk only raises a tool's own (Tool.risk_of): lower is not offered,
            # unless the version already says so.
            current = rule.get("risk") if rule.get("risk") in RISK_LEVELS else None
            floor = min(
                (level for level in (tool["own_risk"], current) if level),
                key=RISK_LEVELS.index,
                default="low",
            )
            self.fields[f"risk-{name}"] = forms.ChoiceField(
                choices=[
                    (level, RISK_LABELS.get(level, level.capitalize()))
                    for level in RISK_LEVELS[RISK_LEVELS.index(floor) :]
                ],
                initial=current or tool["own_risk"] or "low",
                label=_("Risk of %(tool)s") % {"tool": name},
                widget=forms.Select(attrs={"aria-labelledby": f"tool-risk-{name}"}),
            )
            self.fields[f"confirmation-{name}"] = forms.ChoiceField(
                choices=[(policy, CONFIRMATION_LABELS[policy]) for policy in CONFIRMATION_POLICIES],
                initial=rule.get("confirmation") or "high_risk",
                label=_("Confirmation for %(tool)s") % {"tool": name},
                widget=forms.Select(attrs={"aria-labelledby": f"tool-confirmation-{name}"}),
            )
            if name == "http_request":
                self.fields[f"hosts-{name}"] = forms.CharField(
                    required=False,
                    max_length=2000,
                    initial=", ".join(rule.get("allowed_hosts") or []),
                    label=_("Hosts %(tool)s may reach") % {"tool": name},
                    widget=forms.TextInput(attrs={"placeholder": "api.example.com"}),
                )
        # Memory policy.
        policy = initial.get("memory_policy") or {}
        self.fields["read_scopes"].initial = policy.get("read_scopes", DEFAULT_READ_SCOPES)
        self.fields["write_scopes"].initial = policy.get("write_scopes", DEFAULT_WRITE_SCOPES)
        self.fields["retention_days"].initial = policy.get("retention_days")
        self.fields["retrieve_derived"].initial = [
            kind for kind in policy.get("retrieve_kinds") or [] if kind in DERIVED_KINDS
        ]
        # Hooks.
        self.hook_points = hook_rows(initial.get("hooks") or {})

    @classmethod
    def initial_for(cls, version: TemplateVersion) -> dict:
        initial = super().initial_for(version)
        initial["target_positions"] = list(version.target_positions or [])
        return initial

    # --- rendering helpers ---

    def tool_rows(self) -> list[ToolRow]:
        return [
            ToolRow(
                name=tool["name"],
                source=tool["source"],
                description=tool["description"],
                own_risk=tool["own_risk"],
                allow=self[f"allow-{tool['name']}"],
                risk=self[f"risk-{tool['name']}"],
                confirmation=self[f"confirmation-{tool['name']}"],
                hosts=self[f"hosts-{tool['name']}"] if tool["name"] == "http_request" else None,
            )
            for tool in self.tools
        ]

    def hook_pipeline(self) -> list[dict]:
        """The hook rows as posted (order and on/off), else as the version has them."""
        if not self.is_bound:
            return self.hook_points
        points = []
        for point in self.hook_points:
            if f"hooks-{point['point']}" not in self.data:
                points.append(point)  # not posted: as the version has it
                continue
            names = [hook["name"] for hook in point["hooks"]]
            by_name = {hook["name"]: hook for hook in point["hooks"]}
            order = self._posted_order(point["point"], names)
            enabled = set(self.data.getlist(f"hooks-{point['point']}-on"))
            hooks = [{**by_name[name], "enabled": name in enabled} for name in order]
            points.append({**point, "hooks": hooks})
        return points

    def _posted_order(self, point: str, names: list[str]) -> list[str]:
        posted = [n for n in dict.fromkeys(self.data.getlist(f"hooks-{point}")) if n in names]
        return posted + [name for name in names if name not in posted]

    # --- parsing ---

    def clean_model_settings(self) -> dict:
        return dict(self.initial.get("model_settings") or {})

    def clean_target_positions(self) -> list[str]:
        return list(self.cleaned_data.get("target_positions") or [])

    def clean(self):
        data = super().clean()
        data["skills"] = self._skills()
        data["tool_permissions"] = self._tool_permissions(data)
        data["memory_policy"] = self._memory_policy(data)
        data["hooks"] = self._hooks()
        for name in list(data):
            if name not in TemplateVersion.CONTENT_FIELDS and name != "change_note":
                data.pop(name)
        return data

    def _skills(self) -> list[dict]:
        if not self.skill_formset.is_valid():
            self.add_error("skills", _("Correct the skills marked below."))
            return list(self.initial.get("skills") or [])
        references = [form.reference() for form in self.skill_formset.forms]
        return [reference for reference in references if reference is not None]

    def _tool_permissions(self, data: dict) -> dict:
        before = self.initial.get("tool_permissions") or {}
        chosen = {}
        for tool in self.tools:
            name = tool["name"]
            if not data.get(f"allow-{name}"):
                continue
            rule = before.get(name) if isinstance(before.get(name), dict) else {}
            rule = {
                **rule,
                "risk": data.get(f"risk-{name}") or "low",
                "confirmation": data.get(f"confirmation-{name}") or "never",
            }
            if f"hosts-{name}" in self.fields:
                hosts = (data.get(f"hosts-{name}") or "").replace(",", " ").split()
                if hosts:
                    rule["allowed_hosts"] = hosts
                else:
                    rule.pop("allowed_hosts", None)
            chosen[name] = rule
        return chosen

    def _memory_policy(self, data: dict) -> dict:
        policy = dict(self.initial.get("memory_policy") or {})
        for key, default in (
            ("read_scopes", DEFAULT_READ_SCOPES),
            ("write_scopes", DEFAULT_WRITE_SCOPES),
        ):
            scopes = [s for s in MEMORY_SCOPES if s in (data.get(key) or [])]
            if key in policy or scopes != default:
                policy[key] = scopes
        if data.get("retention_days") is None:
            policy.pop("retention_days", None)
        else:
            policy["retention_days"] = data["retention_days"]
        # Statement kinds a version narrowed to in JSON stay; the derived kinds are ticked.
        stated = [k for k in policy.get("retrieve_kinds") or [] if k in STATEMENT_KINDS]
        stated = stated or [kind.value for kind in STATEMENT_KINDS]
        ticked = data.get("retrieve_derived") or []
        derived = [kind.value for kind in DERIVED_KINDS if kind.value in ticked]
        if derived or len(stated) < len(STATEMENT_KINDS):
            policy["retrieve_kinds"] = [str(kind) for kind in stated] + derived
        else:
            policy.pop("retrieve_kinds", None)
        return policy

    def _hooks(self) -> dict:
        before = self.initial.get("hooks") or {}
        hooks = {point: entries for point, entries in before.items() if point in HOOK_POINTS}
        for point in self.hook_pipeline():
            name = point["point"]
            configs = {
                e.get("name"): e.get("config")
                for e in before.get(name) or []
                if isinstance(e, dict) and e.get("config")
            }
            entries = [
                {"name": hook["name"], "enabled": hook["enabled"]}
                | ({"config": configs[hook["name"]]} if hook["name"] in configs else {})
                for hook in point["hooks"]
            ]
            if name in before and _pipeline(entries) == _pipeline(before[name]):
                continue  # runs the same hooks: left as the version writes it
            if name not in before and _pipeline(entries) == _default_pipeline(name):
                continue  # the defaults: a hook registered later joins them
            hooks[name] = entries
        return hooks

    def content_errors(self) -> dict[str, list]:
        """The errors of each section, for the template to show next to its pickers."""
        return {name: self.errors.get(name, []) for name in SECTIONS}
