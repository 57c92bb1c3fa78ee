"""Console pages for skill candidates and their reviews (routes listed in `urlpatterns`): the
reviewers' inbox, the organization's review stages (edited by policy managers), a candidate's
review page (score components, evidence, diff, comments, the reviewer's edit form and the
decision form, with a sole reviewer's justification where the requester decides alone), and an
employee's own proposals to confirm or dismiss."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import path
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext
from django.views.decorators.http import require_POST

from cadre.console.forms import add_service_error
from cadre.console.views.base import (
    denied,
    paginate,
    posted,
    query_without_page,
    require_permission,
)
from cadre.errors import CadreError, InvalidInput, NotFound
from cadre.skills import selectors, services
from cadre.skills.models import SkillCandidate, SkillProposal
from cadre.skills.scoring import EVIDENCE_FULL
from cadre.tenancy.roles import PERMISSIONS, ROLE_CHOICES
from cadre.tenancy.services.notices import notices_shown
from hub import distribution as hub_distribution
from hub.models import SkillVersion

INBOX_VIEWS = {
    "mine_to_decide": gettext_lazy("Waiting for me"),
    "in_review": gettext_lazy("In review"),
    "changes_requested": gettext_lazy("Changes requested"),
    "done": gettext_lazy("Published or rejected"),
}
SCORE_LABELS = {
    "validation": gettext_lazy("Validation"),
    "scan": gettext_lazy("Security scan"),
    "evidence": gettext_lazy("Evidence"),
    "overlap": gettext_lazy("Distinct from Hub skills"),
    "clarity": gettext_lazy("Clarity"),
    "model_rubric": gettext_lazy("Model rubric"),
}


class DecisionForm(forms.Form):
    decision = forms.ChoiceField(
        choices=[
            ("approve", gettext_lazy("Approve")),
            ("request_changes", gettext_lazy("Request changes")),
            ("reject", gettext_lazy("Reject")),
        ],
        widget=forms.RadioSelect,
        label=gettext_lazy("Decision"),
    )
    comment = forms.CharField(
        required=False,
        max_length=4000,
        widget=forms.Textarea(attrs={"rows": 4}),
        label=gettext_lazy("Comment"),
        help_text=gettext_lazy(
            "Required to reject or request changes. Internal: the requester and the "
            "reviewers see it, the Hub does not."
        ),
    )
    changelog = forms.CharField(
        required=False,
        max_length=2000,
        label=gettext_lazy("Changelog (public)"),
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text=gettext_lazy(
            "Published with the version for everyone who sees the skill. Your comment "
            "is never copied here."
        ),
    )
    revision = forms.IntegerField(required=False, widget=forms.HiddenInput)


class SoleReviewerDecisionForm(DecisionForm):
    sole_reviewer_justification = forms.CharField(
        label=gettext_lazy("Sole reviewer justification"),
        max_length=4000,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text=gettext_lazy(
            "Why you decide your own skill: no other member can review this stage. "
            "Audited, and shown on the Hub version page."
        ),
    )


class EditForm(forms.Form):
    """A reviewer's edit of the candidate's SKILL.md before deciding (a new revision)."""

    name = forms.CharField(max_length=64, label=gettext_lazy("Name"))
    description = forms.CharField(
        max_length=1024,
        widget=forms.Textarea(attrs={"rows": 2}),
        label=gettext_lazy("Description"),
    )
    body = forms.CharField(
        strip=False, widget=forms.Textarea(attrs={"rows": 14}), label=gettext_lazy("Body")
    )
    changelog = forms.CharField(
        required=False,
        max_length=2000,
        label=gettext_lazy("Changelog (public)"),
        widget=forms.Textarea(attrs={"rows": 2}),
    )
    note = forms.CharField(
        required=False,
        max_length=4000,
        label=gettext_lazy("Why you edit (internal)"),
        widget=forms.Textarea(attrs={"rows": 2}),
    )
    revision = forms.IntegerField(required=False, widget=forms.HiddenInput)


class StageForm(forms.Form):
    name = forms.CharField(max_length=100, required=False, label=gettext_lazy("Name"))
    roles = forms.MultipleChoiceField(
        choices=ROLE_CHOICES,
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label=gettext_lazy("Roles"),
    )
    permission = forms.ChoiceField(
        choices=[("", "—"), *((name, name) for name in PERMISSIONS)],
        required=False,
        label=gettext_lazy("Permission"),
    )
    allow_requester = forms.BooleanField(
        required=False, label=gettext_lazy("The requester may decide")
    )


StageFormSet = forms.formset_factory(
    StageForm, extra=1, can_delete=True, max_num=services.MAX_STAGES, validate_max=True
)


def _stage_initial(stages: list[dict]) -> list[dict]:
    return [
        {
            "name": stage["name"],
            "roles": list(stage.get("roles") or []),
            "permission": stage.get("permission") or "",
            "allow_requester": bool(stage.get("allow_requester")),
        }
        for stage in stages
    ]


@require_permission(None)
def review_stages(request):
    """The organization's review stages; saving replaces them all at once (or none)."""
    actor = request.actor
    can_edit = actor.has("policy.manage")
    if not (can_edit or actor.may("skill.review")):
        return denied(
            request, _("The review stages are shown to skill reviewers and policy managers.")
        )
    current = selectors.stages_for(actor.organization)
    if request.method == "POST" and not can_edit:
        return denied(
            request, _("Changing the review stages needs the 'policy.manage' permission.")
        )
    formset = StageFormSet(posted(request), initial=_stage_initial(current), prefix="stages")
    problems: list[str] = []
    if request.method == "POST" and formset.is_valid():
        # An untouched blank row has no cleaned data; a row ticked "remove" is left out.
        stages = [
            form.cleaned_data
            for form in formset.forms
            if form.cleaned_data and not form.cleaned_data.get("DELETE")
        ]
        try:
            services.review_stages_set(
                actor=actor,
                stages=[{k: v for k, v in stage.items() if k != "DELETE"} for stage in stages],
            )
        except InvalidInput as error:
            problems = list((error.details or {}).get("stages") or [error.message])
        except CadreError as error:
            problems = [error.message]
        else:
            messages.success(
                request,
                ngettext(
                    "Saved %(count)d review stage. Candidates already in review keep the "
                    "stages they were submitted with.",
                    "Saved %(count)d review stages. Candidates already in review keep the "
                    "stages they were submitted with.",
                    len(stages),
                )
                % {"count": len(stages)},
            )
            return redirect("console:skill_review_stages")
    return render(
        request,
        "console/skill_reviews/stages.html",
        {
            "formset": formset,
            "problems": problems,
            "stages": current,
            "can_edit": can_edit,
            "max_stages": services.MAX_STAGES,
        },
        status=400 if request.method == "POST" else 200,
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


CLARITY_CHECKS = {
    "description_length": gettext_lazy("a description of the right length"),
    "steps": gettext_lazy("steps"),
    "examples": gettext_lazy("examples"),
}
SIMILARITY_KINDS = {"lexical": gettext_lazy("lexical"), "semantic": gettext_lazy("semantic")}


def _component_detail(component: dict) -> str:
    """The component's explanation in the reader's language, from the data scoring kept (the
    stored `detail` is the English written when it was scored, shown when nothing else fits)."""
    key, value, detail = component["key"], component["value"], component.get("detail") or ""
    data = component.get("data") or {}
    _head, _sep, rest = detail.partition(": ")
    if key == "validation":
        if data.get("errors"):
            return ngettext(
                "%(count)d error: %(message)s", "%(count)d errors: %(message)s", data["errors"]
            ) % {"count": data["errors"], "message": rest}
        if data.get("warnings"):
            return ngettext(
                "valid, %(count)d warning: %(message)s",
                "valid, %(count)d warnings: %(message)s",
                data["warnings"],
            ) % {"count": data["warnings"], "message": rest}
        return _("valid Agent Skill, no warnings")
    if key == "scan" and data.get("verdict"):
        rules = detail.partition(" (")[2].rstrip(")")
        verdict = dict(SkillVersion.Verdict.choices).get(data["verdict"], data["verdict"])
        if rules:
            return _("scan verdict: %(verdict)s (%(rules)s)") % {"verdict": verdict, "rules": rules}
        return _("scan verdict: %(verdict)s") % {"verdict": verdict}
    if key == "evidence" and "cases" in data:
        return ngettext(
            "%(count)d case of evidence (%(full)d for full marks)",
            "%(count)d cases of evidence (%(full)d for full marks)",
            data["cases"],
        ) % {"count": data["cases"], "full": EVIDENCE_FULL}
    if key == "overlap" and "nearest" in data:
        if not data["nearest"]:
            return _("no similar skill in the Hub")
        nearest = data["nearest"][0]
        return _("closest Hub skill %(package)s (%(how)s similarity %(similarity).2f)") % {
            "package": nearest["package"],
            "how": SIMILARITY_KINDS.get(nearest["how"], nearest["how"]),
            "similarity": nearest["similarity"],
        }
    if key == "clarity" and "checks" in data:
        missing = [CLARITY_CHECKS.get(name, name) for name, ok in data["checks"].items() if not ok]
        if not missing:
            return _("description, steps and an example present")
        return _("missing: %(items)s") % {"items": _(", ").join(str(item) for item in missing)}
    if key == "model_rubric" and value is None:
        if detail.startswith("no skills model configured"):
            return _("no skills model configured: not scored")
        if detail.startswith("the model could not score it"):
            return _("the model could not score it: %(error)s") % {"error": rest}
    return detail


def _components(candidate: SkillCandidate) -> list[dict]:
    return [
        {
            **component,
            "label": SCORE_LABELS.get(component["key"], component["key"]),
            "detail": _component_detail(component),
            "percent": None if component["value"] is None else round(component["value"] * 100),
        }
        for component in candidate.score_components
    ]


def _edit_form(request, candidate: SkillCandidate, editing: bool) -> EditForm | None:
    text = selectors.candidate_skill_text(candidate)
    if text is None:
        return None
    initial = {**text, "changelog": candidate.changelog, "revision": candidate.revision}
    return EditForm(request.POST if editing else None, initial=initial, prefix="edit")


def _edited(request, candidate: SkillCandidate, form: EditForm) -> bool:
    """Save a reviewer's edit; False (with the errors on the form) when it is refused."""
    if not form.is_valid():
        return False
    data = form.cleaned_data
    try:
        services.candidate_edit(
            actor=request.actor,
            candidate=candidate,
            name=data["name"],
            description=data["description"],
            body=data["body"],
            changelog=data["changelog"],
            note=data["note"],
            revision=data["revision"],
        )
    except CadreError as error:
        add_service_error(form, error)
        return False
    messages.success(request, _("Saved your edit as a new revision: decide on it below."))
    return True


@require_permission(None)
def review_detail(request, pk: int):
    candidate = _candidate_or_404(request, pk)
    rule = selectors.decide_rule(request.actor, candidate)
    editing = request.method == "POST" and request.POST.get("action") == "edit"
    edit_form = _edit_form(request, candidate, editing) if rule.allowed else None
    if editing:
        if edit_form is None:
            messages.error(request, rule.reason or _("This candidate cannot be edited."))
            return redirect("console:skill_review", pk=candidate.pk)
        if _edited(request, candidate, edit_form):
            return redirect("console:skill_review", pk=candidate.pk)
    form = (SoleReviewerDecisionForm if rule.sole_reviewer else DecisionForm)(
        None if editing else posted(request),
        initial={"changelog": candidate.changelog, "revision": candidate.revision},
    )
    if request.method == "POST" and not editing and form.is_valid():
        try:
            services.candidate_decide(
                actor=request.actor,
                candidate=candidate,
                decision=form.cleaned_data["decision"],
                comment=form.cleaned_data["comment"],
                sole_reviewer_justification=form.cleaned_data.get(
                    "sole_reviewer_justification", ""
                ),
                # Untouched when the form did not send it (the changelog is not the comment).
                changelog=form.cleaned_data["changelog"] if "changelog" in request.POST else None,
                revision=form.cleaned_data["revision"],
            )
        except CadreError as error:
            add_service_error(form, error)
        else:
            decided = dict(form.fields["decision"].choices)[form.cleaned_data["decision"]]
            messages.success(
                request,
                _("%(decision)s: %(name)s.") % {"decision": decided, "name": candidate.name},
            )
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
            "may_decide": rule.allowed,
            "why_not": rule.reason,
            "sole_reviewer": rule.sole_reviewer,
            "form": form,
            "edit_form": edit_form,
            "can_review": request.actor.may("skill.review"),
            "install_offers": _install_offers(request.actor, candidate),
        },
    )


def _install_offers(actor, candidate: SkillCandidate) -> list[dict]:
    """Once published: the templates whose agents taught the skill and do not run it yet."""
    if candidate.published_version_id is None or candidate.package is None:
        return []
    rows = hub_distribution.package_templates(actor, candidate.package)
    return [row for row in rows if row["taught"] and row["offer"]]


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
            # The skills this person taught that agents run now (hub.distribution's notices).
            "notices": notices_shown(actor=request.actor, kind=hub_distribution.LIVE_NOTICE),
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
    messages.success(
        request,
        _("Sent “%(name)s” to review. Thank you for teaching it.") % {"name": candidate.name},
    )
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
        messages.success(request, _("Dismissed: nothing was sent to review."))
    return _back(request, "console:skill_proposals")


urlpatterns: list = [
    path("skills/reviews/", review_inbox, name="skill_reviews"),
    path("skills/reviews/stages/", review_stages, name="skill_review_stages"),
    path("skills/reviews/<int:pk>/", review_detail, name="skill_review"),
    path("skills/proposals/", proposal_list, name="skill_proposals"),
    path("skills/proposals/<int:pk>/confirm/", proposal_confirm, name="skill_proposal_confirm"),
    path("skills/proposals/<int:pk>/dismiss/", proposal_dismiss, name="skill_proposal_dismiss"),
]
