"""Masking policy (entity type → mode) and the three operators: redact, partial, pseudonymize."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field

from django.utils.translation import gettext

from cadre.errors import InvalidInput
from cadre.governance.masking.checks import digits_of

REDACT = "redact"
PARTIAL = "partial"
PSEUDONYMIZE = "pseudonymize"
MODES = (REDACT, PARTIAL, PSEUDONYMIZE)

# Secrets are never shown in part and never reversible: whatever a policy says, they are redacted.
ALWAYS_REDACTED = frozenset({"SECRET"})

PLACEHOLDER_LABELS = {
    "CN_PHONE": "PHONE",
    "CN_ID": "ID",
    "PAYMENT_CARD": "CARD",
    "EMAIL": "EMAIL",
    "IP_ADDRESS": "IP",
    "PASSPORT": "PASSPORT",
    "US_SSN": "SSN",
    "IBAN": "IBAN",
    "DIRECTORY": "MEMBER",
}
PLACEHOLDER = re.compile(r"<([A-Z][A-Z0-9_]{0,39})_([1-9][0-9]{0,6})>")
CUSTOM_TYPE = re.compile(r"^[A-Z][A-Z0-9_]{1,39}$")


def placeholder_label(entity_type: str) -> str:
    return PLACEHOLDER_LABELS.get(entity_type, entity_type)


@dataclass(frozen=True)
class MaskingPolicy:
    """What to do with each entity type; types not listed get `default`."""

    modes: Mapping[str, str] = field(default_factory=dict)
    default: str = PSEUDONYMIZE

    def __post_init__(self):
        for entity_type, mode in {**self.modes, "*": self.default}.items():
            if mode not in MODES:
                raise InvalidInput(
                    gettext(
                        "Unknown masking mode %(mode)r for %(entity_type)s; use one of %(modes)s."
                    )
                    % {"mode": mode, "entity_type": entity_type, "modes": ", ".join(MODES)},
                    details={
                        "policy": [
                            gettext("%(entity_type)s: unknown mode %(mode)r")
                            % {"entity_type": entity_type, "mode": mode}
                        ]
                    },
                )

    def mode_for(self, entity_type: str) -> str:
        if entity_type in ALWAYS_REDACTED:
            return REDACT
        return self.modes.get(entity_type, self.default)

    @classmethod
    def from_dict(cls, data: Mapping | None) -> MaskingPolicy:
        """`{"default": "redact", "modes": {"EMAIL": "partial"}}`; absent → the default policy."""
        if not data:
            return DEFAULT_POLICY
        if not isinstance(data, Mapping):
            raise InvalidInput(
                gettext("policy must be an object"), details={"policy": [gettext("not an object")]}
            )
        modes = data.get("modes") or {}
        if not isinstance(modes, Mapping) or not all(
            isinstance(key, str) and isinstance(value, str) for key, value in modes.items()
        ):
            raise InvalidInput(
                gettext("policy.modes must map entity types to modes"),
                details={"policy": [gettext("modes must be an object of strings")]},
            )
        return cls(modes=dict(modes), default=str(data.get("default", PSEUDONYMIZE)))

    def as_dict(self) -> dict:
        return {"default": self.default, "modes": dict(self.modes)}


# What goes to a model, into memory, logs and exports: reversible placeholders for personal
# data (the authorized employee sees the originals again), secrets redacted.
DEFAULT_POLICY = MaskingPolicy()


def redact(entity_type: str) -> str:
    return f"[{entity_type}]"


def _mask_alnum(value: str, keep_head: int, keep_tail: int, *, digits_only: bool = True) -> str:
    """Star every digit (or letter and digit) except the first/last few; keep separators."""
    wanted = [i for i, ch in enumerate(value) if (ch.isdigit() if digits_only else ch.isalnum())]
    keep = set(wanted[:keep_head]) | set(wanted[len(wanted) - keep_tail :] if keep_tail else [])
    return "".join(
        "*" if index in set(wanted) and index not in keep else ch for index, ch in enumerate(value)
    )


def _is_mobile(national: str) -> bool:
    return len(national) == 11 and national[0] == "1" and national[1] in "3456789"


def _phone_head(value: str) -> int:
    digits = digits_of(value)
    country = 0
    for prefix in ("0086", "86"):
        if digits.startswith(prefix) and len(digits) - len(prefix) >= 10:
            country = len(prefix)
            break
    national = digits[country:]
    if _is_mobile(national):  # mobile: 138****5678
        return country + 3
    if national.startswith(("400", "800")):
        return country + 3
    area = 3 if national[:2] in ("01", "02") else 4  # landline: keep the area code
    if not national.startswith("0"):  # +86 10 …: area code without its 0
        area -= 1
    return country + area


def partial(entity_type: str, value: str) -> str:
    """Partial mask that keeps enough to recognise the value, never enough to use it."""
    if entity_type == "CN_PHONE":
        return _mask_alnum(value, _phone_head(value), 4)
    if entity_type == "EMAIL":
        local, _, domain = value.partition("@")
        return f"{local[:1]}***@{domain}"
    if entity_type == "PAYMENT_CARD":
        return _mask_alnum(value, 4, 4)
    if entity_type == "CN_ID":
        return _mask_alnum(value, 6, 4, digits_only=False)
    if entity_type == "US_SSN":
        return _mask_alnum(value, 0, 4)
    if entity_type == "IBAN":
        return _mask_alnum(value, 4, 4, digits_only=False)
    if entity_type == "PASSPORT":
        return _mask_alnum(value, 1, 2, digits_only=False)
    if entity_type == "IP_ADDRESS":
        if ":" in value:
            head, _, _ = value.partition(":")
            return f"{head}:****"
        octets = value.split(".")
        return ".".join([*octets[:2], "*", "*"])
    if entity_type in ALWAYS_REDACTED:
        return redact(entity_type)
    # Organization-defined types: first character only.
    return value[:1] + "*" * max(len(value) - 1, 2)


def normalize(entity_type: str, value: str) -> str:
    """The canonical form of a value, so `138 1234 5678` and `+86 13812345678` are one person."""
    # Full-width forms are the same value (full-width digits of a phone are that phone).
    value = unicodedata.normalize("NFKC", value)
    if entity_type in ("CN_PHONE", "PAYMENT_CARD", "US_SSN"):
        digits = digits_of(value)
        if entity_type == "CN_PHONE":
            for prefix in ("0086", "86"):
                if digits.startswith(prefix) and len(digits) - len(prefix) >= 10:
                    digits = digits[len(prefix) :]
                    if not _is_mobile(digits) and not digits.startswith(("0", "400", "800")):
                        digits = "0" + digits  # +86 10 … is 010 …
                    break
        return digits
    if entity_type in ("CN_ID", "IBAN", "PASSPORT"):
        return value.replace(" ", "").upper()
    if entity_type in ("EMAIL", "IP_ADDRESS"):
        return value.strip().lower()
    return value.strip().casefold()
