"""Forms of the governance pages: masking bench, confirmation decisions and history filters,
alert filters and rules, audit exports. Validation at the edge; the services decide."""

from __future__ import annotations

import json
from datetime import datetime, time, timedelta

from django import forms
from django.core.validators import validate_email
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from cadre import outbound
from cadre.console.forms import ActorFormMixin, organization_zone
from cadre.console.scoping import restricted_for
from cadre.governance import alerts
from cadre.governance.export import FORMATS
from cadre.governance.masking.policy import MODES
from cadre.governance.masking.services import MAX_PREVIEW_CHARS
from cadre.governance.models import Alert, AlertRule, AuditEvent, Confirmation
from cadre.tenancy.models import Member


class JSONObjectField(forms.CharField):
    """A JSON object typed into a textarea; the error names the line and column."""

    widget = forms.Textarea(attrs={"rows": 6, "class": "mono", "spellcheck": "false"})

    def to_python(self, value):
        text = super().to_python(value)
        if not text or not text.strip():
            return {}
        try:
            data = json.loads(text)
        except ValueError as error:
            line, column = getattr(error, "lineno", "?"), getattr(error, "colno", "?")
            message = getattr(error, "msg", str(error))
            raise forms.ValidationError(
                _("Not valid JSON (line %(line)s, column %(column)s): %(message)s.")
                % {"line": line, "column": column, "message": message}
            ) from None
        if not isinstance(data, dict):
            raise forms.ValidationError(_("Expected a JSON object: { … }."))
        return data


def _day_start(day, zone) -> datetime:
    return datetime.combine(day, time.min, tzinfo=zone)


# --- masking bench ------------------------------------------------------------------------

MODE_LABELS = {
    "redact": gettext_lazy("Redact"),
    "partial": gettext_lazy("Partial"),
    "pseudonymize": gettext_lazy("Pseudonymize"),
}


class MaskingBenchForm(forms.Form):
    text = forms.CharField(
        label=gettext_lazy("Sample text"),
        max_length=MAX_PREVIEW_CHARS,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 8, "autocomplete": "off", "spellcheck": "false"}),
        help_text=gettext_lazy("Nothing you paste here is stored or logged."),
    )
    template = forms.TypedChoiceField(
        required=False, coerce=int, empty_value=None, label=gettext_lazy("Chain of"), choices=[]
    )
    mode = forms.ChoiceField(
        required=False,
        label=gettext_lazy("Mode"),
        choices=[("", gettext_lazy("As configured"))]
        + [(mode, MODE_LABELS.get(mode, mode)) for mode in MODES],
        help_text=gettext_lazy("Try another default mode without changing the configuration."),
    )

    def __init__(self, *args, templates=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["template"].choices = [("", _("The organization"))] + [
            (template.pk, template.name) for template in templates
        ]


# --- confirmations ------------------------------------------------------------------------


class DecisionForm(forms.Form):
    decision = forms.ChoiceField(
        label=gettext_lazy("Decision"),
        choices=[("approve", gettext_lazy("Approve")), ("reject", gettext_lazy("Reject"))],
    )
    reason = forms.CharField(
        required=False,
        max_length=2000,
        label=gettext_lazy("Reason"),
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text=gettext_lazy("Recorded with the decision and shown to the agent on a rejection."),
    )


class ConfirmationHistoryForm(ActorFormMixin, forms.Form):
    status = forms.ChoiceField(
        required=False,
        label=gettext_lazy("State"),
        choices=[("", gettext_lazy("Any state")), *Confirmation.Status.choices],
    )
    decider = forms.ModelChoiceField(
        queryset=Member.objects.none(),
        required=False,
        empty_label=gettext_lazy("Anyone"),
        label=gettext_lazy("Decided by"),
    )
    tool = forms.CharField(required=False, max_length=64, label=gettext_lazy("Tool"))

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["decider"].queryset = restricted_for(self.actor, Member, "view").order_by(
            "display_name"
        )


# --- alerts -------------------------------------------------------------------------------


class AlertFilterForm(forms.Form):
    severity = forms.ChoiceField(
        required=False,
        label=gettext_lazy("Severity"),
        choices=[("", gettext_lazy("Any severity")), *AlertRule.Severity.choices],
    )
    status = forms.ChoiceField(
        required=False,
        label=gettext_lazy("State"),
        choices=[("", gettext_lazy("Any state")), *Alert.Status.choices],
    )


class AlertNoteForm(forms.Form):
    note = forms.CharField(
        required=False,
        max_length=2000,
        label=gettext_lazy("Note"),
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text=gettext_lazy("Recorded in the audit log."),
    )


class AlertRuleForm(ActorFormMixin, forms.Form):
    name = forms.CharField(max_length=150, label=gettext_lazy("Name"))
    kind = forms.ChoiceField(
        label=gettext_lazy("Kind"), choices=[(kind, kind) for kind in alerts.RULE_KINDS]
    )
    severity = forms.ChoiceField(
        label=gettext_lazy("Severity"), choices=AlertRule.Severity.choices, initial="warning"
    )
    params = JSONObjectField(
        required=False,
        label=gettext_lazy("Parameters"),
        help_text=gettext_lazy(
            'JSON, e.g. <code>{"threshold": 20, "window_minutes": 60}</code>. See each kind below.'
        ),
    )
    is_active = forms.BooleanField(required=False, initial=True, label=gettext_lazy("Active"))
    email_to = forms.CharField(
        required=False,
        label=gettext_lazy("E-mail to"),
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text=gettext_lazy("Addresses, one per line or comma-separated."),
    )
    webhook_url = forms.CharField(
        required=False,
        max_length=2000,
        label=gettext_lazy("Webhook URL"),
        help_text=gettext_lazy(
            "https:// recommended. Internal addresses are refused unless an administrator "
            "allowed them."
        ),
    )
    webhook_secret = forms.CharField(
        required=False,
        max_length=500,
        label=gettext_lazy("Webhook secret"),
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text=gettext_lazy(
            "Signs each delivery (<code>X-Cadre-Signature</code>). Leave blank to keep the "
            "current one."
        ),
    )
    im_members = forms.ModelMultipleChoiceField(
        queryset=Member.objects.none(),
        required=False,
        label=gettext_lazy("IM message to"),
        widget=forms.SelectMultiple(attrs={"size": 5}),
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["im_members"].queryset = (
            restricted_for(self.actor, Member, "view")
            .filter(status=Member.Status.ACTIVE)
            .order_by("display_name")
        )

    def clean_email_to(self):
        raw = self.cleaned_data.get("email_to") or ""
        addresses = [part.strip() for part in raw.replace(",", "\n").splitlines() if part.strip()]
        for address in addresses:
            try:
                validate_email(address)
            except forms.ValidationError:
                raise forms.ValidationError(
                    _("“%(address)s” is not an e-mail address.") % {"address": address}
                ) from None
        return addresses

    def clean_webhook_url(self):
        url = (self.cleaned_data.get("webhook_url") or "").strip()
        if not url:
            return ""
        try:
            return outbound.check_url(url, allow_setting=outbound.ALERT_WEBHOOKS)
        except outbound.OutboundRefused as refused:
            raise forms.ValidationError(refused.message) from None

    @staticmethod
    def initial_for(rule: AlertRule) -> dict:
        first = {}
        for channel in rule.channels:
            first.setdefault(channel.get("kind"), channel)
        return {
            "name": rule.name,
            "kind": rule.kind,
            "severity": rule.severity,
            "params": json.dumps(rule.params, indent=2, ensure_ascii=False),
            "is_active": rule.is_active,
            "email_to": "\n".join(first.get("email", {}).get("to", [])),
            "webhook_url": first.get("webhook", {}).get("url", ""),
            "im_members": [int(pk) for pk in first.get("im", {}).get("members", [])],
        }

    def channels(self, rule: AlertRule | None = None) -> list[dict]:
        """The console edits the first channel of each kind; further ones (made through the
        API) are kept as they are."""
        data = self.cleaned_data
        channels: list[dict] = []
        if data["email_to"]:
            channels.append({"kind": "email", "to": data["email_to"]})
        if data["webhook_url"]:
            webhook = {"kind": "webhook", "url": data["webhook_url"]}
            if data["webhook_secret"]:
                webhook["secret"] = data["webhook_secret"]
            channels.append(webhook)
        if data["im_members"]:
            channels.append({"kind": "im", "members": [m.pk for m in data["im_members"]]})
        if rule is not None:
            seen: set[str] = set()
            for channel in rule.channels:
                kind = channel.get("kind")
                if kind in seen:
                    extra = dict(channel)
                    extra.pop("secret", None)  # the service keeps the stored one by URL
                    channels.append(extra)
                seen.add(kind)
        return channels


# --- audit export -------------------------------------------------------------------------


class AuditExportForm(ActorFormMixin, forms.Form):
    since = forms.DateField(
        required=False, label=gettext_lazy("From"), widget=forms.DateInput(attrs={"type": "date"})
    )
    until = forms.DateField(
        required=False,
        label=gettext_lazy("To"),
        widget=forms.DateInput(attrs={"type": "date"}),
        help_text=gettext_lazy(
            "Days in the organization's time zone, both included. Empty: until now."
        ),
    )
    action = forms.CharField(
        required=False,
        max_length=200,
        label=gettext_lazy("Action"),
        help_text=gettext_lazy("Exact, or a prefix ending in “.”: <code>member.</code>"),
    )
    actor_type = forms.ChoiceField(
        required=False,
        label=gettext_lazy("Actor type"),
        choices=[("", gettext_lazy("Any actor")), *AuditEvent.ActorType.choices],
    )
    actor_id = forms.CharField(required=False, max_length=200, label=gettext_lazy("Actor id"))
    target_type = forms.CharField(required=False, max_length=200, label=gettext_lazy("Target type"))
    target_id = forms.CharField(required=False, max_length=200, label=gettext_lazy("Target id"))
    trace_id = forms.CharField(required=False, max_length=200, label=gettext_lazy("Trace id"))
    formats = forms.MultipleChoiceField(
        label=gettext_lazy("Formats"),
        choices=[
            ("jsonl", gettext_lazy("JSON Lines (audit.jsonl)")),
            ("csv", gettext_lazy("CSV (audit.csv)")),
            ("ocsf", gettext_lazy("OCSF 1.1 API Activity (audit.ocsf.jsonl)")),
        ],
        initial=["jsonl"],
        widget=forms.CheckboxSelectMultiple,
        error_messages={"required": gettext_lazy("Choose at least one format.")},
    )
    mask = forms.BooleanField(
        required=False,
        initial=True,
        label=gettext_lazy("Mask personal data and secrets in free text"),
        help_text=gettext_lazy("Unmasked exports need the policy.manage permission."),
    )

    FILTERS = ("action", "actor_type", "actor_id", "target_type", "target_id", "trace_id")

    def clean_formats(self):
        formats = self.cleaned_data["formats"]
        return [fmt for fmt in FORMATS if fmt in formats]

    def clean(self):
        data = super().clean()
        if data.get("since") and data.get("until") and data["since"] > data["until"]:
            self.add_error("until", _("The end date is before the start date."))
        return data

    def service_arguments(self) -> dict:
        data = self.cleaned_data
        zone = organization_zone(self.actor.organization)
        return {
            "formats": data["formats"],
            "since": _day_start(data["since"], zone) if data["since"] else None,
            "until": _day_start(data["until"] + timedelta(days=1), zone) if data["until"] else None,
            "filters": {name: data[name].strip() for name in self.FILTERS if data.get(name)},
            "mask": data["mask"],
        }


class MaskingRuleForm(forms.Form):
    """An organization's own detector; dictionary terms are written, never shown back."""

    name = forms.CharField(max_length=150, label=gettext_lazy("Name"))
    entity_type = forms.CharField(
        max_length=40,
        label=gettext_lazy("Type"),
        help_text=gettext_lazy(
            "What the placeholder is called: CUSTOMER_NAME, PROJECT_CODE (A-Z, 0-9, _)."
        ),
    )
    kind = forms.ChoiceField(
        label=gettext_lazy("Kind"),
        choices=[
            ("dictionary", gettext_lazy("Dictionary of terms")),
            ("pattern", gettext_lazy("Regular expression")),
        ],
    )
    pattern = forms.CharField(required=False, max_length=500, label=gettext_lazy("Pattern"))
    terms = forms.CharField(
        required=False,
        label=gettext_lazy("Terms"),
        widget=forms.Textarea(attrs={"rows": 4, "autocomplete": "off"}),
        help_text=gettext_lazy("One per line. Stored encrypted; never shown again."),
    )

    def clean_entity_type(self):
        return self.cleaned_data["entity_type"].strip().upper()

    def service_arguments(self) -> dict:
        data = self.cleaned_data
        return {
            "name": data["name"].strip(),
            "entity_type": data["entity_type"],
            "kind": data["kind"],
            "pattern": data["pattern"] if data["kind"] == "pattern" else "",
            "terms": data["terms"].splitlines() if data["kind"] == "dictionary" else [],
        }
