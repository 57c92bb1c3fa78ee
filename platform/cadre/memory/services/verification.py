"""Reviewing shared memory: a holder of `memory.manage` accepts or rejects a memory that waits
as unverified in a shared scope (organization, department, position) — until accepted, no model
is sent it (see models.GOVERNED_SCOPES and docs/memory.md, "Shared memory is reviewed")."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from cadre.errors import Conflict, InvalidInput, NotFound, NotPermitted
from cadre.governance import audit
from cadre.memory import selectors
from cadre.memory.models import Memory, MemoryTask, MemoryVersion, Verification
from cadre.memory.services.common import (
    audit_view,
    enqueue,
    lock,
    refresh_turn_vectors,
    require_write,
    write_version,
)

DECISIONS = {"accept": Verification.VERIFIED, "reject": Verification.REJECTED}
# What each decision may change: accepting a rejected memory (a reviewer changing their mind)
# is allowed; rejecting an accepted one is deleting it, which has its own path.
DECIDABLE = {
    "accept": (Verification.UNVERIFIED, Verification.REJECTED),
    "reject": (Verification.UNVERIFIED,),
}


@transaction.atomic
def memory_verify(
    *, actor, memory: Memory, decision: str, expected_version: int, reason: str = ""
) -> Memory:
    """Accept (`verified`: models may be sent it) or reject a memory waiting for review.

    Only holders of `memory.manage` decide (API keys: `memory:write` from such a creator):
    a reader who may not decide gets 403, anyone who cannot see the memory 404. The decision
    applies to the version the reviewer read (`expected_version`, else 409
    `version_conflict`), so text changed after it was read is never accepted unseen."""
    if decision not in DECISIONS:
        raise InvalidInput(
            _("Unknown decision %(decision)r.") % {"decision": decision},
            details={"decision": [_("accept or reject")]},
        )
    require_write(actor)
    memory = lock(memory)
    visible = selectors.memory_queryset(actor).filter(pk=memory.pk).exists()
    if not visible or memory.status == Memory.Status.DELETED:
        raise NotFound(_("Memory not found."))
    if not selectors.can_review(actor):
        # A person decides what every colleague's agent reads: never an agent or a job.
        raise NotPermitted(_("Reviewing shared memory needs the 'memory.manage' permission."))
    if int(expected_version) != memory.version:
        raise Conflict(
            _("The memory changed: it is at version %(current)s, not %(expected)s.")
            % {"current": memory.version, "expected": expected_version},
            code="version_conflict",
            details={"current_version": memory.version, "expected_version": expected_version},
        )
    if memory.verification not in DECIDABLE[decision]:
        raise Conflict(
            _("This memory is %(state)s: there is nothing to %(decision)s.")
            % {"state": memory.verification, "decision": decision},
            code="not_waiting_for_review",
            details={"verification": memory.verification},
        )
    before = {**audit_view(memory), "verification": memory.verification}
    memory.verification = DECISIONS[decision]
    memory.version += 1
    memory.updated_at = timezone.now()
    memory.save(update_fields=["verification", "version", "updated_at"])
    note = "accepted for models" if decision == "accept" else "rejected by review"
    write_version(
        memory,
        change=MemoryVersion.Change.STATE_CHANGE,
        actor=actor,
        reason="; ".join(filter(None, [note, reason])),
        old_status=memory.status,
    )
    audit.record(
        actor=actor,
        action=f"memory.{decision}",
        target=memory,
        before=before,
        after={**audit_view(memory), "verification": memory.verification},
        reason="" if not reason else "review with reason",
    )
    if decision == "accept":
        # Models may be sent it now: the next turn's vector may embed it as context.
        refresh_turn_vectors([memory], reason=f"context memory {memory.pk} accepted")
        # Dedup skipped it while it waited (an unverified memory must not absorb or supersede
        # a verified one): it runs now that it stands beside the others.
        enqueue(
            MemoryTask.Kind.DEDUP,
            organization=memory.organization,
            memory=memory,
            key=f"dedup:{memory.pk}:v{memory.version}",
        )
    return memory
