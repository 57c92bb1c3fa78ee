"""Budgets in agent runs: a run a hard budget refuses never calls the model (the loopback
model server records no request) and says why in the chat; the usage of runs equals the sum of
the per-call records, through the usage API and its CSV export."""

from __future__ import annotations

import csv
import io
from decimal import Decimal

import pytest
from django.db.models import Sum

from cadre.agents import services
from cadre.agents.models import Run, Step
from cadre.agents.runtime.lifecycle import execution as engine
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.governance import budgets
from cadre.governance.models import Budget, UsageRecord
from cadre.tenancy.actors import member_actor
from tests.agents.conftest import publish
from tests.agents.fake_models import FakeModelServer


def _agent(owner, bob, server, prices=None):
    config = services.provider_config_create(
        actor=owner,
        name="vLLM",
        kind="openai_compatible",
        base_url=server.base_url,
        default_model="qwen",
        prices=prices or {},
    )
    template = services.template_create(
        actor=owner,
        name="Ops",
        code="ops",
        model_settings={
            "provider_config": config.pk,
            "model": "qwen",
            "parameters": {"max_tokens": 50},
        },
        hooks={"assemble_context": [{"name": "memory_retrieval", "enabled": False}]},
    )
    publish(owner, template.versions.get())
    deployment = services.deployment_create(
        actor=owner, name="Ops", template=template, members=[bob]
    )
    return template, deployment.agents.get()


@pytest.mark.django_db
def test_a_run_over_a_hard_budget_is_refused_before_the_model_call(owner, bob):
    with FakeModelServer([{"text": "first answer"}, {"text": "never sent"}]) as server:
        template, agent = _agent(owner, bob, server)
        budgets.budget_create(
            actor=owner,
            scope=Budget.Scope.TEMPLATE,
            template_id=template.pk,
            period=Budget.Period.DAILY,
            metric=Budget.Metric.TOKENS,
            limit=200,
        )
        first = runtime.run_start(actor=member_actor(bob), agent=agent, text="hello")
        assert engine.run_execute(first.pk) == Run.Status.COMPLETED
        assert len(server.requests) == 1
        # 18 tokens used; the next call reserves its input and its 50-token cap: 200 is
        # passed only if more than 132 fit — make the limit tight and try again.
        budget = Budget.objects.get()
        budgets.budget_update(actor=owner, budget=budget, limit=40)
        second = runtime.run_start(actor=member_actor(bob), agent=agent, text="again")
        assert engine.run_execute(second.pk) == Run.Status.COMPLETED
    # The model never saw the second run.
    assert len(server.requests) == 1
    second.refresh_from_db()
    assert second.output["refused_code"] == "budget_exceeded"
    assert second.output["text"].startswith("I can't run this request: The daily tokens budget")
    assert "template Ops" in second.output["text"]
    step = second.steps.get(kind=Step.Kind.MODEL_CALL)
    assert step.status == Step.Status.FAILED and "budget" in step.error
    assert (second.tokens_in, second.tokens_out) == (0, 0)
    # The chat shows it: the reply event carries the refusal.
    replies = [event.data["text"] for event in second.events.filter(kind="reply")]
    assert replies == [second.output["text"]]
    assert UsageRecord.objects.count() == 1  # the first run's call only


@pytest.mark.django_db
def test_run_usage_equals_the_per_call_records_and_the_api_sums(owner, bob, alice, client_for):
    script = [
        {"text": "a", "usage": {"prompt_tokens": 30, "completion_tokens": 5}},
        {"text": "b", "usage": {"prompt_tokens": 40, "completion_tokens": 9}},
        {"text": "c", "usage": {"prompt_tokens": 50, "completion_tokens": 11}},
    ]
    with FakeModelServer(script) as server:
        template, agent = _agent(
            owner, bob, server, prices={"input": "1", "models": {"qwen": {"output": "3"}}}
        )
        for text in ("one", "two", "three"):
            run = runtime.run_start(actor=member_actor(bob), agent=agent, text=text)
            assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    runs = Run.objects.aggregate(i=Sum("tokens_in"), o=Sum("tokens_out"), c=Sum("cost"))
    records = UsageRecord.objects.filter(status="settled")
    sums = records.aggregate(i=Sum("input_tokens"), o=Sum("output_tokens"), c=Sum("cost"))
    assert (runs["i"], runs["o"]) == (sums["i"], sums["o"]) == (120, 25)
    # 120 x 1 + 25 x 3 per million tokens.
    assert runs["c"] == sums["c"] == Decimal("0.000195")
    assert set(records.values_list("member_id", "template_id", "purpose")) == {
        (bob.pk, template.pk, "run")
    }
    client = client_for(alice)
    by_template = client.get("/api/v1/usage/summary/?by=template").json()
    assert by_template == [
        {
            "key": str(template.pk),
            "label": "Ops",
            "calls": 3,
            "input_tokens": 120,
            "cached_input_tokens": 0,
            "cache_write_tokens": 0,
            "output_tokens": 25,
            "total_tokens": 145,
            "cost": "0.000195",
        }
    ]
    by_member = client.get("/api/v1/usage/summary/?by=member").json()
    assert [(row["label"], row["total_tokens"]) for row in by_member] == [("Bob", 145)]
    exported = client.get("/api/v1/usage/export/")
    assert exported["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(exported.content.decode())))
    assert len(rows) == 3
    assert sum(int(r["input_tokens"]) + int(r["output_tokens"]) for r in rows) == 145
    assert {r["member"] for r in rows} == {"Bob"} and {r["model"] for r in rows} == {"qwen"}
