"""Evaluation in the console: the organization's gates, its suites, a suite's cases and
replays, a replay's baseline and candidate side by side per case with the aggregate and who
overrode a gate, and "add to evaluation" on a transcript turn. Read with evaluation.view (the
cases and results a reader may see: `selectors.cases_for` / `results_for`), write with
evaluation.manage; every write goes through `cadre.agents.evaluation` (services, gates,
recall)."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import path, reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext, pgettext_lazy
from django.views.decorators.http import require_POST

from cadre.agents.evaluation import gates, recall, selectors, services
from cadre.agents.evaluation.models import EvalRun, EvalSuite
from cadre.agents.models import AgentTemplate, Run, TemplateVersion
from cadre.console.scoping import in_organization, restricted, restricted_for
from cadre.console.views.base import paginate, query_without_page
from cadre.console.views.base import require_permission as gate
from cadre.errors import CadreError
from cadre.llm import BudgetExceeded
from cadre.memory.models import OrganizationEmbeddingModel

GATE_LABELS = {
    gates.TEMPLATE_PUBLISH: (
        gettext_lazy("Publishing a template version"),
        gettext_lazy("needs a passing replay of that version."),
    ),
    gates.TEMPLATE_MODEL_CHANGE: (
        gettext_lazy("Changing a template's model"),
        gettext_lazy(
            "publishing a version with another provider or model needs a passing replay of "
            "that model change."
        ),
    ),
    gates.EMBEDDING_ACTIVATE: (
        gettext_lazy("Activating an embedding model"),
        gettext_lazy(
            "a re-embed fills the vectors and waits; switching needs a passing retrieval suite "
            "with the new model as the candidate."
        ),
    ),
}
CANDIDATE_KINDS = [
    ("template_version", gettext_lazy("A version of the suite's template")),
    ("model", gettext_lazy("Another model")),
    ("embedding", gettext_lazy("Another embedding model")),
    ("current", gettext_lazy("The published version again")),
]


# A policy's decision on a replayed turn (`allow`, `deny`, ...), as people read it.
POLICY_ACTIONS = {
    "allow": pgettext_lazy("policy action", "allow"),
    "deny": pgettext_lazy("policy action", "deny"),
    "require_confirmation": pgettext_lazy("policy action", "require confirmation"),
    "mask": pgettext_lazy("policy action", "mask"),
}


def side_label(spec: dict) -> str:
    """A side of a replay as people read it, in their language."""
    kind = (spec or {}).get("kind", "current")
    if kind == "template_version":
        number = (
            TemplateVersion.objects.filter(pk=spec.get("version"))
            .values_list("number", flat=True)
            .first()
        )
        if number:
            return _("version v%(number)s") % {"number": number}
        return _("version #%(id)s") % {"id": spec.get("version")}
    if kind == "model":
        settings = spec.get("model_settings") or {}
        return _("model %(model)s") % {"model": settings.get("model") or settings.get("provider")}
    if kind == "embedding":
        return _("embedding model %(model)s") % {"model": spec.get("embedding_model")}
    return _("the published version")


# Where an organization's embedding model stands, short, in the replay form's model choices.
EMBEDDING_STATUS_WORDS = {
    "building": pgettext_lazy("embedding model", "building"),
    "active": pgettext_lazy("embedding model", "active"),
    "retired": pgettext_lazy("embedding model", "retired"),
}


class ReplayForm(forms.Form):
    kind = forms.ChoiceField(choices=CANDIDATE_KINDS, label=gettext_lazy("Candidate"))
    version = forms.TypedChoiceField(
        coerce=int, required=False, label=gettext_lazy("Version"), empty_value=None
    )
    model = forms.CharField(max_length=200, required=False, label=gettext_lazy("Model"))
    embedding_model = forms.ChoiceField(required=False, label=gettext_lazy("Embedding model"))

    def __init__(self, *args, suite: EvalSuite, **kwargs):
        super().__init__(*args, **kwargs)
        versions = (
            TemplateVersion.objects.filter(template_id=suite.template_id).order_by("-number")
            if suite.template_id
            else TemplateVersion.objects.none()
        )
        self.fields["version"].choices = [("", "—")] + [
            (v.pk, f"v{v.number} ({v.get_status_display().lower()})") for v in versions
        ]
        # The organization's embedding models, with where each stands for it (building,
        # active, retired); the model itself is instance-wide and has no status.
        uses = OrganizationEmbeddingModel.objects.filter(organization=suite.organization_id)
        self.fields["embedding_model"].choices = [("", "—")] + [
            (
                use.model_id,
                f"{use.model_id} ({EMBEDDING_STATUS_WORDS.get(use.status, use.status)})",
            )
            for use in uses.order_by("model_id")
        ]

    def candidate(self) -> dict:
        data = self.cleaned_data
        kind = data["kind"]
        if kind == "template_version":
            return {"kind": kind, "version": data.get("version")}
        if kind == "model":
            return {"kind": kind, "model_settings": {"model": data.get("model", "").strip()}}
        if kind == "embedding":
            return {"kind": kind, "embedding_model": data.get("embedding_model") or None}
        return {"kind": "current"}


class SuiteForm(forms.Form):
    name = forms.CharField(max_length=200, label=gettext_lazy("Name"))
    kind = forms.ChoiceField(
        choices=EvalSuite.Kind.choices,
        initial=EvalSuite.Kind.CONVERSATION,
        label=gettext_lazy("Kind"),
    )
    template = forms.TypedChoiceField(
        coerce=int, required=False, empty_value=None, label=gettext_lazy("Template")
    )
    regression_threshold = forms.FloatField(
        min_value=0,
        max_value=1,
        initial=0.05,
        label=gettext_lazy("Regression threshold (fraction)"),
    )

    def __init__(self, *args, actor, **kwargs):
        super().__init__(*args, **kwargs)
        self.templates = {
            t.pk: t for t in restricted_for(actor, AgentTemplate, "view").order_by("name", "pk")
        }
        self.fields["template"].choices = [("", _("No template"))] + [
            (pk, t.name) for pk, t in self.templates.items()
        ]


class FromTurnForm(forms.Form):
    suite = forms.IntegerField(min_value=1)
    run = forms.IntegerField(min_value=1)
    required_facts = forms.CharField(required=False, widget=forms.Textarea)

    def facts(self) -> list[str]:
        text = self.cleaned_data.get("required_facts") or ""
        return [line.strip() for line in text.splitlines() if line.strip()]


def _suite_or_404(request, pk: int) -> EvalSuite:
    return get_object_or_404(
        restricted(request, EvalSuite, "view").select_related("template"), pk=pk
    )


@gate("evaluation.view")
def evaluation_home(request):
    configured = gates.gates_of(request.actor.organization)
    return render(
        request,
        "console/evaluation/home.html",
        {
            "gates": [
                {"key": key, "on": configured[key], "label": label, "help": help_text}
                for key, (label, help_text) in GATE_LABELS.items()
            ],
            "suites": selectors.suites_for(request.actor),
            "overrides": selectors.gate_overrides(request.actor.organization.pk, limit=20),
            "can_manage": request.actor.has("evaluation.manage"),
            "can_set_gates": request.actor.has("organization.manage"),
            "suite_form": SuiteForm(actor=request.actor)
            if request.actor.has("evaluation.manage")
            else None,
        },
    )


@gate("evaluation.manage")
@require_POST
def suite_create(request):
    form = SuiteForm(request.POST, actor=request.actor)
    if not form.is_valid():
        messages.error(request, "A suite needs a name, a kind and a threshold between 0 and 1.")
        return redirect("console:evaluation")
    data = form.cleaned_data
    try:
        suite = services.suite_create(
            actor=request.actor,
            name=data["name"],
            kind=data["kind"],
            template=form.templates.get(data["template"]),
            regression_threshold=data["regression_threshold"],
        )
    except CadreError as error:
        messages.error(request, error.message)
        return redirect("console:evaluation")
    messages.success(request, _("The suite “%(name)s” was created.") % {"name": suite.name})
    return redirect("console:evaluation_suite", pk=suite.pk)


@gate("organization.manage")
@require_POST
def evaluation_gates_save(request):
    wanted = {key: request.POST.get(key) == "on" for key in gates.GATES}
    try:
        gates.evaluation_gates_set(actor=request.actor, gates=wanted)
    except CadreError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, _("The evaluation gates were saved."))
    return redirect("console:evaluation")


@gate("evaluation.manage")
@require_POST
def retrieval_suite_build(request):
    try:
        suite, added = recall.retrieval_suite_refresh(actor=request.actor)
    except CadreError as error:
        messages.error(request, error.message)
        return redirect("console:evaluation")
    messages.success(
        request,
        ngettext(
            "%(added)s case added from rated turns; the suite holds %(total)s.",
            "%(added)s cases added from rated turns; the suite holds %(total)s.",
            added,
        )
        % {"added": added, "total": suite.cases.count()},
    )
    return redirect("console:evaluation_suite", pk=suite.pk)


@gate("evaluation.view")
def suite_detail(request, pk: int):
    suite = _suite_or_404(request, pk)
    cases = selectors.cases_for(request.actor).filter(suite=suite).select_related("member")
    runs = list(EvalRun.objects.filter(suite=suite).order_by("-created_at", "-pk")[:20])
    for run in runs:
        run.candidate_label = side_label(run.candidate)
        run.baseline_label = side_label(run.baseline)
    can_manage = request.actor.has("evaluation.manage")
    return render(
        request,
        "console/evaluation/suite.html",
        {
            "suite": suite,
            "page": paginate(request, cases),
            "query": query_without_page(request),
            "runs": runs,
            "can_manage": can_manage,
            "form": ReplayForm(suite=suite) if can_manage else None,
        },
    )


@gate("evaluation.manage")
@require_POST
def replay_start(request, pk: int):
    suite = _suite_or_404(request, pk)
    form = ReplayForm(request.POST, suite=suite)
    if not form.is_valid():
        messages.error(request, _("Choose what to replay against."))
        return redirect("console:evaluation_suite", pk=suite.pk)
    try:
        run = services.eval_run_start(actor=request.actor, suite=suite, candidate=form.candidate())
    except (CadreError, BudgetExceeded) as error:  # a hard budget refused the replay
        messages.error(request, error.message)
        return redirect("console:evaluation_suite", pk=suite.pk)
    messages.success(request, _("The replay is queued; this page shows it as it finishes."))
    return redirect("console:evaluation_run", pk=run.pk)


@gate("evaluation.view")
def run_detail(request, pk: int):
    run = get_object_or_404(
        restricted(request, EvalRun, "view").select_related("suite", "created_by"),
        pk=pk,
    )
    results = selectors.results_for(request.actor, run).select_related("case")
    if request.GET.get("regressed") == "1":
        results = results.filter(regressed=True)
    return render(
        request,
        "console/evaluation/run.html",
        {
            "run": run,
            "suite": run.suite,
            "baseline_label": side_label(run.baseline),
            "candidate_label": side_label(run.candidate),
            "policy_actions": POLICY_ACTIONS,
            "summary": run.summary or {},
            "page": paginate(request, results, per_page=20),
            "query": query_without_page(request),
            "regressed_only": request.GET.get("regressed") == "1",
            "overrides": selectors.gate_overrides(run.organization_id, replay_id=run.pk),
            "finished": run.status in (EvalRun.Status.COMPLETED, EvalRun.Status.FAILED),
        },
    )


@gate("evaluation.manage")
@require_POST
def case_from_turn(request):
    """ "Add to evaluation" on a transcript turn: the case is saved by the from-turn service."""
    form = FromTurnForm(request.POST)
    back = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}):
        back = reverse("console:evaluation")
    if not form.is_valid():
        messages.error(request, _("Choose a suite to add the turn to."))
        return redirect(back)
    suite = restricted(request, EvalSuite, "view").filter(pk=form.cleaned_data["suite"])
    run = in_organization(request, Run).filter(pk=form.cleaned_data["run"])
    if not suite.exists() or not run.exists():
        messages.error(request, _("That suite or turn is not there."))
        return redirect(back)
    try:
        case = services.case_from_turn(
            actor=request.actor,
            suite=suite.get(),
            run=run.get(),
            expectations={"required_facts": form.facts()} if form.facts() else None,
        )
    except CadreError as error:
        messages.error(request, error.message)
        return redirect(back)
    messages.success(
        request,
        _("The turn was added to “%(suite)s” as case %(case)s.")
        % {"suite": case.suite.name, "case": case.pk},
    )
    return redirect(back)


urlpatterns = [
    path("evaluation/", evaluation_home, name="evaluation"),
    path("evaluation/gates/", evaluation_gates_save, name="evaluation_gates"),
    path("evaluation/suites/new/", suite_create, name="evaluation_suite_create"),
    path("evaluation/retrieval-suite/", retrieval_suite_build, name="evaluation_retrieval_suite"),
    path("evaluation/suites/<int:pk>/", suite_detail, name="evaluation_suite"),
    path("evaluation/suites/<int:pk>/replay/", replay_start, name="evaluation_replay"),
    path("evaluation/runs/<int:pk>/", run_detail, name="evaluation_run"),
    path("evaluation/cases/from-turn/", case_from_turn, name="evaluation_case_from_turn"),
]
