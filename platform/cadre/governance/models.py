"""Governance's records: masking, exports, policy chains, confirmations, alerts, budgets.

The audit trail's records live beside `audit.py` in `audit_models.py` (a lower layer, see
docs/architecture.md); they are imported here so that Django finds them among the app's models.
"""

from __future__ import annotations

import re

from django.db import models
from django.db.models import Q
from django.utils import timezone, translation
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, pgettext_lazy

from cadre.crypto import EncryptedTextField
from cadre.governance.audit_models import (  # noqa: F401 - the app's models, see above
    AppendOnlyError,
    AuditChainHead,
    AuditEvent,
    AuditEventQuerySet,
)
from cadre.governance.risk import (
    blast_radius_sentence,
    confirmation_summary,
    level_label,
    level_phrase,
    reason_sentence,
    shown_arguments,
)
from cadre.tenancy.models import TenantModel

# How a confirmation was decided (`decided_via`, a vote's `via`) and a vote, as people read them.
VIA_LABELS = {
    "console": gettext_lazy("console"),
    "api": gettext_lazy("API"),
    "im": gettext_lazy("IM"),
    "system": gettext_lazy("system"),
    "direct": gettext_lazy("direct message"),
    "agent_reply": gettext_lazy("reply to the agent"),
    "feishu": gettext_lazy("Feishu"),
    "lark": gettext_lazy("Lark"),
    "wecom": gettext_lazy("WeCom"),
    "dingtalk": gettext_lazy("DingTalk"),
    "slack": gettext_lazy("Slack"),
    "webhook": gettext_lazy("webhook"),
}
VOTE_LABELS = {"approve": gettext_lazy("approve"), "reject": gettext_lazy("reject")}


def via_label(via: str) -> str:
    """ "console", "im:feishu" (an IM card's button), … as a person reads them."""
    platform = via.removeprefix("im:")
    if platform != via and platform in VIA_LABELS:
        return str(VIA_LABELS[platform])
    return str(VIA_LABELS.get(via, via))


# --- masking: pseudonym vault and organization rules (cadre.governance.masking) ---------------


class PseudonymMapping(TenantModel):
    """One placeholder of one conversation (`<PHONE_1>`) and its original, encrypted at rest.

    `value_hash` is an HMAC-SHA256 (key: SECRET_KEY) of the normalized original, so the same
    value finds its placeholder again without decrypting anything.
    """

    resource = "policy"

    conversation_key = models.CharField(max_length=200)
    label = models.CharField(max_length=40)
    number = models.PositiveIntegerField()
    placeholder = models.CharField(max_length=64)
    entity_type = models.CharField(max_length=40)
    value_hash = models.CharField(max_length=64)
    value = EncryptedTextField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["conversation_key", "label", "number"]
        constraints = [
            models.UniqueConstraint(
                "organization",
                "conversation_key",
                "placeholder",
                name="pseudonymmapping_unique_placeholder",
            ),
            models.UniqueConstraint(
                "organization",
                "conversation_key",
                "value_hash",
                name="pseudonymmapping_unique_value",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.conversation_key} {self.placeholder}"


class MaskingRule(TenantModel):
    """An organization-defined detector: a regex or a dictionary of terms, with a type name."""

    resource = "policy"

    class Kind(models.TextChoices):
        PATTERN = "pattern", gettext_lazy("Regular expression")
        DICTIONARY = "dictionary", gettext_lazy("Dictionary of terms")

    name = models.CharField(max_length=150)
    entity_type = models.CharField(max_length=40)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    pattern = models.TextField(blank=True)
    # Dictionary terms (customer names, project code names), one per line, encrypted at rest.
    terms = EncryptedTextField(blank=True)
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint("organization", "name", name="maskingrule_unique_name")
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def term_list(self) -> list[str]:
        return [term for term in (self.terms or "").splitlines() if term.strip()]


# --- audit export (cadre.governance.export) ---------------------------------------------------

from django.contrib.postgres.fields import ArrayField  # noqa: E402

from cadre.tenancy.models import Member  # noqa: E402


class AuditExport(TenantModel):
    """One export job: a time range and filters of the audit log, written as a signed bundle."""

    resource = "audit"

    class Status(models.TextChoices):
        QUEUED = "queued", gettext_lazy("Queued")
        RUNNING = "running", gettext_lazy("Running")
        COMPLETED = "completed", gettext_lazy("Completed")
        FAILED = "failed", gettext_lazy("Failed")
        # the bundle was deleted after CADRE_AUDIT_EXPORT_RETENTION_DAYS
        EXPIRED = "expired", gettext_lazy("Expired")

    requested_by = models.ForeignKey(
        Member, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    formats = ArrayField(models.CharField(max_length=8), default=list)  # jsonl, csv, ocsf
    since = models.DateTimeField(null=True, blank=True)
    until = models.DateTimeField(null=True, blank=True)
    filters = models.JSONField(default=dict, blank=True)  # action, actor_type, target_type, …
    mask = models.BooleanField(default=True)  # free text passes through the masking engine
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    total_rows = models.BigIntegerField(null=True, blank=True)
    rows_written = models.BigIntegerField(default=0)
    bundle_path = models.CharField(max_length=500, blank=True)  # key in the "exports" storage
    manifest = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"audit export {self.pk} ({self.status})"

    @property
    def progress(self) -> float | None:
        if not self.total_rows:
            return 1.0 if self.status == self.Status.COMPLETED else None
        return min(1.0, self.rows_written / self.total_rows)


# --- policy chain (cadre.governance.policy) ---------------------------------------------------


class PolicyChain(TenantModel):
    """An ordered list of policy plugins: the organization's own chain (one per organization)
    or a template chain, which role template versions link to and which runs after it."""

    resource = "policy"

    class Scope(models.TextChoices):
        ORGANIZATION = "organization", gettext_lazy("Organization")
        TEMPLATE = "template", gettext_lazy("Template")

    scope = models.CharField(max_length=16, choices=Scope.choices, default=Scope.ORGANIZATION)
    # [{"plugin": "masking", "enabled": true, "config": {...}}, ...] in evaluation order.
    plugins = models.JSONField(default=list, blank=True)
    version = models.PositiveIntegerField(default=1)
    updated_by = models.ForeignKey(
        Member, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["organization", "scope", "pk"]
        constraints = [
            models.UniqueConstraint(
                "organization",
                condition=Q(scope="organization"),
                name="policychain_one_per_organization",
            )
        ]

    def __str__(self) -> str:
        return f"policy chain {self.organization_id}/{self.scope}:{self.pk} v{self.version}"


class PolicyDecision(TenantModel):
    """One plugin's non-allow decision (or a chain's final decision), linked to its run."""

    resource = "policy"

    stage = models.CharField(max_length=16)  # input, tool_call, output, inbound
    plugin = models.CharField(max_length=64)
    action = models.CharField(max_length=24)  # allow, modify, require_confirmation, deny
    reason = models.TextField(blank=True)
    details = models.JSONField(default=dict, blank=True)
    chain_version = models.PositiveIntegerField(default=0)
    run_id = models.BigIntegerField(null=True, blank=True)
    step_index = models.IntegerField(null=True, blank=True)
    member_id = models.BigIntegerField(null=True, blank=True)
    agent_id = models.BigIntegerField(null=True, blank=True)
    trace_id = models.CharField(max_length=32, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["organization", "created_at"]),
            models.Index(fields=["run_id"]),
            models.Index(fields=["organization", "action", "created_at"]),
        ]


# --- high-risk confirmations (cadre.governance.confirmations) ---------------------------------


class Confirmation(TenantModel):
    """A high-risk tool call waiting for a human decision; decided exactly once."""

    resource = "confirmation"

    class Status(models.TextChoices):
        PENDING = "pending", gettext_lazy("Pending")
        APPROVED = "approved", gettext_lazy("Approved")
        REJECTED = "rejected", gettext_lazy("Rejected")
        EXPIRED = "expired", gettext_lazy("Expired")
        CANCELLED = "cancelled", gettext_lazy("Cancelled")

    idempotency_key = models.CharField(max_length=120, unique=True)
    run_id = models.BigIntegerField(null=True, blank=True)
    step_index = models.IntegerField(null=True, blank=True)
    wait_key = models.CharField(max_length=191, blank=True)  # the runtime Wait it resolves
    agent_id = models.BigIntegerField(null=True, blank=True)
    requester = models.ForeignKey(
        Member, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    tool = models.CharField(max_length=64)
    arguments = models.JSONField(default=dict, blank=True)  # after masking
    summary = models.TextField()
    risk_level = models.CharField(max_length=16)  # medium, high, critical
    risk_reasons = models.JSONField(default=list, blank=True)
    blast_radius = models.JSONField(default=dict, blank=True)  # {"recipients": 120, ...}
    rule = models.JSONField(default=dict, blank=True)  # who may decide (see confirmations.py)
    decider_ids = ArrayField(models.BigIntegerField(), default=list, blank=True)
    required_approvals = models.PositiveSmallIntegerField(default=1)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    # "console", "api", "im:<platform>" (feishu, wecom, dingtalk, slack) or "system" (expiry).
    decided_via = models.CharField(max_length=16, blank=True)
    decided_by = models.ForeignKey(
        Member, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_reason = models.TextField(blank=True)
    trace_id = models.CharField(max_length=32, blank=True)
    expires_at = models.DateTimeField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["organization", "status", "expires_at"]),
            models.Index(fields=["run_id"]),
            models.Index(
                fields=["expires_at"],
                condition=Q(status="pending"),
                name="confirmation_pending_expiry",
            ),
        ]

    def __str__(self) -> str:
        return f"confirmation {self.pk} {self.tool} ({self.status})"

    @classmethod
    def grant_filter(cls, actor, permission: str) -> Q | None:
        # Deciders see what is routed to them, requesters see their own requests; those who
        # decide for a role or audit see everything (organization-wide `confirmation.view`
        # does not exist as a role permission on purpose).
        if permission != "confirmation.view":
            return None
        if actor.has("confirmation.decide") or actor.has("audit.view"):
            return Q()
        if actor.member is None:
            return None
        return Q(requester_id=actor.member.pk) | Q(decider_ids__contains=[actor.member.pk])

    # --- what connectors need (connectors.cards.decisions.ConfirmationLike) --------------------

    # Texts a person reads are in the active language (the console's request, an IM card's
    # reader): the stored summary and reasons stay in English, the record's language.

    @property
    def title(self) -> str:
        return _("Confirm: %(tool)s (%(risk)s)") % {
            "tool": self.tool,
            "risk": level_phrase(self.risk_level),
        }

    @property
    def risk_label(self) -> str:
        """ "high", in the reader's language."""
        return level_label(self.risk_level)

    @property
    def risk_phrase(self) -> str:
        """ "high risk", in the reader's language."""
        return level_phrase(self.risk_level)

    @property
    def reasons_text(self) -> list[str]:
        return [reason_sentence(str(reason)) for reason in self.risk_reasons or []]

    @property
    def decided_via_label(self) -> str:
        return via_label(self.decided_via)

    @property
    def summary_text(self) -> str:
        """The summary in the reader's language: rebuilt from the confirmation's fields when
        the stored (English) summary is what they say, else as stored."""
        language = translation.get_language() or "en"
        if language.split("-")[0] == "en":
            return self.summary
        arguments = {
            "tool": self.tool,
            "arguments_shown": shown_arguments(self.arguments or {}),
            "level": self.risk_level,
            "reasons": list(self.risk_reasons or []),
            "radius": self.blast_radius or {},
            "who": self.requester.display_name if self.requester_id else None,
        }
        with translation.override("en"):
            english = confirmation_summary(**arguments)
        return confirmation_summary(**arguments) if english == self.summary else self.summary

    @property
    def summary_lines(self) -> list[dict]:
        """The summary's lines as a page shows them: a line ending in the (masked) arguments
        has them apart, as code ({"text", "code"})."""
        shown = shown_arguments(self.arguments or {})
        lines = []
        for line in self.summary_text.split("\n"):
            if line.endswith(shown) and len(line) > len(shown):
                lines.append({"text": line[: -len(shown)].rstrip(), "code": shown})
            else:
                lines.append({"text": line, "code": ""})
        return lines

    @property
    def blast_radius_text(self) -> str:
        """The blast radius as a sentence ("Sends to 12 people in All staff.")."""
        return blast_radius_sentence(self.blast_radius)

    @property
    def details_for_card(self) -> list[tuple[str, str]]:
        rows = [(_("Tool"), self.tool), (_("Risk"), self.risk_label)]
        if radius := self.blast_radius_text:
            rows.append((_("Blast radius"), radius))
        rows.append((_("Expires"), self.expires_at.strftime("%Y-%m-%d %H:%M %Z")))
        return rows

    def decider_members(self):
        return Member.objects.filter(
            organization_id=self.organization_id,
            pk__in=self.decider_ids,
            status=Member.Status.ACTIVE,
        )

    @property
    def is_pending(self) -> bool:
        return self.status == self.Status.PENDING


class ConfirmationVote(models.Model):
    """One decider's vote on an N-of-M confirmation (unique: one vote per person)."""

    confirmation = models.ForeignKey(Confirmation, on_delete=models.CASCADE, related_name="votes")
    member = models.ForeignKey(Member, on_delete=models.CASCADE, related_name="+")
    decision = models.CharField(max_length=16)  # approve, reject
    via = models.CharField(max_length=16)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at"]
        constraints = [
            models.UniqueConstraint("confirmation", "member", name="confirmationvote_unique")
        ]

    def __str__(self) -> str:
        return f"{self.confirmation_id}:{self.member_id}:{self.decision}"

    @property
    def decision_label(self) -> str:
        return str(VOTE_LABELS.get(self.decision, self.decision))

    @property
    def via_label(self) -> str:
        return via_label(self.via)


# --- alerting (cadre.governance.alerts) -------------------------------------------------------


class AlertRule(TenantModel):
    """A condition evaluated continuously over recent activity (see alerts.RULE_KINDS)."""

    resource = "policy"

    class Severity(models.TextChoices):
        INFO = "info", gettext_lazy("Info")
        WARNING = "warning", gettext_lazy("Warning")
        CRITICAL = "critical", gettext_lazy("Critical")

    name = models.CharField(max_length=150)
    kind = models.CharField(max_length=40)
    params = models.JSONField(default=dict, blank=True)
    severity = models.CharField(max_length=16, choices=Severity.choices, default="warning")
    # [{"kind": "email", "to": [...]}, {"kind": "webhook", "url": ..., "secret": ...}, ...]
    channels = models.JSONField(default=list, blank=True)
    is_active = models.BooleanField(default=True)
    last_evaluated_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint("organization", "name", name="alertrule_unique_name")
        ]

    def __str__(self) -> str:
        return self.name


class Alert(TenantModel):
    """A firing of a rule, grouped by fingerprint: repeats raise `count`, not new alerts."""

    resource = "audit"

    class Status(models.TextChoices):
        OPEN = "open", pgettext_lazy("status", "Open")
        ACKNOWLEDGED = "acknowledged", gettext_lazy("Acknowledged")
        RESOLVED = "resolved", gettext_lazy("Resolved")

    rule = models.ForeignKey(
        AlertRule, null=True, blank=True, on_delete=models.SET_NULL, related_name="alerts"
    )
    fingerprint = models.CharField(max_length=64)
    severity = models.CharField(max_length=16)
    title = models.CharField(max_length=300)
    details = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.OPEN)
    count = models.PositiveIntegerField(default=1)
    first_seen_at = models.DateTimeField(default=timezone.now)
    last_seen_at = models.DateTimeField(default=timezone.now)
    acknowledged_by = models.ForeignKey(
        Member, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    resolved_by = models.ForeignKey(
        Member, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-last_seen_at"]
        constraints = [
            models.UniqueConstraint(
                "organization",
                "fingerprint",
                condition=~Q(status="resolved"),
                name="alert_unique_open_fingerprint",
            )
        ]

    def __str__(self) -> str:
        return self.title

    @property
    def title_text(self) -> str:
        """The title in the reader's language (titles are stored in English)."""
        return alert_title_text(self.title)

    @property
    def severity_label(self) -> str:
        """ "Warning", in the reader's language."""
        try:
            return str(AlertRule.Severity(self.severity).label)
        except ValueError:
            return self.severity


# The titles alerts are stored with (cadre.governance.alerts, budgets), read back in the active
# language; a title none of these matches is shown as stored.
_ALERT_TITLES = [
    (
        re.compile(r"^(?P<count>\d+) high-risk requests in (?P<minutes>\d+) min$"),
        gettext_lazy("%(count)s high-risk requests in %(minutes)s min"),
    ),
    (
        re.compile(r"^(?P<count>\d+) denied requests by (?P<plugin>\S+)$"),
        gettext_lazy("%(count)s denied requests by %(plugin)s"),
    ),
    (
        re.compile(r"^Spike of denied requests: (?P<count>\d+)$"),
        gettext_lazy("Spike of denied requests: %(count)s"),
    ),
    (
        re.compile(r"^Bulk audit exports: (?P<count>\d+) exports, (?P<rows>\d+) rows$"),
        gettext_lazy("Bulk audit exports: %(count)s exports, %(rows)s rows"),
    ),
    (
        re.compile(r"^(?P<count>\d+) actions outside working hours by (?P<who>.+)$"),
        gettext_lazy("%(count)s actions outside working hours by %(who)s"),
    ),
    (
        re.compile(r"^(?P<count>\d+) signature failures on (?P<type>\S+) (?P<target>\S+)$"),
        gettext_lazy("%(count)s signature failures on %(type)s %(target)s"),
    ),
    (
        re.compile(r"^Skill (?P<skill>\S+) succeeds (?P<rate>\d+%) of (?P<uses>\d+) uses$"),
        gettext_lazy("Skill %(skill)s succeeds %(rate)s of %(uses)s uses"),
    ),
    (
        re.compile(r"^(?P<count>\d+) x (?P<action>\S+) by (?P<type>\S+) (?P<actor>\S+)$"),
        gettext_lazy("%(count)s x %(action)s by %(type)s %(actor)s"),
    ),
]
_BUDGET_TITLE = re.compile(
    r"^(?P<level>\d+) % of the (?P<period>daily|monthly) (?P<metric>tokens|cost) budget of "
    r"(?P<label>.+) used \((?P<used>.+) of (?P<limit>.+)\)$"
)
_BUDGET_SUBJECTS = [
    (re.compile(r"^department (?P<name>.+)$"), gettext_lazy("department %(name)s")),
    (re.compile(r"^member (?P<name>.+)$"), gettext_lazy("member %(name)s")),
    (re.compile(r"^template (?P<name>.+)$"), gettext_lazy("template %(name)s")),
]


# A budget's period and metric inside the alert's sentence ("the monthly tokens budget").
_BUDGET_WORDS = {
    "daily": pgettext_lazy("budget alert", "daily"),
    "monthly": pgettext_lazy("budget alert", "monthly"),
    "tokens": pgettext_lazy("budget alert", "tokens"),
    "cost": pgettext_lazy("budget alert", "cost"),
}


def _budget_subject(label: str) -> str:
    if label == "the organization":
        return _("the organization")
    for pattern, text in _BUDGET_SUBJECTS:
        if match := pattern.match(label):
            return str(text) % match.groupdict()
    return label


def alert_title_text(title: str) -> str:
    """An alert's stored (English) title in the active language."""
    for pattern, text in _ALERT_TITLES:
        if match := pattern.match(title):
            return str(text) % match.groupdict()
    if match := _BUDGET_TITLE.match(title):
        parts = match.groupdict()
        return _(
            "%(level)s %% of the %(period)s %(metric)s budget of %(label)s used "
            "(%(used)s of %(limit)s)"
        ) % {
            **parts,
            "period": _BUDGET_WORDS[parts["period"]],
            "metric": _BUDGET_WORDS[parts["metric"]],
            "label": _budget_subject(parts["label"]),
        }
    return title


# --- usage and budgets (cadre.governance.budgets) --------------------------------------------


class Budget(TenantModel):
    """A daily or monthly limit on model tokens or cost, for the organization, a department
    (and the departments below it), a member or a role template.

    A hard budget refuses a model call that could pass it (before the call is sent); every
    budget raises an alert at 80 % and at 100 %, once per period. The current period's
    counters live on the row and change only under its row lock (see budgets.py).
    """

    resource = "budget"

    class Scope(models.TextChoices):
        ORGANIZATION = "organization", gettext_lazy("Organization")
        DEPARTMENT = "department", gettext_lazy("Department")
        MEMBER = "member", gettext_lazy("Member")
        TEMPLATE = "template", gettext_lazy("Role template")

    class Period(models.TextChoices):
        DAILY = "daily", gettext_lazy("Daily")
        MONTHLY = "monthly", gettext_lazy("Monthly")

    class Metric(models.TextChoices):
        TOKENS = "tokens", gettext_lazy("Tokens")
        COST = "cost", gettext_lazy("Cost")

    class Enforcement(models.TextChoices):
        HARD = "hard", gettext_lazy("Hard (refuse calls)")
        SOFT = "soft", gettext_lazy("Soft (alert only)")

    scope = models.CharField(max_length=16, choices=Scope.choices)
    department = models.ForeignKey(
        "tenancy.Department", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    member = models.ForeignKey(
        "tenancy.Member", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    # A role template (agents, a higher layer): its id, checked through budgets.TEMPLATES.
    template_id = models.PositiveBigIntegerField(null=True, blank=True)
    period = models.CharField(max_length=16, choices=Period.choices)
    metric = models.CharField(max_length=16, choices=Metric.choices)
    # Tokens (a whole number) or an amount in the organization's currency (prices' unit).
    limit = models.DecimalField(max_digits=20, decimal_places=6)
    enforcement = models.CharField(
        max_length=8, choices=Enforcement.choices, default=Enforcement.HARD
    )
    is_active = models.BooleanField(default=True)
    # The current period: settled usage, reservations of calls in flight, alerts raised.
    period_start = models.DateTimeField(null=True, blank=True)
    used_tokens = models.BigIntegerField(default=0)
    used_cost = models.DecimalField(max_digits=20, decimal_places=6, default=0)
    reserved_tokens = models.BigIntegerField(default=0)
    reserved_cost = models.DecimalField(max_digits=20, decimal_places=6, default=0)
    alerted_percent = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["scope", "period", "metric", "pk"]
        constraints = [
            models.UniqueConstraint(
                "organization",
                "scope",
                "department",
                "member",
                "template_id",
                "period",
                "metric",
                nulls_distinct=False,
                name="budget_unique_subject_period_metric",
            )
        ]

    def __str__(self) -> str:
        return f"{self.period} {self.metric} budget ({self.scope})"

    @property
    def used(self):
        return self.used_tokens if self.metric == self.Metric.TOKENS else self.used_cost


class UsageRecord(TenantModel):
    """One metered model call: who it was charged to, what it reserved and what it used.

    Written `reserved` before the call is sent, `settled` with the answer's usage, `released`
    when the call failed. Usage pages and budget counters are sums of these rows.
    """

    resource = "budget"

    class Status(models.TextChoices):
        RESERVED = "reserved", gettext_lazy("Reserved")
        SETTLED = "settled", gettext_lazy("Settled")
        RELEASED = "released", gettext_lazy("Released")

    member = models.ForeignKey(
        "tenancy.Member", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    department = models.ForeignKey(
        "tenancy.Department", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    template_id = models.PositiveBigIntegerField(null=True, blank=True)
    run_id = models.PositiveBigIntegerField(null=True, blank=True)
    purpose = models.CharField(max_length=40)
    provider = models.CharField(max_length=150, blank=True)
    model = models.CharField(max_length=200, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RESERVED)
    reserved_tokens = models.BigIntegerField(default=0)
    reserved_cost = models.DecimalField(max_digits=20, decimal_places=6, default=0)
    input_tokens = models.BigIntegerField(default=0)
    cached_input_tokens = models.BigIntegerField(default=0)
    # Of input_tokens, written to the provider's prompt cache (Anthropic's
    # cache_creation_input_tokens, DashScope's cache writes): priced at the cache-write price.
    cache_write_tokens = models.BigIntegerField(default=0, db_default=0)
    output_tokens = models.BigIntegerField(default=0)
    cost = models.DecimalField(max_digits=20, decimal_places=6, default=0)
    # {"<budget id>": "<period start>"}: the budgets whose counters hold this reservation.
    budgets = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    settled_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [
            models.Index(fields=["organization", "created_at"]),
            models.Index(fields=["organization", "status", "created_at"]),
        ]

    def __str__(self) -> str:
        return f"{self.purpose} call {self.pk} ({self.status})"

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens
