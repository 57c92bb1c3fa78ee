"""Memory in the console: what the actor may read, each entry's provenance, history and the
model calls it was sent to; correct and delete with confirmation, and review (accept or reject)
shared memory written without `memory.manage` (all through the services)."""

from __future__ import annotations

import difflib
from datetime import datetime, time, timedelta

from django.contrib import messages
from django.http import Http404
from django.shortcuts import redirect, render
from django.utils.timezone import make_aware
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from cadre.console.forms import MemoryCorrectForm, MemoryFilterForm, add_service_error
from cadre.console.scope_names import scope_choices, scope_names, shows_scope_keys
from cadre.console.views.base import (
    denied,
    paginate,
    posted,
    query_without_page,
    require_permission,
)
from cadre.errors import CadreError, NotFound
from cadre.identifiers import parse_pk
from cadre.memory import personal_reads, selectors, services
from cadre.memory.models import ContextRecordItem, Kind, Memory, MemoryVersion, Verification
from cadre.viewer.trail import memory_trail
from cadre.viewer.why import best_lexical, explain

ACCESS_LOG_SHOWN = 20  # the newest reads of the member's personal memory on their Memory page

# Who wrote a memory or a version, when no name was recorded (actor_type).
ACTOR_TYPE_LABELS = {
    "member": gettext_lazy("member"),
    "api_key": gettext_lazy("API key"),
    "agent": gettext_lazy("agent"),
    "system": gettext_lazy("system"),
    "scim_token": gettext_lazy("SCIM token"),
}


def gate(request):
    """Anyone who may read memory (every member reads their own); None when allowed."""
    if not selectors.can_read_memory(request.actor):
        return denied(request, _("You may not read memory in this organization."))
    return None


def _memory_or_404(request, pk: int):
    try:
        return selectors.memory_get(request.actor, pk)
    except NotFound:
        raise Http404(_("Memory not found.")) from None


@require_permission("chat.use")
def memory_list(request):
    refused = gate(request)
    if refused:
        return refused
    actor = request.actor
    filters = MemoryFilterForm(request.GET or None, scope_choices=scope_choices(actor))
    # The review queue: shared memory written without memory.manage, waiting for a reviewer.
    reviewing = request.GET.get("verification") == Verification.UNVERIFIED
    verifications = [Verification.UNVERIFIED] if reviewing else None
    memories = selectors.memory_list(actor, verifications=verifications)
    if filters.is_valid():
        data = filters.cleaned_data
        day = timedelta(days=1)
        memories = selectors.memory_list(
            actor,
            scope_keys=[data["scope"]] if data["scope"] else None,
            kinds=[data["kind"]] if data["kind"] else None,
            source_kinds=[data["source"]] if data["source"] else None,
            statuses=[data["status"]] if data["status"] else None,
            # Days in the organization's time zone (set by require_permission), ends included.
            since=make_aware(datetime.combine(data["since"], time.min)) if data["since"] else None,
            until=make_aware(datetime.combine(data["until"] + day, time.min))
            if data["until"]
            else None,
            text=data["q"] or None,
            verifications=verifications,
        )
    page = paginate(request, memories)
    _label_scopes(actor, page.object_list)
    for memory in page.object_list:
        memory.author_type_label = ACTOR_TYPE_LABELS.get(memory.author_type, memory.author_type)
    can_review = selectors.can_review(actor)
    return render(
        request,
        "console/memory/list.html",
        {
            "filters": filters,
            "page": page,
            "query": query_without_page(request),
            "filtered": reviewing or any(request.GET.get(name) for name in filters.fields),
            "reviewing": reviewing,
            "can_review": can_review,
            # Who read this member's personal memory (owners, IT admins): theirs to see.
            "access_log": [
                personal_reads.entry(event)
                for event in personal_reads.access_log(actor)[:ACCESS_LOG_SHOWN]
            ],
            "waiting": selectors.memory_list(actor, verifications=[Verification.UNVERIFIED])
            .order_by()
            .count()
            if can_review
            else 0,
        },
    )


@require_permission("chat.use")
def memory_search(request):
    """Search memory as retrieval does (the same selector as the API and the agents), each hit
    with why it ranked where it did, and the candidates diversity (MMR) passed over."""
    refused = gate(request)
    if refused:
        return refused
    actor = request.actor
    text = (request.GET.get("q") or "").strip()[:500]
    scope = request.GET.get("scope", "")
    kind = request.GET.get("kind", "")
    top_k = request.GET.get("top_k", "10")
    top_k = min(max(int(top_k), 1), 50) if top_k.isdigit() else 10
    hits, passed_over, error = [], [], ""
    if text:
        try:
            result = selectors.memory_search(
                actor=actor,
                query=text,
                top_k=top_k,
                scope_keys=[scope] if scope else None,
                kinds=[kind] if kind in Kind.values else None,
                force=True,
                passed_over=True,
            )
        except CadreError as refusal:
            error = refusal.message
        else:
            best = best_lexical([h.components for h in [*result.hits, *result.passed_over]])
            hits = [
                {
                    "hit": hit,
                    "rank": rank,
                    "why": explain(hit.components, best_lexical=best, kept=True),
                }
                for rank, hit in enumerate(result.hits, start=1)
            ]
            passed_over = [
                {"hit": hit, "why": explain(hit.components, best_lexical=best, kept=False)}
                for hit in result.passed_over
            ]
            _label_scopes(actor, [row["hit"].memory for row in hits + passed_over])
    return render(
        request,
        "console/memory/search.html",
        {
            "q": text,
            "scope": scope,
            "kind": kind,
            "top_k": top_k,
            "scope_choices": scope_choices(actor),
            "kinds": Kind.choices,
            "hits": hits,
            "passed_over": passed_over,
            "error": error,
        },
    )


def _label_scopes(actor, memories) -> None:
    """Give each memory its scope's name as a person reads it ("You", "Your agent Sales
    assistant", "Sales team"); its key (`user:2`) is shown only beside it, to memory.view."""
    labels = scope_names(actor, sorted({memory.scope_key for memory in memories}))
    show_key = shows_scope_keys(actor)
    for memory in memories:
        memory.scope_label = labels[memory.scope_key]
        memory.scope_key_shown = memory.scope_key if show_key else ""


def _status_label(status: str) -> str:
    try:
        return Memory.Status(status).label
    except ValueError:
        return status


def _version_rows(versions) -> list[dict]:
    rows = []
    for version in versions:
        diff = []
        if version.change == MemoryVersion.Change.CORRECTION and version.old_content:
            diff = list(
                difflib.unified_diff(
                    version.old_content.splitlines(),
                    version.new_content.splitlines(),
                    lineterm="",
                    n=1,
                )
            )[2:]
        version.actor_type_label = ACTOR_TYPE_LABELS.get(version.actor_type, version.actor_type)
        version.old_status_label = _status_label(version.old_status)
        version.new_status_label = _status_label(version.new_status)
        rows.append({"version": version, "diff": diff})
    return rows


def _review(request, memory):
    """Accept or reject the memory (POST `decision`, at the `expected_version` shown); the
    page again with the outcome."""
    decision = request.POST.get("decision", "")
    try:
        services.memory_verify(
            actor=request.actor,
            memory=memory,
            decision=decision,
            expected_version=parse_pk(request.POST.get("expected_version")) or 0,
            reason=request.POST.get("reason", "")[:2000],
        )
    except CadreError as refusal:
        messages.error(request, refusal.message)
    else:
        messages.success(
            request,
            _("Accepted: agents are sent this memory from their next turn.")
            if decision == "accept"
            else _("Rejected: no agent is sent this memory."),
        )
    return redirect("console:memory_detail", pk=memory.pk)


@require_permission("chat.use")
def memory_detail(request, pk: int):
    refused = gate(request)
    if refused:
        return refused
    memory = _memory_or_404(request, pk)
    if request.method == "POST":
        if not selectors.can_review(request.actor):
            return denied(
                request, _("Reviewing shared memory needs the 'memory.manage' permission.")
            )
        return _review(request, memory)
    _label_scopes(request.actor, [memory])
    versions = selectors.memory_history(request.actor, pk)
    records = selectors.memory_influence(request.actor, pk)[:50]
    return render(
        request,
        "console/memory/detail.html",
        {
            "memory": memory,
            "versions": _version_rows(versions),
            "records": records,
            "trail": _labelled_trail(memory_trail(request.actor, pk)),
            "can_modify": selectors.can_modify(request.actor, memory),
            "can_review": selectors.can_review(request.actor),
        },
    )


def _labelled_trail(trail: dict) -> dict:
    """The trail with each model call's status as a person reads it, in their language."""
    for call in trail.get("model_calls", []):
        try:
            call["status_label"] = ContextRecordItem.Status(call["status"]).label
        except ValueError:
            call["status_label"] = call["status"]
    return trail


@require_permission("chat.use")
def memory_correct(request, pk: int):
    refused = gate(request)
    if refused:
        return refused
    memory = _memory_or_404(request, pk)
    if not selectors.can_modify(request.actor, memory):
        return denied(request, _("You may not change this memory."))
    form = MemoryCorrectForm(
        posted(request), initial={"content": memory.content, "expected_version": memory.version}
    )
    if form.is_valid():
        data = form.cleaned_data
        try:
            services.memory_update(
                actor=request.actor,
                memory=memory,
                expected_version=data["expected_version"],
                reason=data["reason"],
                content=data["content"],
            )
        except CadreError as error:
            add_service_error(form, error)
        else:
            messages.success(
                request, _("The memory was corrected; its history keeps the old text.")
            )
            return redirect("console:memory_detail", pk=memory.pk)
    return render(request, "console/memory/correct.html", {"memory": memory, "form": form})


@require_permission("chat.use")
def memory_delete(request, pk: int):
    refused = gate(request)
    if refused:
        return refused
    memory = _memory_or_404(request, pk)
    if not selectors.can_modify(request.actor, memory):
        return denied(request, _("You may not delete this memory."))
    error = None
    if request.method == "POST":
        try:
            services.memory_delete(
                actor=request.actor, memory=memory, reason=request.POST.get("reason", "")[:1000]
            )
        except CadreError as failure:
            error = failure.message
        else:
            messages.success(
                request,
                _(
                    "The memory was deleted: no search, list or agent will see it again, and "
                    "its content is purged."
                ),
            )
            return redirect("console:memory")
    return render(
        request,
        "console/confirm.html",
        {
            "title": _("Delete this memory?"),
            "body": _(
                "“%(content)s” will disappear from every search, list and agent context at "
                "once; a purge job then removes its content and vectors. The audit log keeps "
                "its id, never its text."
            )
            % {"content": memory.content[:200]},
            "confirm_label": _("Delete memory"),
            "danger": True,
            "cancel_url": f"/memory/{memory.pk}/",
            "crumbs": [(_("Memory"), "console:memory")],
            "error": error,
        },
    )
