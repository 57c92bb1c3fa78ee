"""Built-in policy plugins: masking, prompt injection, tool access, rate limits, content rules,
outbound recipient limits. Each registers itself on import (see policy/base.py)."""

from __future__ import annotations

import fnmatch
import math
import re
import time

from django.utils.translation import gettext_lazy

from cadre.governance.masking.engine import mask
from cadre.governance.masking.policy import MaskingPolicy
from cadre.governance.masking.services import mask_for_conversation
from cadre.governance.policy.base import (
    DENY,
    REQUIRE_CONFIRMATION,
    Decision,
    Plugin,
    PolicyContext,
    register,
)

_DECIDING = {"type": "string", "enum": ["deny", "require_confirmation", "flag"]}


def _outcome(action: str, reason: str, **details) -> Decision:
    """A configured outcome: deny, require_confirmation, or flag (allowed, but audited)."""
    if action == "flag":
        return Decision.allow(flags=[reason], details=details)
    return Decision(action, reason, details=details)


def _texts(value):
    """Every string inside a JSON-like value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _texts(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _texts(item)


# --- masking ------------------------------------------------------------------------------


class MaskingPlugin(Plugin):
    name = "masking"
    stages = ("input", "retrieved")
    description = gettext_lazy(
        "Replaces personal data and secrets with placeholders (reversible per conversation) "
        "before text reaches the model; secrets are always redacted."
    )
    config_schema = {
        "type": "object",
        "properties": {
            "default": {"type": "string", "enum": ["pseudonymize", "partial", "redact"]},
            "modes": {"type": "object", "additionalProperties": {"type": "string"}},
        },
        "additionalProperties": False,
    }

    def evaluate(self, context: PolicyContext) -> Decision:
        text = context.payload
        if not isinstance(text, str) or not text:
            return Decision.allow()
        policy = MaskingPolicy.from_dict(context.config or None)
        if context.conversation_key:
            result = mask_for_conversation(
                organization=context.organization,
                conversation_key=context.conversation_key,
                text=text,
                policy=policy,
            )
        else:
            result = mask(text, policy=policy, organization=context.organization)
        if not result.detections:
            return Decision.allow()
        types = sorted({detection.type for detection in result.detections})
        return Decision.modify(
            result.text,
            f"masked {len(result.detections)} value(s): {', '.join(types)}",
            details={"types": types, "count": len(result.detections)},
        )


# --- prompt injection -----------------------------------------------------------------------

INJECTION_PATTERNS: list[tuple[str, re.Pattern]] = [
    (name, re.compile(pattern, re.IGNORECASE))
    for name, pattern in [
        (
            "override_instructions",
            r"\b(ignore|disregard|forget|override)\b[^.\n]{0,40}\b(previous|prior|above|earlier"
            r"|all|system|your)\b[^.\n]{0,20}\b(instructions?|prompts?|rules?|guidelines)",
        ),
        ("reveal_prompt", r"\b(reveal|print|show|repeat|leak)\b[^.\n]{0,30}\bsystem prompt"),
        ("role_hijack", r"\byou are now\b|\bact as (an? )?(unrestricted|jailbroken|dan)\b"),
        ("developer_mode", r"\b(developer|god|dan) mode\b|\bjailbreak"),
        ("fake_system_turn", r"<\|?(im_start|system|endoftext)\|?>|^\s*(system|assistant)\s*:"),
        (
            "zh_override",
            r"(忽略|无视|忘记|忽视)(掉)?(之前|以上|前面|上述|所有|你的)[^。\n]{0,10}"
            r"(指令|提示|规则|要求)",
        ),
        ("zh_reveal", r"(泄露|输出|显示|告诉我)[^。\n]{0,10}(系统提示|提示词|系统指令)"),
        (
            "exfiltrate",
            r"\b(send|post|upload|forward)\b[^.\n]{0,40}\b(password|credentials?|api key|"
            r"secrets?)\b[^.\n]{0,40}\b(to|at)\b",
        ),
        ("hidden_markup", r"[\u200b\u200c\u200d\u2060\ufeff]{3,}"),
    ]
]


class PromptInjectionPlugin(Plugin):
    name = "prompt_injection"
    stages = ("input", "retrieved")
    description = gettext_lazy(
        "Heuristics for instructions hidden in inbound messages and retrieved content "
        "(override/ignore instructions, prompt extraction, role hijack, fake system turns, "
        "hidden characters), in English and Chinese."
    )
    config_schema = {
        "type": "object",
        "properties": {
            "action": _DECIDING,  # what a match does (default: deny retrieved, flag input)
            "threshold": {"type": "integer", "minimum": 1},
        },
        "additionalProperties": False,
    }

    def evaluate(self, context: PolicyContext) -> Decision:
        texts = list(_texts(context.payload))
        hits = sorted(
            {name for text in texts for name, pattern in INJECTION_PATTERNS if pattern.search(text)}
        )
        if len(hits) < int(context.config.get("threshold", 1)):
            return Decision.allow()
        default = "deny" if context.stage == "retrieved" else "flag"
        return _outcome(
            context.config.get("action", default),
            f"possible prompt injection ({', '.join(hits)})",
            patterns=hits,
        )


# --- tool access --------------------------------------------------------------------------


class ToolAccessPlugin(Plugin):
    name = "tool_access"
    stages = ("tool_call",)
    description = gettext_lazy(
        "Allow and deny lists of tool names (shell-style patterns, e.g. 'crm_*'); deny wins, "
        "and a non-empty allow list refuses every tool it does not name."
    )
    config_schema = {
        "type": "object",
        "properties": {
            "allow": {"type": "array", "items": {"type": "string"}},
            "deny": {"type": "array", "items": {"type": "string"}},
            "confirm": {"type": "array", "items": {"type": "string"}},
        },
        "additionalProperties": False,
    }

    def evaluate(self, context: PolicyContext) -> Decision:
        tool = str((context.payload or {}).get("tool", ""))
        config = context.config

        def matches(key: str) -> bool:
            return any(fnmatch.fnmatchcase(tool, pattern) for pattern in config.get(key, []))

        if matches("deny"):
            return Decision.deny(f"tool {tool!r} is denied by policy")
        if config.get("allow") and not matches("allow"):
            return Decision.deny(f"tool {tool!r} is not on the allowed list")
        if matches("confirm"):
            return Decision.require_confirmation(f"tool {tool!r} always needs a confirmation")
        return Decision.allow()


# --- rate and quota limits ------------------------------------------------------------------


class RateLimitPlugin(Plugin):
    name = "rate_limit"
    stages = ("input", "tool_call")
    description = gettext_lazy(
        "Fixed-window counters in Redis per member, agent or organization (e.g. 30 messages a "
        "minute per member, 2,000 tool calls a day per organization); over the limit is a "
        "denial with retry_after (HTTP 429 at the API)."
    )
    config_schema = {
        "type": "object",
        "properties": {
            "limits": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "scope": {"type": "string", "enum": ["member", "agent", "organization"]},
                        "limit": {"type": "integer", "minimum": 1},
                        "window_seconds": {"type": "integer", "minimum": 1},
                        "stage": {"type": "string"},
                        "tool": {"type": "string"},
                    },
                    "required": ["scope", "limit", "window_seconds"],
                    "additionalProperties": False,
                },
            }
        },
        "required": ["limits"],
        "additionalProperties": False,
    }

    def evaluate(self, context: PolicyContext) -> Decision:
        from django.core.cache import cache

        now = time.time()
        for index, rule in enumerate(context.config.get("limits", [])):
            if rule.get("stage") and rule["stage"] != context.stage:
                continue
            tool = (context.payload or {}).get("tool") if context.stage == "tool_call" else None
            if rule.get("tool") and not fnmatch.fnmatchcase(str(tool or ""), rule["tool"]):
                continue
            subject = {
                "member": context.member_id,
                "agent": context.agent_id,
                "organization": context.organization.pk,
            }[rule["scope"]]
            if subject is None:
                continue
            window = int(rule["window_seconds"])
            bucket = int(now // window)
            key = (
                f"policy:rate:{context.organization.pk}:{index}:{rule['scope']}:{subject}:"
                f"{context.stage}:{window}:{bucket}"
            )
            cache.add(key, 0, timeout=window + 5)
            try:
                count = cache.incr(key)
            except ValueError:  # expired between add and incr: a new window
                cache.add(key, 1, timeout=window + 5)
                count = 1
            if count > int(rule["limit"]):
                retry_after = max(1, math.ceil((bucket + 1) * window - now))
                return Decision.deny(
                    f"rate limit: more than {rule['limit']} per {window}s for this {rule['scope']}",
                    retry_after=retry_after,
                    details={
                        "status": 429,
                        "retry_after": retry_after,
                        "scope": rule["scope"],
                        "limit": rule["limit"],
                        "window_seconds": window,
                    },
                )
        return Decision.allow()


# --- content rules ------------------------------------------------------------------------


class ContentRulesPlugin(Plugin):
    name = "content_rules"
    stages = ("input", "retrieved", "tool_call", "output")
    description = gettext_lazy("Organization patterns that block, flag or require a confirmation.")
    config_schema = {
        "type": "object",
        "properties": {
            "rules": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "pattern": {"type": "string", "minLength": 1, "maxLength": 500},
                        "action": _DECIDING,
                        "stages": {"type": "array", "items": {"type": "string"}},
                        "reason": {"type": "string"},
                    },
                    "required": ["pattern", "action"],
                    "additionalProperties": False,
                },
            }
        },
        "required": ["rules"],
        "additionalProperties": False,
    }

    def validate_config(self, config: dict) -> None:
        super().validate_config(config)
        for rule in config["rules"]:
            try:
                re.compile(rule["pattern"])
            except re.error as error:
                raise ValueError(f"pattern {rule['pattern']!r}: {error}") from None

    def evaluate(self, context: PolicyContext) -> Decision:
        texts = list(_texts(context.payload))
        strictest: Decision | None = None
        flags: list[str] = []
        for rule in context.config.get("rules", []):
            if rule.get("stages") and context.stage not in rule["stages"]:
                continue
            pattern = re.compile(rule["pattern"], re.IGNORECASE)
            if not any(pattern.search(text) for text in texts):
                continue
            reason = rule.get("reason") or f"content rule {rule.get('name') or rule['pattern']!r}"
            decision = _outcome(rule["action"], reason, rule=rule.get("name", ""))
            if decision.action == DENY:
                return decision
            if decision.action == REQUIRE_CONFIRMATION:
                strictest = decision
            flags.extend(decision.flags)
        if strictest is not None:
            strictest.flags.extend(flags)
            return strictest
        return Decision.allow(flags=flags) if flags else Decision.allow()


# --- outbound recipients --------------------------------------------------------------------

RECIPIENT_KEYS = ("recipients", "to", "cc", "bcc", "members", "users", "emails", "channels")


def recipients_of(arguments: dict) -> list:
    found: list = []
    for key in RECIPIENT_KEYS:
        value = (arguments or {}).get(key)
        if isinstance(value, list):
            found.extend(value)
        elif isinstance(value, (str, int)) and value != "":
            found.append(value)
    return found


def _domain(recipient) -> str | None:
    text = recipient.get("email", "") if isinstance(recipient, dict) else str(recipient)
    return text.rsplit("@", 1)[1].lower() if "@" in text else None


class RecipientLimitPlugin(Plugin):
    name = "recipient_limit"
    stages = ("tool_call",)
    description = gettext_lazy(
        "Outbound messages: more than `max_recipients` recipients, or addresses outside the "
        "organization's domains, need a confirmation (or are denied)."
    )
    config_schema = {
        "type": "object",
        "properties": {
            "max_recipients": {"type": "integer", "minimum": 1},
            "action": {"type": "string", "enum": ["deny", "require_confirmation"]},
            "internal_domains": {"type": "array", "items": {"type": "string"}},
            "external_action": {"type": "string", "enum": ["deny", "require_confirmation"]},
        },
        "additionalProperties": False,
    }

    def evaluate(self, context: PolicyContext) -> Decision:
        arguments = (context.payload or {}).get("arguments") or {}
        recipients = recipients_of(arguments)
        if not recipients:
            return Decision.allow()
        limit = int(context.config.get("max_recipients", 20))
        if len(recipients) > limit:
            return Decision(
                context.config.get("action", REQUIRE_CONFIRMATION),
                f"{len(recipients)} recipients (more than {limit})",
                details={"recipients": len(recipients), "limit": limit},
            )
        internal = {domain.lower() for domain in context.config.get("internal_domains", [])}
        if internal:
            external = sorted(
                {d for d in map(_domain, recipients) if d is not None and d not in internal}
            )
            if external:
                return Decision(
                    context.config.get("external_action", REQUIRE_CONFIRMATION),
                    f"external recipients ({', '.join(external[:5])})",
                    details={"external_domains": external},
                )
        return Decision.allow()


for _plugin in (
    MaskingPlugin(),
    PromptInjectionPlugin(),
    ToolAccessPlugin(),
    RateLimitPlugin(),
    ContentRulesPlugin(),
    RecipientLimitPlugin(),
):
    register(_plugin)
