"""Write paths for memory: add, extract, update, supersede, feedback, dedup, delete, purge
(with the redaction of the copies runs hold and the deletion report).

Every state change writes a MemoryVersion (the item's own history, which holds content) and one
`audit.record` in the same transaction. Audit diffs never carry memory text: they hold ids,
kinds, scopes, statuses, versions, SHA-256 hashes and lengths, because memory may hold personal
data and the audit log is kept (and exported) far longer than a memory may be.
Asynchronous work (embedding, dedup, organization, purge) is enqueued with on_commit.
A write into a shared scope by someone without `memory.manage` waits as unverified until a
holder accepts it (`memory_verify`); no model is sent it meanwhile.

The package is split by concern; import from `cadre.memory.services`.
"""

from __future__ import annotations

from cadre.memory.services.common import (
    MAX_CONTENT_CHARS,
    MAX_MESSAGES,
    MAX_TAGS,
    audit_view,
    enqueue,
    enqueue_enrich,
    resolve_write_scope,
    verification_for_write,
    vouches_for_shared,
)
from cadre.memory.services.context import context_record_for_model_call
from cadre.memory.services.deletion import (
    BulkDeleteResult,
    deletion_report,
    memory_delete,
    memory_delete_by_filter,
    memory_purge,
    memory_purge_now,
    memory_retention_sweep,
    run_copies,
)
from cadre.memory.services.experience import (
    experience_feedback,
    experience_record,
    recorded_from_run,
    without_secrets,
)
from cadre.memory.services.feedback import (
    FeedbackResult,
    contradicted_lines,
    correction_statement,
    is_factual_correction,
    memory_feedback,
)
from cadre.memory.services.funnel import memory_dedup, memory_merge, memory_organize
from cadre.memory.services.verification import memory_verify
from cadre.memory.services.writes import (
    UPDATABLE,
    ExtractionResult,
    memory_add,
    memory_add_from_messages,
    memory_supersede,
    memory_update,
    tool_trajectory_record,
)

__all__ = [
    "MAX_CONTENT_CHARS",
    "MAX_MESSAGES",
    "MAX_TAGS",
    "UPDATABLE",
    "BulkDeleteResult",
    "ExtractionResult",
    "FeedbackResult",
    "audit_view",
    "context_record_for_model_call",
    "contradicted_lines",
    "correction_statement",
    "deletion_report",
    "enqueue",
    "enqueue_enrich",
    "experience_feedback",
    "experience_record",
    "is_factual_correction",
    "memory_add",
    "memory_add_from_messages",
    "memory_dedup",
    "memory_delete",
    "memory_delete_by_filter",
    "memory_feedback",
    "memory_merge",
    "memory_organize",
    "memory_purge",
    "memory_purge_now",
    "memory_retention_sweep",
    "memory_supersede",
    "memory_update",
    "memory_verify",
    "recorded_from_run",
    "resolve_write_scope",
    "run_copies",
    "tool_trajectory_record",
    "verification_for_write",
    "vouches_for_shared",
    "without_secrets",
]
