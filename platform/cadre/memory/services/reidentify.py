"""Putting the originals back into memories written with a session's placeholders.

Memory used to be extracted from the model's side of a turn, so "always text me on
13812345678" was stored as "… on <PHONE_1>" — meaningless outside the session whose vault
produced it. This re-identifies each such memory from that session's vault (the session is the
memory's `source_ref["session_id"]`, else its `conversation_id`) as a correction with history
and an audit event. A memory whose placeholders the vault no longer resolves is left as it is
and reported.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cadre.governance.masking.vault import reidentify
from cadre.memory.models import Memory
from cadre.memory.sensitive import placeholders_in
from cadre.memory.services.writes import memory_update
from cadre.tenancy.actors import system_actor

# Cheap pre-filter in SQL; placeholders_in() decides.
PLACEHOLDER_SQL = r"<[A-Z][A-Z0-9_]{0,39}_[1-9][0-9]{0,6}>"
REASON = "session placeholders re-identified from the vault of the session that wrote them"


@dataclass
class ReidentifyReport:
    checked: int = 0
    reidentified: list[int] = field(default_factory=list)
    unresolved: list[int] = field(default_factory=list)  # left as they are

    def as_dict(self) -> dict:
        return {
            "checked": self.checked,
            "reidentified": self.reidentified,
            "unresolved": self.unresolved,
        }


def _session_key(memory: Memory) -> str:
    session = (memory.source_ref or {}).get("session_id") or memory.conversation_id
    return f"session:{session}" if session else ""


def memory_reidentify_placeholders(*, organization=None, dry_run: bool = False) -> ReidentifyReport:
    """Re-identify every live memory (of `organization`, or all) that holds placeholders."""
    report = ReidentifyReport()
    rows = (
        Memory.objects.filter(content__regex=PLACEHOLDER_SQL, purged_at__isnull=True)
        .exclude(status=Memory.Status.DELETED)
        .select_related("organization")
        .order_by("pk")
    )
    if organization is not None:
        rows = rows.filter(organization=organization)
    for memory in rows.iterator():
        if not placeholders_in(memory.content):
            continue
        report.checked += 1
        key = _session_key(memory)
        text = (
            reidentify(memory.content, organization=memory.organization, conversation_key=key)
            if key
            else memory.content
        )
        if placeholders_in(text):
            report.unresolved.append(memory.pk)
            continue
        report.reidentified.append(memory.pk)
        if dry_run:
            continue
        memory_update(
            actor=system_actor(memory.organization, label="memory re-identification"),
            memory=memory,
            expected_version=memory.version,
            reason=REASON,
            content=text,
        )
    return report
