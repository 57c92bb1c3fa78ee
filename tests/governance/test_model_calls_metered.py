"""Every model call is metered, budgeted and outside transactions: the one client refuses a call
that names no account or is made inside a database transaction (nothing is sent), every call
site in the code is a charged one (an AST walk), and template generation and evaluation
replays are charged to who started them and refused by a hard budget where they started."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import transaction

from cadre.agents import providers
from cadre.agents import services as agents
from cadre.agents.evaluation import services as evaluation
from cadre.agents.evaluation.models import EvalRun
from cadre.agents.models import TemplateVersion
from cadre.governance import budgets
from cadre.governance.models import AuditEvent, Budget, UsageRecord
from cadre.llm.metering import (
    Account,
    ModelCallInTransaction,
    UnchargedModelCall,
    charged_to,
)
from cadre.llm.openai_compatible import OpenAICompatibleProvider
from cadre.tenancy.actors import member_actor
from tests.agents.fake_models import FakeModelServer

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [ROOT / "platform", ROOT / "hub", ROOT / "connectors"]

# Every call of the model client outside cadre.llm, and what it is charged to. A new call site
# fails the walk below until it is charged and listed here.
CHARGED_CALL_SITES = {
    "cadre/agents/runtime/steps/model.py::call": "the run (engine: charged_to(run_account))",
    "cadre/agents/runtime/lifecycle/warm.py::prompt_cache_warm": "the run's, prompt_cache.warm",
    "cadre/agents/hooks/compaction.py::model_items": "the run's hook account, compaction",
    "cadre/agents/evaluation/replay.py::replay_case": "who started the replay, evaluation.replay",
    "cadre/agents/evaluation/judge.py::judge_reply": "who started the replay, evaluation.judge",
    "cadre/agents/generation.py::model_draft": "the acting member and template, template.generate",
    "cadre/skills/distill.py::_model_check": "the organization, skills.distill",
    "cadre/skills/drafting.py::ask_json": "skills.distill, skills.scoring or skills.drafting",
    "cadre/memory/extraction.py::extract": "memory.extraction (extraction.charged)",
    "cadre/memory/dedup.py::judge": "memory.dedup (extraction.charged)",
    "cadre/memory/services/feedback.py::_feedback_affected": "memory.feedback",
}
CLIENT_CALLS = {"chat", "chat_json"}
# The adapters' own methods: called only by the client (cadre.llm), never around it.
BYPASSES = {"complete", "stream", "_chat"}


class _CallSites(ast.NodeVisitor):
    """Calls of the model client, each named by its innermost enclosing function."""

    def __init__(self, relative: str):
        self.relative, self.functions, self.found = relative, ["<module>"], []

    def visit_FunctionDef(self, node):
        self.functions.append(node.name)
        self.generic_visit(node)
        self.functions.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Call(self, node):
        target = node.func
        name = getattr(target, "attr", None) or getattr(target, "id", "")
        site = f"{self.relative}::{self.functions[-1]}"
        if name == "uncharged":
            self.found.append((site, "uncharged"))
        elif name in CLIENT_CALLS:
            self.found.append((site, "client"))
        elif (
            name in BYPASSES
            and isinstance(target, ast.Attribute)
            # httpx's client.stream("GET", url) is an HTTP request, not a model call
            and not ast.unparse(target.value).rsplit(".", 1)[-1].endswith("client")
        ):
            self.found.append((site, "bypass"))
        self.generic_visit(node)


def _call_sites():
    """(site, kind) for every call of the model client in the code, outside cadre.llm."""
    found = []
    for base in SOURCES:
        for path in sorted(base.rglob("*.py")):
            relative = path.relative_to(base).as_posix()
            if "/tests/" in f"/{relative}" or relative.startswith("cadre/llm/"):
                continue
            visitor = _CallSites(relative)
            visitor.visit(ast.parse(path.read_text(encoding="utf-8")))
            found += visitor.found
    return found


def test_every_model_call_in_the_code_goes_through_the_charged_client():
    sites = _call_sites()
    bypasses = sorted(site for site, kind in sites if kind == "bypass")
    assert bypasses == [], f"model adapters called around the metered client: {bypasses}"
    exempt = sorted(site for site, kind in sites if kind == "uncharged")
    assert exempt == [], f"uncharged() is for the adapters' tests only: {exempt}"
    clients = {site for site, kind in sites if kind == "client"}
    unlisted = sorted(clients - set(CHARGED_CALL_SITES))
    assert unlisted == [], f"model calls not known to be charged: {unlisted}"
    assert sorted(set(CHARGED_CALL_SITES) - clients) == [], "listed call sites that are gone"


def test_a_call_that_names_no_account_is_refused_and_sends_nothing():
    with FakeModelServer([{"text": "never sent"}]) as server:
        provider = OpenAICompatibleProvider(model="m", base_url=server.base_url)
        with pytest.raises(UnchargedModelCall):
            provider.chat([{"role": "user", "content": "hi"}])
    assert server.requests == []


@pytest.mark.django_db
def test_a_call_inside_a_transaction_is_refused_and_sends_nothing(alice):
    account = Account(organization_id=alice.organization_id, purpose="test")
    with FakeModelServer([{"text": "never sent"}]) as server:
        provider = OpenAICompatibleProvider(model="m", base_url=server.base_url)
        with charged_to(account), transaction.atomic(), pytest.raises(ModelCallInTransaction):
            provider.chat([{"role": "user", "content": "hi"}])
        # The same call outside the transaction is sent, and metered.
        with charged_to(account):
            provider.chat([{"role": "user", "content": "hi"}])
    assert len(server.requests) == 1
    assert UsageRecord.objects.get().purpose == "test"


DRAFT = {
    "sop": "# SOP\n- Prepare the account history",
    "agent_md": "# Persona\nYou help.\n# Instructions\n- Be brief\n# Boundaries\n- None",
    "user_md_template": "# About {{member.display_name}}",
}


def _model_template(owner, server):
    config = agents.provider_config_create(
        actor=owner,
        name="vLLM",
        kind="openai_compatible",
        base_url=server.base_url,
        default_model="qwen",
    )
    return agents.template_create(
        actor=owner,
        name="Ops",
        code="ops",
        model_settings={"provider_config": config.pk, "model": "qwen"},
    )


def _generate(client, template):
    doc = SimpleUploadedFile("playbook.md", b"# Visits\n- Prepare the account history\n")
    return client.post(
        f"/api/v1/templates/{template.pk}/generate/", {"files": [doc]}, format="multipart"
    )


def _budget_at_its_limit(owner, limit=1000):
    budget = budgets.budget_create(
        actor=owner,
        scope=Budget.Scope.ORGANIZATION,
        period=Budget.Period.MONTHLY,
        metric=Budget.Metric.TOKENS,
        limit=limit,
    )
    Budget.objects.filter(pk=budget.pk).update(used_tokens=limit)  # used up this month
    return budget


@pytest.mark.django_db
def test_template_generation_is_charged_to_the_member_and_the_template(alice, client_for):
    owner = member_actor(alice)
    with FakeModelServer([{"text": json.dumps(DRAFT)}]) as server:
        template = _model_template(owner, server)
        TemplateVersion.objects.filter(template=template).update(status="published")
        response = _generate(client_for(alice), template)
    assert response.status_code == 201, response.json()
    assert response.json()["generated_from"]["mode"] == "model:qwen"
    record = UsageRecord.objects.get()
    assert record.purpose == "template.generate"
    assert (record.member_id, record.template_id) == (alice.pk, template.pk)
    assert record.status == UsageRecord.Status.SETTLED


@pytest.mark.django_db
def test_a_hard_budget_at_its_limit_refuses_template_generation(alice, client_for):
    owner = member_actor(alice)
    with FakeModelServer([{"text": json.dumps(DRAFT)}]) as server:
        template = _model_template(owner, server)
        TemplateVersion.objects.filter(template=template).update(status="published")
        _budget_at_its_limit(owner)
        versions = TemplateVersion.objects.filter(template=template).count()
        response = _generate(client_for(alice), template)
    assert response.status_code == 429, response.json()
    error = response.json()["error"]
    assert error["code"] == "budget_exceeded"
    assert "monthly tokens budget of the organization would be exceeded" in error["message"]
    assert server.requests == []  # the model server received nothing
    assert TemplateVersion.objects.filter(template=template).count() == versions
    assert not AuditEvent.objects.filter(action="template.generate").exists()
    assert not UsageRecord.objects.exists()


def _judged_suite(owner, template, server):
    config = agents.provider_config_create(
        actor=owner,
        name="judge",
        kind="openai_compatible",
        base_url=server.base_url,
        default_model="judge-1",
    )
    # Only the judge: the replayed replies stay offline (an organization's first provider
    # would be its default).
    providers.provider_config_set_default(actor=owner, config=None)
    suite = evaluation.suite_create(
        actor=owner,
        name="Judged",
        template=template,
        judge={"provider_config": config.pk, "model": "judge-1", "rubric": "Be polite."},
    )
    evaluation.case_create(actor=owner, suite=suite, data={"input": "What is the discount?"})
    return suite


CANDIDATE = {"kind": "model", "model_settings": {"model": "x"}}


@pytest.mark.django_db
def test_a_hard_budget_at_its_limit_refuses_an_evaluation_replay_where_it_starts(alice, client_for):
    owner = member_actor(alice)
    template = agents.template_create(actor=owner, name="Ops", code="ops")
    with FakeModelServer() as server:
        suite = _judged_suite(owner, template, server)
        _budget_at_its_limit(owner)
        response = client_for(alice).post(
            "/api/v1/evaluation/runs/", {"suite": suite.pk, "candidate": CANDIDATE}, format="json"
        )
    assert response.status_code == 429, response.json()
    assert response.json()["error"]["code"] == "budget_exceeded"
    assert not EvalRun.objects.exists()
    assert server.requests == []


@pytest.mark.django_db
def test_a_replay_and_its_judge_are_charged_and_stopped_by_a_hard_budget(alice):
    owner = member_actor(alice)
    template = agents.template_create(actor=owner, name="Ops", code="ops")
    verdict = {"text": json.dumps({"pass": True, "score": 1, "reasons": "polite"})}
    with FakeModelServer([verdict, verdict]) as server:
        suite = _judged_suite(owner, template, server)
        first = evaluation.eval_run_start(actor=owner, suite=suite, candidate=CANDIDATE)
        assert evaluation.eval_run_execute(first.pk) == EvalRun.Status.COMPLETED
        judged = len(server.requests)
        # Both sides' replies were judged, each call charged to who started the replay.
        judge_calls = UsageRecord.objects.filter(purpose="evaluation.judge")
        assert judged == judge_calls.count() == 2
        assert UsageRecord.objects.filter(purpose="evaluation.replay").count() == 2
        assert {(r.member_id, r.template_id) for r in UsageRecord.objects.all()} == {
            (alice.pk, template.pk)
        }
        second = evaluation.eval_run_start(actor=owner, suite=suite, candidate=CANDIDATE)
        _budget_at_its_limit(owner)  # set after the start: the replay's first call is refused
        assert evaluation.eval_run_execute(second.pk) == EvalRun.Status.FAILED
    assert len(server.requests) == judged
    second.refresh_from_db()
    assert second.error.startswith("budget_exceeded: The monthly tokens budget")
