"""Risk classification of a tool call: the tool's declared level, the policy chain's decisions
and what the arguments say (recipients, batch size, deletion, export, external send, payment).

Levels: low < medium < high < critical. High and critical calls need a human confirmation;
critical ones also need someone other than the requester (see confirmations.py).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext, pgettext, pgettext_lazy

LEVELS = ("low", "medium", "high", "critical")

# A level as a person reads it: the word ("high") and the phrase ("high risk").
LEVEL_LABELS = {
    "low": pgettext_lazy("risk level", "low"),
    "medium": pgettext_lazy("risk level", "medium"),
    "high": pgettext_lazy("risk level", "high"),
    "critical": pgettext_lazy("risk level", "critical"),
}
LEVEL_PHRASES = {
    "low": gettext_lazy("low risk"),
    "medium": gettext_lazy("medium risk"),
    "high": gettext_lazy("high risk"),
    "critical": gettext_lazy("critical risk"),
}

DEFAULT_THRESHOLDS = {
    "recipients_high": 20,  # a message to more than this many recipients is high risk
    "recipients_critical": 200,
    "batch_high": 50,  # a batch update of more than this many records is high risk
    "batch_critical": 1000,
    "payment_critical": 10_000,  # an amount at or above this is critical
}

_DELETE = re.compile(r"(^|_)(delete|remove|purge|drop|erase|destroy|wipe)(_|$)")
_EXPORT = re.compile(r"(^|_)(export|download|dump|extract|backup)(_|$)")
_PAYMENT = re.compile(r"(^|_)(pay|payment|transfer|refund|payout|invoice_pay|wire)(_|$)")
_EXTERNAL = re.compile(r"(^|_)(email|sms|webhook|http|post_external|publish|tweet)(_|$)")
_BATCH_KEYS = ("ids", "items", "records", "updates", "rows", "targets", "members")
_RECIPIENT_KEYS = ("recipients", "to", "cc", "bcc", "emails", "users", "channels")


def level_max(*levels: str) -> str:
    return max((level for level in levels if level in LEVELS), key=LEVELS.index, default="low")


@dataclass
class RiskAssessment:
    level: str
    reasons: list[str] = field(default_factory=list)
    blast_radius: dict = field(default_factory=dict)

    @property
    def needs_confirmation(self) -> bool:
        return LEVELS.index(self.level) >= LEVELS.index("high")

    def raise_to(self, level: str, reason: str) -> None:
        if LEVELS.index(level) > LEVELS.index(self.level):
            self.level = level
        self.reasons.append(reason)


def _count(value) -> int:
    if isinstance(value, (list, tuple)):
        return len(value)
    if isinstance(value, str) and value:
        return len([part for part in re.split(r"[,;\s]+", value) if part])
    return 1 if value not in (None, "") else 0


def _amount(arguments: dict) -> float | None:
    for key in ("amount", "total", "value", "sum"):
        value = arguments.get(key)
        try:
            return float(value) if value is not None else None
        except (TypeError, ValueError):
            continue
    return None


def _reads_only(arguments: dict) -> bool:
    """An HTTP call that only reads (GET/HEAD) sends nothing out."""
    method = arguments.get("method")
    return (isinstance(method, str) and method.upper() in ("GET", "HEAD")) or (
        method is None and "url" in arguments and not arguments.get("body")
    )


def classify(
    *,
    tool: str,
    arguments: dict | None,
    declared: str = "low",
    policy_result=None,
    thresholds: dict | None = None,
    internal_domains: list[str] | None = None,
    reach: dict | None = None,
) -> RiskAssessment:
    """Classify one tool call; `policy_result` is the chain's ChainResult for the call.

    `reach` is what the tool resolved of its blast radius ({"recipients": 12, "groups":
    [{"name": "All staff", "people": 12}]}): counted people, not the entries of `to`, decide
    the recipients' thresholds, and the confirmation says it in a sentence."""
    limits = {**DEFAULT_THRESHOLDS, **(thresholds or {})}
    arguments = arguments or {}
    name = tool.lower()
    assessment = RiskAssessment(level=declared if declared in LEVELS else "low")
    if declared in ("high", "critical"):
        assessment.reasons.append(f"the tool is declared {declared} risk")

    recipients = sum(_count(arguments.get(key)) for key in _RECIPIENT_KEYS if key in arguments)
    if reach:
        assessment.blast_radius.update(reach)
        recipients = int(reach.get("recipients", recipients))
    if recipients:
        assessment.blast_radius["recipients"] = recipients
        if recipients > limits["recipients_critical"]:
            assessment.raise_to("critical", f"{recipients} recipients")
        elif recipients > limits["recipients_high"]:
            assessment.raise_to("high", f"{recipients} recipients")
    batch = max((_count(arguments.get(key)) for key in _BATCH_KEYS if key in arguments), default=0)
    if batch > 1:
        assessment.blast_radius["records"] = batch
        if batch > limits["batch_critical"]:
            assessment.raise_to("critical", f"batch of {batch} records")
        elif batch > limits["batch_high"]:
            assessment.raise_to("high", f"batch of {batch} records")
    if _DELETE.search(name) or str(arguments.get("action", "")).lower() == "delete":
        assessment.raise_to("critical" if batch > limits["batch_high"] else "high", "deletion")
    if _EXPORT.search(name):
        assessment.raise_to("high", "data export")
    if _PAYMENT.search(name):
        amount = _amount(arguments)
        if amount is not None:
            assessment.blast_radius["amount"] = amount
        if amount is not None and amount >= limits["payment_critical"]:
            assessment.raise_to("critical", f"payment of {amount:g}")
        else:
            assessment.raise_to("high", "payment")
    if internal_domains:
        internal = {domain.lower() for domain in internal_domains}
        external = sorted(
            {
                str(item).rsplit("@", 1)[1].lower()
                for key in _RECIPIENT_KEYS
                for item in (
                    arguments.get(key)
                    if isinstance(arguments.get(key), list)
                    else [arguments.get(key)]
                )
                if isinstance(item, str)
                and "@" in item
                and item.rsplit("@", 1)[1].lower() not in internal
            }
        )
        if external:
            assessment.blast_radius["external_domains"] = external
            assessment.raise_to("high", "external send")
    elif _EXTERNAL.search(name) and not _reads_only(arguments):
        assessment.raise_to("high", "external send")
    if policy_result is not None:
        for decision in getattr(policy_result, "decisions", []):
            if decision.action == "require_confirmation":
                assessment.raise_to("high", f"policy {decision.plugin}: {decision.reason}")
    assessment.reasons = list(dict.fromkeys(assessment.reasons))
    return assessment


def level_label(level: str) -> str:
    """ "high" as a person reads it, in the active language."""
    return str(LEVEL_LABELS.get(level, level))


def level_phrase(level: str) -> str:
    """ "high risk" as a person reads it, in the active language."""
    phrase = LEVEL_PHRASES.get(level)
    return str(phrase) if phrase is not None else _("%(level)s risk") % {"level": level}


# The reasons `classify` records (stored in English on the confirmation and in the audit log),
# read back in the active language. A reason none of these matches is shown as stored.
_REASON_WORDS = {
    "deletion": gettext_lazy("deletion"),
    "data export": gettext_lazy("data export"),
    "payment": gettext_lazy("payment"),
    "external send": gettext_lazy("external send"),
    "the template always asks for this tool": gettext_lazy(
        "the template always asks for this tool"
    ),
}
_DECLARED = re.compile(r"^the tool is declared (\w+) risk$")
_RECIPIENTS = re.compile(r"^(\d+) recipients$")
_BATCH = re.compile(r"^batch of (\d+) records$")
_PAYMENT_OF = re.compile(r"^payment of (\S+)$")
_POLICY = re.compile(r"^policy ([\w.-]+): (.*)$", re.S)


def reason_sentence(reason: str) -> str:
    """One stored reason ("12 recipients", "deletion") in the active language."""
    if reason in _REASON_WORDS:
        return str(_REASON_WORDS[reason])
    if match := _DECLARED.match(reason):
        return _("the tool is declared %(level)s risk") % {"level": level_label(match[1])}
    if match := _RECIPIENTS.match(reason):
        count = int(match[1])
        return ngettext("%(count)d recipient", "%(count)d recipients", count) % {"count": count}
    if match := _BATCH.match(reason):
        count = int(match[1])
        return ngettext("batch of %(count)d record", "batch of %(count)d records", count) % {
            "count": count
        }
    if match := _PAYMENT_OF.match(reason):
        return _("payment of %(amount)s") % {"amount": match[1]}
    if match := _POLICY.match(reason):
        return _("policy %(plugin)s: %(reason)s") % {"plugin": match[1], "reason": match[2]}
    return reason


def _people(count: int) -> str:
    return ngettext("%(count)d person", "%(count)d people", count) % {"count": count}


def _listed(parts: list[str]) -> str:
    """ "a, b and c" in the active language."""
    if len(parts) == 1:
        return parts[0]
    return _("%(items)s and %(last)s") % {
        "items": pgettext("list separator", ", ").join(parts[:-1]),
        "last": parts[-1],
    }


def _recipients_sentence(radius: dict) -> str:
    groups = radius.get("groups") or []
    named = int(radius.get("members", 0) or 0)
    if not groups:
        return _("Sends to %(people)s.") % {"people": _people(int(radius["recipients"]))}
    parts = [
        _("%(people)s in %(group)s")
        % {"people": _people(int(group["people"])), "group": group["name"]}
        if group.get("people") is not None
        else _("the group chat %(group)s (its members are not known to Cadre)")
        % {"group": group["name"]}
        for group in groups
    ]
    if named:
        parts.append(_("%(people)s by name") % {"people": _people(named)})
    if len(parts) == 1:
        return _("Sends to %(whom)s.") % {"whom": parts[0]}
    total = int(radius["recipients"])
    known = all(group.get("people") is not None for group in groups)
    if known:
        return _("Sends to %(people)s: %(whom)s.") % {
            "people": _people(total),
            "whom": _listed(parts),
        }
    return _("Sends to %(whom)s.") % {"whom": _listed(parts)}


def blast_radius_sentence(radius: dict | None) -> str:
    """A confirmation's blast radius as a person reads it ("Sends to 12 people in All staff."),
    in the active language."""
    radius = radius or {}
    sentences = []
    if radius.get("recipients"):
        sentences.append(_recipients_sentence(radius))
    if radius.get("records"):
        count = int(radius["records"])
        sentences.append(
            ngettext("Changes %(count)d record.", "Changes %(count)d records.", count)
            % {"count": count}
        )
    if radius.get("amount") is not None:
        sentences.append(_("Pays an amount of %(amount)s.") % {"amount": f"{radius['amount']:g}"})
    if radius.get("external_domains"):
        sentences.append(
            _("Goes outside the organization, to %(domains)s.")
            % {"domains": ", ".join(radius["external_domains"])}
        )
    return " ".join(sentences)


def shown_arguments(arguments: dict) -> str:
    """The (masked) arguments as a summary shows them: JSON, cut at 600 characters."""
    shown = json.dumps(arguments, ensure_ascii=False, sort_keys=True)
    return shown[:600] + "…" if len(shown) > 600 else shown


def confirmation_summary(
    *, tool: str, arguments_shown: str, level: str, reasons: list, radius: dict, who: str | None
) -> str:
    """What a confirmation asks, as its summary reads (in the active language): who wants to
    run what, the masked arguments, the blast radius and why it needs a decision."""
    if who:
        head = _("%(who)s's agent wants to run %(tool)s (%(risk)s).") % {
            "who": who,
            "tool": tool,
            "risk": level_phrase(level),
        }
    else:
        head = _("An agent wants to run %(tool)s (%(risk)s).") % {
            "tool": tool,
            "risk": level_phrase(level),
        }
    lines = [head, _("Arguments: %(arguments)s") % {"arguments": arguments_shown}]
    sentence = blast_radius_sentence(radius)
    if sentence:
        lines.append(_("Blast radius: %(radius)s") % {"radius": sentence})
    if reasons:
        lines.append(
            _("Why confirmation is needed: %(reasons)s.")
            % {"reasons": pgettext("list separator", "; ").join(map(reason_sentence, reasons))}
        )
    return "\n".join(lines)
