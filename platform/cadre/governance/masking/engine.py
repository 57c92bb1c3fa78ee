"""The one masking engine: `analyze()` finds sensitive spans, `mask()` applies a policy.

Built once per process (`get_engine()`); organization rules are layered per call from a
per-organization compiled cache. `analyze` needs no database unless an organization is given,
so benchmarks and offline tools import it without Django settings.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

from cadre.governance.masking.directory import DIRECTORY_TYPE, directory_for
from cadre.governance.masking.policy import (
    DEFAULT_POLICY,
    PARTIAL,
    PSEUDONYMIZE,
    REDACT,
    MaskingPolicy,
    partial,
    redact,
)
from cadre.governance.masking.recognizers import (
    ENTITY_TYPES,
    TYPE_PRIORITY,
    CadreRecognizer,
    Detection,
    builtin_recognizers,
    fold_width,
    resolve_overlaps,
)
from cadre.governance.masking.rules import rules_for
from cadre.governance.masking.vault import EphemeralVault, Vault


@dataclass(frozen=True)
class MaskResult:
    text: str
    detections: list[Detection]
    # placeholder → original, for the placeholders this call produced or reused.
    mapping_used: dict[str, str] = field(default_factory=dict)


class MaskingEngine:
    def __init__(self, recognizers: Iterable[CadreRecognizer] | None = None):
        self.recognizers = list(recognizers) if recognizers is not None else builtin_recognizers()
        self.entity_types = tuple(ENTITY_TYPES)

    def analyze(
        self, text: str, *, entities: Iterable[str] | None = None, organization=None
    ) -> list[Detection]:
        """Non-overlapping detections sorted by position.

        `entities` limits the types (built-in or organization-defined); `organization` adds
        that organization's own patterns and dictionaries, and its members (`DIRECTORY`).

        Built-in recognizers scan the text with full-width digits, letters and U+3000 folded to
        ASCII (`fold_width`: same length, so the spans are offsets into `text` itself);
        organization rules see the text as written.
        """
        if not text:
            return []
        wanted = set(entities) if entities is not None else None
        folded = fold_width(text)
        lowered = folded.lower()
        candidates: list[Detection] = []
        for recognizer in self.recognizers:
            if wanted is None or recognizer.entity in wanted:
                candidates.extend(recognizer.scan(folded, lowered))
        if organization is not None:
            for rule in rules_for(organization):
                if wanted is None or rule.entity_type in wanted:
                    candidates.extend(rule.scan(text))
            if wanted is None or DIRECTORY_TYPE in wanted:
                candidates.extend(directory_for(organization).scan(folded, lowered))
        if len(candidates) < 2:
            return candidates
        return resolve_overlaps(candidates, TYPE_PRIORITY)

    def mask(
        self,
        text: str,
        *,
        policy: MaskingPolicy | None = None,
        conversation: Vault | None = None,
        organization=None,
        entities: Iterable[str] | None = None,
    ) -> MaskResult:
        """Apply `policy` to every detection. Pseudonyms come from `conversation` (a vault);
        without one, an in-memory vault numbers them for this call only."""
        policy = policy or DEFAULT_POLICY
        if organization is None:
            organization = getattr(conversation, "organization", None)
        detections = self.analyze(text, entities=entities, organization=organization)
        if not detections:
            return MaskResult(text, detections, {})
        modes = [policy.mode_for(d.type) for d in detections]
        pseudonymized = [
            (d.type, text[d.start : d.end])
            for d, mode in zip(detections, modes, strict=True)
            if mode == PSEUDONYMIZE
        ]
        placeholders: list[str] = []
        if pseudonymized:
            vault = conversation if conversation is not None else EphemeralVault()
            placeholders = vault.placeholders_for(pseudonymized)
        pieces: list[str] = []
        mapping: dict[str, str] = {}
        cursor, next_placeholder = 0, iter(placeholders)
        for detection, mode in zip(detections, modes, strict=True):
            value = text[detection.start : detection.end]
            pieces.append(text[cursor : detection.start])
            if mode == PSEUDONYMIZE:
                replacement = next(next_placeholder)
                mapping.setdefault(replacement, value)
            elif mode == PARTIAL:
                replacement = partial(detection.type, value)
            else:
                assert mode == REDACT
                replacement = redact(detection.type)
            pieces.append(replacement)
            cursor = detection.end
        pieces.append(text[cursor:])
        return MaskResult("".join(pieces), detections, mapping)

    def presidio_analyzer(self):
        """A Presidio `AnalyzerEngine` (no-op NLP engine, nothing downloaded) running these
        same recognizers — for parity checks and for code that wants Presidio's interface."""
        # lazy: heavy — Presidio pulls in transformers when installed; only parity checks ask.
        from cadre.governance.masking.presidio import presidio_analyzer_for

        return presidio_analyzer_for(self.recognizers)


_engine: MaskingEngine | None = None
_engine_lock = threading.Lock()


def get_engine() -> MaskingEngine:
    """The process-wide engine (recognizers compiled once)."""
    global _engine
    if _engine is None:
        with _engine_lock:
            if _engine is None:
                _engine = MaskingEngine()
    return _engine


def analyze(text: str, *, entities: Iterable[str] | None = None, organization=None):
    return get_engine().analyze(text, entities=entities, organization=organization)


def mask(
    text: str,
    *,
    policy: MaskingPolicy | None = None,
    conversation: Vault | None = None,
    organization=None,
) -> MaskResult:
    return get_engine().mask(
        text, policy=policy, conversation=conversation, organization=organization
    )
