"""Evaluation suites, their cases, replays (EvalRun) and per-case results (EvalResult).

Everything a case holds is masked as transcripts are: a case saved from a turn keeps the text
the model saw (placeholders), an imported case is masked on import with one vault per case, so
the same value gets the same placeholder across its input, turns, tool results and facts.
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy, pgettext_lazy

from cadre.agents.models import AgentTemplate, Run
from cadre.tenancy.models import Member, TenantModel


class EvalSuite(TenantModel):
    """A set of cases with a regression threshold: a candidate whose pass rate falls more than
    `regression_threshold` (a fraction, 0.05 = 5 points) below the baseline's regresses."""

    # evaluation.view / .manage: not template.view, which every employee holds — cases are
    # saved from people's turns and replies quote the memories their scopes reach.
    resource = "evaluation"

    class Kind(models.TextChoices):
        CONVERSATION = "conversation", gettext_lazy("Conversation")
        RETRIEVAL = "retrieval", gettext_lazy("Retrieval")

    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.CONVERSATION)
    description = models.TextField(blank=True)
    # The template whose published version is the baseline (and whose drafts are candidates).
    template = models.ForeignKey(
        AgentTemplate, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    regression_threshold = models.FloatField(default=0.05)
    # A model-judged rubric for the replies ({} = rule checks only): {"provider_config"?,
    # "provider"?, "model"?, "rubric"} (see evaluation/judge.py).
    judge = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(
        Member, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["organization", "name"], name="evalsuite_unique_name")
        ]
        ordering = ["name", "pk"]

    def __str__(self) -> str:
        return self.name


class EvalCase(TenantModel):
    """One turn to replay and what good looks like.

    `conversation`: the turns before it, oldest first `{"role", "content"}`; `scopes`: the
    memory scope keys it reads; `as_of`: the moment whose memories it sees; `tool_results`:
    `[{"name", "arguments", "result"}]` answered instead of running the tool; `expectations`:
    `{"reference_reply", "required_facts", "forbidden_facts", "expected_tool_calls":
    [{"name", "arguments"?}], "expected_policy": "allow"|"deny"|…, "expected_memories": [ids]}`.
    """

    resource = "evaluation"

    class Source(models.TextChoices):
        TURN = "turn", gettext_lazy("Saved from a turn")
        IMPORT = "import", gettext_lazy("Imported")
        MANUAL = "manual", pgettext_lazy("evaluation case source", "Written")

    suite = models.ForeignKey(EvalSuite, on_delete=models.CASCADE, related_name="cases")
    title = models.CharField(max_length=200, blank=True)
    input_text = models.TextField()
    conversation = models.JSONField(default=list, blank=True)
    member = models.ForeignKey(
        Member, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    scopes = models.JSONField(default=list, blank=True)
    as_of = models.DateTimeField(default=timezone.now)
    tool_results = models.JSONField(default=list, blank=True)
    expectations = models.JSONField(default=dict, blank=True)
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.MANUAL)
    source_run = models.ForeignKey(
        Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_by = models.ForeignKey(
        Member, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["pk"]


class EvalRun(TenantModel):
    """One replay of a suite: the baseline and the candidate, each `{"kind", …}` —
    `{"kind": "current"}` (the template's published version as configured),
    `{"kind": "template_version", "version": id}`, `{"kind": "model", "model_settings": {…}}`
    or `{"kind": "embedding", "embedding_model": "<id>"}`; `summary` holds the aggregate."""

    resource = "evaluation"

    class Status(models.TextChoices):
        QUEUED = "queued", gettext_lazy("Queued")
        RUNNING = "running", gettext_lazy("Running")
        COMPLETED = "completed", gettext_lazy("Completed")
        FAILED = "failed", gettext_lazy("Failed")

    class Verdict(models.TextChoices):
        PENDING = "", gettext_lazy("Pending")
        PASS = "pass", gettext_lazy("Pass")
        REGRESSION = "regression", gettext_lazy("Regression")

    suite = models.ForeignKey(EvalSuite, on_delete=models.CASCADE, related_name="runs")
    baseline = models.JSONField(default=dict)
    candidate = models.JSONField(default=dict)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    verdict = models.CharField(max_length=16, choices=Verdict.choices, blank=True, default="")
    summary = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(
        Member, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]


class EvalResult(models.Model):
    """One case replayed on both sides: what each side did (`baseline`, `candidate`: reply,
    memories sent, tool calls, stubbed calls, policy, usage, latency, checks) and how they
    compare (`comparison`)."""

    run = models.ForeignKey(EvalRun, on_delete=models.CASCADE, related_name="results")
    case = models.ForeignKey(EvalCase, on_delete=models.CASCADE, related_name="+")
    baseline = models.JSONField(default=dict)
    candidate = models.JSONField(default=dict)
    comparison = models.JSONField(default=dict)
    baseline_passed = models.BooleanField(default=False)
    candidate_passed = models.BooleanField(default=False)
    regressed = models.BooleanField(default=False)  # passed on the baseline, fails on the candidate
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["pk"]
        constraints = [
            models.UniqueConstraint(fields=["run", "case"], name="evalresult_one_per_case")
        ]

    def __str__(self) -> str:
        return f"case {self.case_id} of evaluation run {self.run_id}"
