"""The matrix's known deviations: cells of tests/authorization/matrix.py that answer otherwise
today, grouped by the bug that makes them so.

tests/authorization/test_matrix.py skips nothing: the sweep checks that each listed cell still
answers otherwise (a fixed cell fails it with "remove it"), and each group is a strict xfail
test asserting the declared outcome. Fix the bug, then delete its cells here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Deviation:
    """Cells that answer otherwise today: a bug for the owning app, named once."""

    reason: str
    cells: dict[str, tuple[str, ...]]  # principal -> Declaration.id values

    def pairs(self):
        return {(p, d) for p, ids in self.cells.items() for d in ids}


REASONS = {
    "compat_takes_sessions": (
        "/mem0/ and /memos/ are for API-key clients, yet a console session is taken too: the "
        "tenancy middleware sets request.actor from the session and the views check only "
        "IsOrganizationActor, with no CSRF check (APIView is csrf_exempt). A signed-in browser "
        "can be made to add, update and delete memories. Fix: refuse actors that are not API "
        "keys in Mem0View and the MemOS base view."
    ),
    "transcripts_read_with_agent_view": (
        "Auditors and business admins (agent.view) read another member's transcripts — "
        "sessions, runs, run events, call chains, in the API and the console — which the issue "
        "limits to the subject, the agent's owner and holders of memory.personal (404 else)."
    ),
    "personal_read_without_memory_personal": (
        "A context record of another member's run, quoting their personal memory, is read "
        "with memory.view (auditor, business admin) instead of answering 404."
    ),
    "forbidden_instead_of_not_found": (
        "Another member's personal data answers 403, not 404, to an employee (the console's "
        "session page, a case saved from a colleague's turn): the answer tells it exists."
    ),
    "subject_refused_own_personal_data": (
        "The subject is refused their own data: the console's session page needs agent.view, "
        "a case saved from their turn needs evaluation.view."
    ),
    "validates_before_authorizing": (
        "The view validates the body (400) before checking the caller's permission or that "
        "the object is theirs to see: a caller who may not act gets 400, not 403/404, and "
        "another organization's caller 400 for PATCH /api/v1/memories/{id}/. Fix: check the "
        "permission and get_object() before the serializer."
    ),
}

# Each entry is a bug the matrix found; fixing it makes its cells agree, which fails the sweep
# ("remove it") and XPASSes its strict xfail below. Remove the cells with the fix.
KNOWN_DEVIATIONS: dict[str, Deviation] = {
    "compat_takes_sessions": Deviation(
        reason=REASONS["compat_takes_sessions"],
        cells={
            "auditor": (
                "DELETE mem0-memories",
                "GET mem0-memories",
                "GET mem0-memory-history@shared_memory_id",
                "GET mem0-memory@shared_memory_id",
                "GET mem0-ping",
                "POST mem0-add",
                "POST mem0-list-v2",
                "POST mem0-list-v3",
                "POST mem0-memories",
                "POST mem0-search-v1",
                "POST mem0-search-v2",
                "POST mem0-search-v3",
                "POST memos-add-message",
                "POST memos-delete",
                "POST memos-feedback",
                "POST memos-get",
                "POST memos-search",
                "POST memos-status",
                "PUT mem0-memory@shared_memory_id",
            ),
            "business_admin": (
                "DELETE mem0-memories",
                "GET mem0-memories",
                "GET mem0-memory-history@shared_memory_id",
                "GET mem0-memory@shared_memory_id",
                "GET mem0-ping",
                "POST mem0-add",
                "POST mem0-list-v2",
                "POST mem0-list-v3",
                "POST mem0-memories",
                "POST mem0-search-v1",
                "POST mem0-search-v2",
                "POST mem0-search-v3",
                "POST memos-add-message",
                "POST memos-delete",
                "POST memos-feedback",
                "POST memos-get",
                "POST memos-search",
                "POST memos-status",
                "PUT mem0-memory@shared_memory_id",
            ),
            "employee": (
                "DELETE mem0-memories",
                "GET mem0-memories",
                "GET mem0-memory-history@shared_memory_id",
                "GET mem0-memory@shared_memory_id",
                "GET mem0-ping",
                "POST mem0-add",
                "POST mem0-list-v2",
                "POST mem0-list-v3",
                "POST mem0-memories",
                "POST mem0-search-v1",
                "POST mem0-search-v2",
                "POST mem0-search-v3",
                "POST memos-add-message",
                "POST memos-delete",
                "POST memos-feedback",
                "POST memos-get",
                "POST memos-search",
                "POST memos-status",
                "PUT mem0-memory@shared_memory_id",
            ),
            "it_admin": (
                "DELETE mem0-memories",
                "DELETE mem0-memory@personal_memory_id",
                "DELETE mem0-memory@shared_memory_id",
                "GET mem0-memories",
                "GET mem0-memory-history@personal_memory_id",
                "GET mem0-memory-history@shared_memory_id",
                "GET mem0-memory@personal_memory_id",
                "GET mem0-memory@shared_memory_id",
                "GET mem0-ping",
                "POST mem0-add",
                "POST mem0-list-v2",
                "POST mem0-list-v3",
                "POST mem0-memories",
                "POST mem0-search-v1",
                "POST mem0-search-v2",
                "POST mem0-search-v3",
                "POST memos-add-message",
                "POST memos-delete",
                "POST memos-feedback",
                "POST memos-get",
                "POST memos-search",
                "POST memos-status",
                "PUT mem0-memory@personal_memory_id",
                "PUT mem0-memory@shared_memory_id",
            ),
            "outsider_owner": (
                "DELETE mem0-memories",
                "GET mem0-memories",
                "GET mem0-ping",
                "POST mem0-add",
                "POST mem0-list-v2",
                "POST mem0-list-v3",
                "POST mem0-memories",
                "POST mem0-search-v1",
                "POST mem0-search-v2",
                "POST mem0-search-v3",
                "POST memos-add-message",
                "POST memos-delete",
                "POST memos-feedback",
                "POST memos-get",
                "POST memos-search",
                "POST memos-status",
            ),
            "owner": (
                "DELETE mem0-memories",
                "DELETE mem0-memory@personal_memory_id",
                "DELETE mem0-memory@shared_memory_id",
                "GET mem0-memories",
                "GET mem0-memory-history@personal_memory_id",
                "GET mem0-memory-history@shared_memory_id",
                "GET mem0-memory@personal_memory_id",
                "GET mem0-memory@shared_memory_id",
                "GET mem0-ping",
                "POST mem0-add",
                "POST mem0-list-v2",
                "POST mem0-list-v3",
                "POST mem0-memories",
                "POST mem0-search-v1",
                "POST mem0-search-v2",
                "POST mem0-search-v3",
                "POST memos-add-message",
                "POST memos-delete",
                "POST memos-feedback",
                "POST memos-get",
                "POST memos-search",
                "POST memos-status",
                "PUT mem0-memory@personal_memory_id",
                "PUT mem0-memory@shared_memory_id",
            ),
            "reviewer": (
                "DELETE mem0-memories",
                "GET mem0-memories",
                "GET mem0-memory-history@shared_memory_id",
                "GET mem0-memory@shared_memory_id",
                "GET mem0-ping",
                "POST mem0-add",
                "POST mem0-list-v2",
                "POST mem0-list-v3",
                "POST mem0-memories",
                "POST mem0-search-v1",
                "POST mem0-search-v2",
                "POST mem0-search-v3",
                "POST memos-add-message",
                "POST memos-delete",
                "POST memos-feedback",
                "POST memos-get",
                "POST memos-search",
                "POST memos-status",
                "PUT mem0-memory@shared_memory_id",
            ),
            "subject": (
                "DELETE mem0-memories",
                "DELETE mem0-memory@personal_memory_id",
                "GET mem0-memories",
                "GET mem0-memory-history@personal_memory_id",
                "GET mem0-memory-history@shared_memory_id",
                "GET mem0-memory@personal_memory_id",
                "GET mem0-memory@shared_memory_id",
                "GET mem0-ping",
                "POST mem0-add",
                "POST mem0-list-v2",
                "POST mem0-list-v3",
                "POST mem0-memories",
                "POST mem0-search-v1",
                "POST mem0-search-v2",
                "POST mem0-search-v3",
                "POST memos-add-message",
                "POST memos-delete",
                "POST memos-feedback",
                "POST memos-get",
                "POST memos-search",
                "POST memos-status",
                "PUT mem0-memory@personal_memory_id",
                "PUT mem0-memory@shared_memory_id",
            ),
        },
    ),
    "transcripts_read_with_agent_view": Deviation(
        reason=REASONS["transcripts_read_with_agent_view"],
        cells={
            "auditor": (
                "GET console:run_call_chain@subject_run",
                "GET console:session@subject_session",
                "GET run-call-chain@subject_run",
                "GET run-detail@subject_run",
                "GET run-events@subject_run",
                "GET session-detail@subject_session",
            ),
            "business_admin": (
                "GET console:run_call_chain@subject_run",
                "GET console:session@subject_session",
                "GET run-call-chain@subject_run",
                "GET run-detail@subject_run",
                "GET run-events@subject_run",
                "GET session-detail@subject_session",
            ),
        },
    ),
    "personal_read_without_memory_personal": Deviation(
        reason=REASONS["personal_read_without_memory_personal"],
        cells={
            "auditor": ("GET memory-context-record-detail@personal_context",),
            "business_admin": ("GET memory-context-record-detail@personal_context",),
        },
    ),
    "forbidden_instead_of_not_found": Deviation(
        reason=REASONS["forbidden_instead_of_not_found"],
        cells={
            "employee": (
                "GET console:session@subject_session",
                "GET eval-case-detail@turn_case",
            ),
            "employee_key": ("GET eval-case-detail@turn_case",),
            "reviewer": (
                "GET console:session@subject_session",
                "GET eval-case-detail@turn_case",
            ),
        },
    ),
    "subject_refused_own_personal_data": Deviation(
        reason=REASONS["subject_refused_own_personal_data"],
        cells={
            "subject": (
                "GET console:session@subject_session",
                "GET eval-case-detail@turn_case",
            ),
        },
    ),
    "validates_before_authorizing": Deviation(
        reason=REASONS["validates_before_authorizing"],
        cells={
            "auditor": (
                "PATCH agent-detail@subject_agent",
                "PATCH memory-detail",
                "PATCH memory-detail@personal_memory",
                "POST agent-subscription-list",
                "POST clawhub-skills",
                "POST console:confirmation_decide@confirmation",
                "POST hub-namespaces",
                "POST hub-version-review",
                "POST hub-version-yank",
                "POST run-rating@subject_run",
                "PUT hub-skill-tag",
            ),
            "business_admin": (
                "PATCH memory-detail",
                "PATCH memory-detail@personal_memory",
                "POST hub-version-review",
                "POST hub-version-yank",
                "POST model-provider-list",
                "PUT hub-skill-tag",
            ),
            "employee": (
                "PATCH memory-detail",
                "PATCH memory-detail@personal_memory",
                "POST agent-subscription-list",
                "POST clawhub-skills",
                "POST hub-namespaces",
                "POST hub-version-review",
                "POST hub-version-yank",
                "PUT hub-skill-tag",
            ),
            "employee_key": (
                "PATCH memory-detail",
                "PATCH memory-detail@personal_memory",
                "POST agent-subscription-list",
                "POST clawhub-skills",
                "POST hub-namespaces",
                "POST hub-version-review",
                "POST hub-version-yank",
                "PUT hub-skill-tag",
                "PUT mem0-memory@shared_memory_id",
            ),
            "it_admin": ("POST console:confirmation_decide@confirmation",),
            "outsider_key": (
                "PATCH memory-detail",
                "PATCH memory-detail@personal_memory",
            ),
            "outsider_owner": (
                "PATCH memory-detail",
                "PATCH memory-detail@personal_memory",
            ),
            "reviewer": (
                "PATCH memory-detail",
                "PATCH memory-detail@personal_memory",
                "POST agent-subscription-list",
            ),
            "subject": (
                "PATCH memory-detail",
                "POST agent-subscription-list",
                "POST clawhub-skills",
                "POST hub-namespaces",
                "POST hub-version-review",
                "POST hub-version-yank",
                "PUT hub-skill-tag",
            ),
        },
    ),
}
