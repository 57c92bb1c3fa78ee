"""Organization-defined rules (regex patterns, dictionaries), compiled once per rule version.

Dictionaries become one alternation regex (longest term first, so `Project Phoenix X` beats
`Project Phoenix`); ASCII terms get ASCII-boundary lookarounds, CJK terms none (Chinese has no
spaces). User regexes run on the `regex` module with a timeout so a bad pattern cannot hang a
worker. The compiled set is cached per organization and rebuilt when the version stamp (rule
count and latest `updated_at`) changes — one small query per call.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass

import regex
from django.utils.translation import gettext

from cadre.errors import InvalidInput
from cadre.governance.masking.policy import CUSTOM_TYPE, PLACEHOLDER_LABELS
from cadre.governance.masking.recognizers import ENTITY_TYPES, Detection

RULE_SCORE = 0.95
REGEX_TIMEOUT_SECONDS = 0.05
MAX_PATTERN_LENGTH = 500
MAX_TERMS = 5000
MAX_TERM_LENGTH = 200

_RESERVED = set(ENTITY_TYPES) | set(PLACEHOLDER_LABELS) | set(PLACEHOLDER_LABELS.values())


@dataclass(frozen=True)
class CompiledRule:
    name: str
    entity_type: str
    compiled: regex.Pattern

    def scan(self, text: str) -> list[Detection]:
        found = []
        try:
            for match in self.compiled.finditer(text, timeout=REGEX_TIMEOUT_SECONDS):
                if match.end() > match.start():
                    found.append(
                        Detection(
                            match.start(),
                            match.end(),
                            self.entity_type,
                            RULE_SCORE,
                            f"org:{self.name}",
                        )
                    )
        except TimeoutError:
            return found
        return found


def dictionary_regex(terms: Iterable[str]) -> str:
    parts = []
    for term in sorted({t.strip() for t in terms if t.strip()}, key=lambda t: (-len(t), t)):
        piece = regex.escape(term)
        if term[0].isascii() and term[0].isalnum():
            piece = r"(?<![0-9A-Za-z])" + piece
        if term[-1].isascii() and term[-1].isalnum():
            piece = piece + r"(?![0-9A-Za-z])"
        parts.append(piece)
    return "(?:" + "|".join(parts) + ")"


def validate_rule(*, entity_type: str, kind: str, pattern: str, terms: list[str]) -> None:
    """Raise InvalidInput with field details for a rule that cannot be used safely."""
    errors: dict[str, list[str]] = {}
    if not CUSTOM_TYPE.match(entity_type or ""):
        errors["entity_type"] = [
            gettext("Use 2-40 characters: A-Z, 0-9 and _, starting with a letter.")
        ]
    elif entity_type in _RESERVED:
        errors["entity_type"] = [f"{entity_type} is a built-in type or placeholder label."]
    if kind == "pattern":
        if not pattern or len(pattern) > MAX_PATTERN_LENGTH:
            errors["pattern"] = [f"A pattern of 1-{MAX_PATTERN_LENGTH} characters is required."]
        else:
            try:
                compiled = regex.compile(pattern)
            except regex.error as exc:
                errors["pattern"] = [f"Not a valid regular expression: {exc}"]
            else:
                if compiled.fullmatch("") is not None:
                    errors["pattern"] = [gettext("The pattern matches the empty string.")]
    elif kind == "dictionary":
        cleaned = [t for t in terms if t.strip()]
        if not cleaned:
            errors["terms"] = [gettext("At least one term is required.")]
        elif len(cleaned) > MAX_TERMS or any(len(t) > MAX_TERM_LENGTH for t in cleaned):
            errors["terms"] = [f"At most {MAX_TERMS} terms of {MAX_TERM_LENGTH} characters."]
        elif any("\n" in t or "\r" in t for t in cleaned):
            errors["terms"] = [gettext("A term is one line.")]
    else:
        errors["kind"] = [gettext("Use 'pattern' or 'dictionary'.")]
    if errors:
        raise InvalidInput(gettext("The masking rule is not valid."), details=errors)


def compile_rules(rules: Iterable) -> tuple[CompiledRule, ...]:
    compiled = []
    for rule in rules:
        if rule.kind == "dictionary":
            terms = rule.term_list
            if not terms:
                continue
            source, flags = dictionary_regex(terms), regex.IGNORECASE
        else:
            source, flags = rule.pattern, 0
        try:
            compiled.append(CompiledRule(rule.name, rule.entity_type, regex.compile(source, flags)))
        except regex.error:
            continue  # validated on save; an unusable stored pattern is skipped, not fatal
    return tuple(compiled)


_cache: dict[int, tuple[tuple, tuple[CompiledRule, ...]]] = {}
_lock = threading.Lock()


def rules_for(organization) -> tuple[CompiledRule, ...]:
    """The organization's active rules, compiled; rebuilt only when they changed."""
    from django.db.models import Count, Max

    # lazy: settings — the engine and its rules run without Django (the masking benches).
    from cadre.governance.models import MaskingRule

    queryset = MaskingRule.objects.filter(organization_id=organization.pk, is_active=True)
    stamp_row = queryset.aggregate(n=Count("id"), latest=Max("updated_at"))
    stamp = (stamp_row["n"], stamp_row["latest"])
    cached = _cache.get(organization.pk)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    compiled = compile_rules(queryset) if stamp_row["n"] else ()
    with _lock:
        _cache[organization.pk] = (stamp, compiled)
    return compiled
