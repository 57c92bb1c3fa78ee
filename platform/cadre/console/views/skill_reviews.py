"""Console pages for skill candidates and their reviews (routes listed in `urlpatterns`): the
reviewers' inbox, a candidate's review page (score components, evidence, diff, comments and
the decision form), and an employee's own proposals to confirm or dismiss."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import path
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from cadre.console.forms import add_service_error
from cadre.console.views.base import paginate, posted, query_without_page, require_permission
from cadre.errors import CadreError, NotFound
from cadre.skills import selectors, services
from cadre.skills.models import SkillCandidate, SkillProposal

INBOX_VIEWS = {
    "mine_to_decide": "Waiting for me",
    "in_review": "In review",
    "changes_requested": "Changes requested",
    "done": "Published or rejected",
}
SCORE_LABELS = {
    "validation": "Validation",
    "scan": "Security scan",
    "evidence": "Evidence",
    "overlap": "Distinct from Hub skills",
    "clarity": "Clarity",
    "model_rubric": "Model rubric",
}


class DecisionForm(forms.Form):
    decision = forms.ChoiceField(
        choices=[
            ("approve", "Approve"),
            ("request_changes", "Request changes"),
            ("reject", "Reject"),
        ],
        widget=forms.RadioSelect,
    )
    comment = forms.CharField(
        required=False,
        max_length=4000,
        widget=forms.Textarea(attrs={"rows": 4}),
        help_text="Required to reject or request changes; the requester sees it.",
    )


def _candidate_or_404(request, pk: int) -> SkillCandidate:
    try:
        return selectors.candidate_get(request.actor, pk)
    except NotFound:
        raise Http404("Candidate not found.") from None


@require_permission("skill.review")
def review_inbox(request):
    actor = request.actor
    view = request.GET.get("view") or "mine_to_decide"
    if view not in INBOX_VIEWS:
        view = "mine_to_decide"
    candidates = selectors.candidates_visible(actor)
    if view == "done":
        candidates = candidates.filter(
            status__in=[SkillCandidate.Status.PUBLISHED, SkillCandidate.Status.REJECTED]
        )
    elif view == "mine_to_decide":
        candidates = selectors.decidable(actor, candidates)
    else:
        candidates = candidates.filter(status=view)
    return render(
        request,
        "console/skill_reviews/inbox.html",
        {
            "page": paginate(request, candidates),
            "query": query_without_page(request),
            "view": view,
            "views": INBOX_VIEWS,
            "stages": selectors.stages_for(actor.organization),
        },
    )


def _components(candidate: SkillCandidate) -> list[dict]:
    return [
        {
            **component,
            "label": SCORE_LABELS.get(component["key"], component["key"]),
            "percent": None if component["value"] is None else round(component["value"] * 100),
        }
        for component in candidate.score_components
    ]


@require_permission(None)
def review_detail(request, pk: int):
    candidate = _candidate_or_404(request, pk)
    allowed, why = selectors.may_decide(request.actor, candidate)
    form = DecisionForm(posted(request))
    if request.method == "POST" and form.is_valid():
        try:
            services.candidate_decide(
                actor=request.actor,
                candidate=candidate,
                decision=form.cleaned_data["decision"],
                comment=form.cleaned_data["comment"],
            )
        except CadreError as error:
            add_service_error(form, error)
        else:
            decided = dict(form.fields["decision"].choices)[form.cleaned_data["decision"]]
            messages.success(request, f"{decided}: {candidate.name}.")
            return redirect("console:skill_review", pk=candidate.pk)
    against, diff = selectors.candidate_diff(candidate)
    return render(
        request,
        "console/skill_reviews/detail.html",
        {
            "candidate": candidate,
            "components": _components(candidate),
            "evidence": candidate.evidence.all(),
            "decisions": candidate.decisions.select_related("decided_by"),
            "revisions": candidate.revisions.select_related("created_by"),
            "diff_against": against,
            "diff": diff,
            "may_decide": allowed,
            "why_not": why,
            "form": form,
            "can_review": request.actor.may("skill.review"),
        },
    )


@require_permission("chat.use")
def proposal_list(request):
    proposals = selectors.proposals_for(request.actor)
    return render(
        request,
        "console/skill_reviews/proposals.html",
        {
            "pending": proposals.filter(status=SkillProposal.Status.PENDING),
            "page": paginate(request, proposals.exclude(status=SkillProposal.Status.PENDING)),
            "query": query_without_page(request),
        },
    )


def _back(request, fallback: str, *args):
    """Where the page that posted asked to return (the chat's card), else `fallback`."""
    wanted = request.POST.get("next", "")
    if wanted and url_has_allowed_host_and_scheme(
        wanted, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return redirect(wanted)
    return redirect(fallback, *args)


def _proposal_or_404(request, pk: int) -> SkillProposal:
    try:
        return selectors.proposal_get(request.actor, pk)
    except NotFound:
        raise Http404("Proposal not found.") from None


@require_POST
@require_permission("chat.use")
def proposal_confirm(request, pk: int):
    proposal = _proposal_or_404(request, pk)
    try:
        candidate = services.proposal_confirm(actor=request.actor, proposal=proposal, via="console")
    except CadreError as error:
        messages.error(request, error.message)
        return _back(request, "console:skill_proposals")
    messages.success(request, f"Sent “{candidate.name}” to review. Thank you for teaching it.")
    return _back(request, "console:skill_review", candidate.pk)


@require_POST
@require_permission("chat.use")
def proposal_dismiss(request, pk: int):
    proposal = _proposal_or_404(request, pk)
    try:
        services.proposal_dismiss(actor=request.actor, proposal=proposal)
    except CadreError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, "Dismissed: nothing was sent to review.")
    return _back(request, "console:skill_proposals")


urlpatterns: list = [
    path("skills/reviews/", review_inbox, name="skill_reviews"),
    path("skills/reviews/<int:pk>/", review_detail, name="skill_review"),
    path("skills/proposals/", proposal_list, name="skill_proposals"),
    path("skills/proposals/<int:pk>/confirm/", proposal_confirm, name="skill_proposal_confirm"),
    path("skills/proposals/<int:pk>/dismiss/", proposal_dismiss, name="skill_proposal_dismiss"),
]
