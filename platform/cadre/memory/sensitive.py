"""Sensitive values in memory text: what memory stores of them, and how they are masked when
memory enters a model's context.

Memory keeps what was actually said — never a session's placeholders (`<PHONE_1>` means
something only in the vault of the session that produced it). Secrets are never stored: they
are redacted when a memory is written. Personal data is kept and the memory records which types
it holds (`Memory.sensitive_types`); every path that puts memory into a model's context passes
it through the masking policy with that session's vault (the "retrieved" stage of the policy
chain), so the model sees the same placeholder the session already uses for the value, and the
reply is re-identified correctly for the employee.
"""

from __future__ import annotations

from cadre.governance.masking.engine import analyze
from cadre.governance.masking.policy import ALWAYS_REDACTED, PLACEHOLDER, redact


def protect(text: str, *, organization=None) -> tuple[str, list[str]]:
    """`text` with secrets redacted, and the sorted types of the personal data it keeps."""
    detections = analyze(text, organization=organization)
    if not detections:
        return text, []
    pieces, cursor, kept = [], 0, set()
    for detection in detections:  # sorted by position, non-overlapping
        if detection.type in ALWAYS_REDACTED:
            pieces += [text[cursor : detection.start], redact(detection.type)]
            cursor = detection.end
        else:
            kept.add(detection.type)
    pieces.append(text[cursor:])
    return "".join(pieces), sorted(kept)


def placeholders_in(text: str) -> list[str]:
    """Session placeholders (`<PHONE_1>`) in `text`, in order of appearance."""
    return [match.group(0) for match in PLACEHOLDER.finditer(text or "")]
