"""The audit rows an export reads: keyset pages of events, free text masked for export."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from functools import lru_cache

from cadre.governance.masking.engine import MaskingEngine, get_engine
from cadre.governance.masking.policy import MaskingPolicy
from cadre.governance.masking.rules import rules_for
from cadre.governance.models import AuditEvent

PAGE_SIZE = 5000

COLUMNS = (
    "id",
    "organization",
    AuditEvent.CHAINED_FIELDS[0],
    "created_at",
    *AuditEvent.CHAINED_FIELDS[1:],
    "hash",
)
_DB_COLUMNS = tuple("organization_id" if name == "organization" else name for name in COLUMNS)
_FREE_TEXT = ("actor_label", "target_label", "reason", "user_agent")


class _RuleRecognizer:
    """An organization rule seen as a recognizer (the engine's `entity` / `scan` interface)."""

    def __init__(self, rule):
        self.rule, self.entity = rule, rule.entity_type

    def scan(self, text: str, lowered: str):
        return self.rule.scan(text)


class TextMasker:
    """Masks free text for export: redaction (irreversible), results cached per distinct value
    because labels and reasons repeat heavily across an audit log."""

    def __init__(self, organization, *, cache_size: int = 50_000):
        # The organization's own rules are read once per export, not once per value.
        own = [_RuleRecognizer(rule) for rule in rules_for(organization)]
        engine = MaskingEngine([*get_engine().recognizers, *own])
        policy = MaskingPolicy(default="redact")

        @lru_cache(maxsize=cache_size)
        def mask_text(text: str) -> str:
            return engine.mask(text, policy=policy).text

        self._mask_text = mask_text
        self._mask_uncached = lambda text: engine.mask(text, policy=policy).text

    def text(self, value: str) -> str:
        if not value:
            return value
        # Short values (labels, statuses) repeat and are cached; long free text rarely does.
        if len(value) <= 200:
            return self._mask_text(value)
        return self._mask_uncached(value)

    def tree(self, value):
        kind = type(value)
        if kind is str:
            return self.text(value)
        if kind is dict:
            return {key: self.tree(item) for key, item in value.items()}
        if kind is list:
            return [self.tree(item) for item in value]
        return value


def iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat()


def export_rows(
    organization,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    filters: dict | None = None,
    max_sequence: int | None = None,
    page_size: int = PAGE_SIZE,
) -> Iterator[dict]:
    """The events in range, oldest first, as plain dicts — page by page, never all at once."""
    queryset = AuditEvent.objects.filter(organization=organization)
    if since is not None:
        queryset = queryset.filter(created_at__gte=since)
    if until is not None:
        queryset = queryset.filter(created_at__lt=until)
    if max_sequence is not None:
        queryset = queryset.filter(sequence__lte=max_sequence)
    for name, value in (filters or {}).items():
        if name == "action" and str(value).endswith("."):
            queryset = queryset.filter(action__startswith=value)
        else:
            queryset = queryset.filter(**{name: value})
    last = 0
    while True:
        page = list(
            queryset.filter(sequence__gt=last)
            .order_by("sequence")
            .values_list(*_DB_COLUMNS)[:page_size]
        )
        for values in page:
            row = dict(zip(COLUMNS, values, strict=True))
            row["created_at"] = iso(row["created_at"])
            yield row
        if len(page) < page_size:
            return
        last = page[-1][2]


def masked(row: dict, masker: TextMasker) -> dict:
    """The row with its free text masked (in place: rows are the export's own dicts)."""
    for name in _FREE_TEXT:
        value = row[name]
        if value:
            row[name] = masker.text(value)
    if row["changes"]:
        row["changes"] = masker.tree(row["changes"])
    return row


def stream_events_jsonl(organization, *, since=None, mask: bool = True, out=None) -> int:
    """Write events as JSON lines to `out` (stdout for a SIEM collector); returns the count."""
    import sys

    out = out or sys.stdout
    masker = TextMasker(organization) if mask else None
    count = 0
    for row in export_rows(organization, since=since):
        row = masked(row, masker) if masker is not None else row
        out.write(json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n")
        count += 1
    if hasattr(out, "flush"):
        out.flush()
    return count
