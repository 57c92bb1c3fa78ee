"""Redacting a deleted memory's text from the skill drafts, candidates and proposals that quote it.

A skill distilled from memory quotes the experiences it was made from (a task is the draft's
"Example", masked), and a proposal drafted from a correction quotes the conversation. When a
memory is deleted, memory hands the forms of its text here through its `other_copies` port
(`cadre.memory.services.deletion`), and the text is replaced by the deletion's marker in:

- distillation records (`draft`, `steps`),
- candidates distilled from memory or drafted from a conversation (their files — SKILL.md and
  the rest of the bundle, the fingerprint taken again —, description), every revision's files
  and note, and their evidence (summary and data: the conversation's messages),
- proposals (summary, correction, files, messages).

A draft quotes tasks masked with its own vault, so a form holding a phone number or a
colleague's name is also looked for masked, whatever the placeholders' numbers. Uploaded
candidates are an author's own files, not copies of memory. A published candidate's row is
redacted too; the Hub's version is immutable, so it is reported back (`published_versions`)
for the deletion report to list among the copies that follow their own retention.

Registered in `SkillsConfig.ready()` on memory's `other_copies` port.
"""

from __future__ import annotations

import re

from cadre.governance.masking.engine import mask
from cadre.governance.masking.policy import PLACEHOLDER
from cadre.governance.masking.vault import EphemeralVault
from cadre.memory.services.deletion import MIN_TEXT_MATCH, redact_value
from cadre.memory.text import match_length
from cadre.skills.models import (
    CandidateRevision,
    DistillationRecord,
    SkillCandidate,
    SkillEvidence,
    SkillProposal,
)
from cadre.skills.selectors import decode_files
from cadre.skills.services import encode_files
from cadre.tenancy.models import Organization
from hub.bundles import bundle_from_files

# Candidates that are copies of what people said or did (uploads are an author's own files).
DERIVED_SOURCES = (SkillCandidate.Source.MEMORY, SkillCandidate.Source.BACKFLOW)


def masked_patterns(organization, forms: list[str]) -> list[re.Pattern]:
    """Each form as a draft quotes it masked: its values as placeholders of their type, of any
    number (a draft's vault numbers them for its cluster)."""
    patterns = []
    for form in forms:
        if match_length(form) < MIN_TEXT_MATCH:
            continue
        masked = mask(form, conversation=EphemeralVault(), organization=organization).text
        if masked == form:
            continue
        parts, last = [], 0
        for match in PLACEHOLDER.finditer(masked):
            parts.append(re.escape(masked[last : match.start()]))
            parts.append(rf"<{re.escape(match.group(1))}_[1-9][0-9]*>")
            last = match.end()
        parts.append(re.escape(masked[last:]))
        patterns.append(re.compile("".join(parts)))
    return patterns


def _redact_files(files: dict, redact) -> dict:
    """Base64 files with their text redacted (binary files are left as they are)."""
    decoded = decode_files(files)
    changed = {}
    for path, content in decoded.items():
        try:
            text = content.decode("utf-8")
        except UnicodeDecodeError:
            continue
        redacted = redact(text)
        if redacted != text:
            changed[path] = redacted.encode("utf-8")
    if not changed:
        return files
    return {**files, **encode_files(changed)}


def redact_memory(
    *, organization_id: int, memory_id: int, texts: list[str], marker: str
) -> dict[str, list[int]]:
    """Replace the forms of a deleted memory's text by `marker` in the organization's skill
    drafts, candidates and proposals; the ids redacted by kind, and `published_versions`."""
    organization = Organization.objects.get(pk=organization_id)
    patterns = masked_patterns(organization, texts)

    def redact(value):
        return redact_value(value, texts, marker, patterns)

    found: dict[str, list[int]] = {
        "skill_drafts": [],
        "skill_candidates": [],
        "skill_proposals": [],
        "published_versions": [],
    }
    records = DistillationRecord.objects.select_for_update().filter(organization_id=organization_id)
    for record in records.only("pk", "draft", "steps").order_by("pk"):
        draft, steps = redact(record.draft), redact(record.steps)
        if (draft, steps) != (record.draft, record.steps):
            record.draft, record.steps = draft, steps
            record.save(update_fields=["draft", "steps"])
            found["skill_drafts"].append(record.pk)

    candidates = SkillCandidate.objects.select_for_update().filter(
        organization_id=organization_id, source__in=DERIVED_SOURCES
    )
    for candidate in candidates.order_by("pk"):
        changed = False
        files = _redact_files(candidate.files, redact)
        if files != candidate.files:
            candidate.files = files
            bundle = bundle_from_files(decode_files(files), folder_name=candidate.name or None)
            candidate.fingerprint = bundle.fingerprint
            changed = True
        description = redact(candidate.description)
        if description != candidate.description:
            candidate.description = description
            changed = True
        if changed:
            candidate.save(update_fields=["files", "fingerprint", "description"])
        for revision in CandidateRevision.objects.select_for_update().filter(candidate=candidate):
            files, note = _redact_files(revision.files, redact), redact(revision.note)
            if (files, note) != (revision.files, revision.note):
                revision.files, revision.note = files, note
                revision.save(update_fields=["files", "note"])
                changed = True
        for evidence in SkillEvidence.objects.select_for_update().filter(candidate=candidate):
            summary, data = redact(evidence.summary), redact(evidence.data)
            if (summary, data) != (evidence.summary, evidence.data):
                evidence.summary, evidence.data = summary, data
                evidence.save(update_fields=["summary", "data"])
                changed = True
        if changed:
            found["skill_candidates"].append(candidate.pk)
            if candidate.published_version_id is not None:
                found["published_versions"].append(candidate.published_version_id)

    proposals = SkillProposal.objects.select_for_update().filter(organization_id=organization_id)
    for proposal in proposals.order_by("pk"):
        fields = (proposal.summary, proposal.correction, proposal.files, proposal.messages)
        redacted = tuple(redact(field) for field in fields)
        if redacted != fields:
            proposal.summary, proposal.correction, proposal.files, proposal.messages = redacted
            proposal.save(update_fields=["summary", "correction", "files", "messages"])
            found["skill_proposals"].append(proposal.pk)
    return found
