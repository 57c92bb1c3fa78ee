"""A model-judged rubric for replay reply checks: each side's reply is judged by the suite's
judge model (a loopback OpenAI-compatible fake here) for a JSON verdict that is stored with its
reasons, counts in the side's pass and shows in the API and the console; a malformed verdict or
an unreachable judge is a recorded judge_error, never a failed replay."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from cadre.agents import providers
from cadre.agents import services as agents
from cadre.agents.evaluation import services
from cadre.agents.evaluation.models import EvalResult, EvalRun
from cadre.errors import InvalidInput
from tests.agents.fake_models import FakeModelServer
from tests.console.agents_setup import client as console_client

pytestmark = pytest.mark.django_db

RUBRIC = "The reply must state the standard discount and stay polite."


@pytest.fixture
def judge_server():
    with FakeModelServer() as server:
        yield server


def _suite(owner, template, server, name="Judged turns"):
    config = agents.provider_config_create(
        actor=owner,
        name=f"judge {name}",
        kind="openai_compatible",
        base_url=server.base_url,
        api_key="sk-test",
        default_model="judge-1",
    )
    # Only the judge: the template's replies stay offline (an organization's first provider
    # would be its default).
    providers.provider_config_set_default(actor=owner, config=None)
    judge = {"provider_config": config.pk, "model": "judge-1", "rubric": RUBRIC}
    return services.suite_create(actor=owner, name=name, template=template, judge=judge)


def _replay(owner, suite):
    services.case_create(
        actor=owner,
        suite=suite,
        data={
            "input": "What is the standard discount?",
            "required_facts": ["5 percent"],
            "reference_reply": "The standard discount is 5 percent.",
        },
    )
    run = services.eval_run_start(
        actor=owner, suite=suite, candidate={"kind": "model", "model_settings": {"model": "x"}}
    )
    assert services.eval_run_execute(run.pk) == EvalRun.Status.COMPLETED
    return EvalResult.objects.get(run=run)


def _verdict(passed: bool, score: float, reasons: str) -> dict:
    return {"text": json.dumps({"pass": passed, "score": score, "reasons": reasons})}


def test_each_side_is_judged_with_reasons_and_the_verdict_counts(
    owner, template, published, judge_server
):
    judge_server.script = [
        _verdict(True, 0.9, "States 5 percent politely."),
        _verdict(False, 0.2, "Curt; misses the tone the rubric asks for."),
    ]
    result = _replay(owner, _suite(owner, template, judge_server))

    assert result.baseline["judge"] == {
        "pass": True,
        "score": 0.9,
        "reasons": "States 5 percent politely.",
    }
    assert result.candidate["judge"]["pass"] is False
    # The rule checks pass on both sides; the judge's fail makes the candidate's case fail.
    assert result.candidate["checks"]["missing_facts"] == []
    assert result.baseline_passed is True and result.candidate_passed is False
    assert result.regressed is True
    asked = judge_server.requests[0]["body"]
    assert asked["model"] == "judge-1"
    prompt = json.loads(asked["messages"][-1]["content"])
    assert prompt["rubric"] == RUBRIC and prompt["reference_reply"].endswith("5 percent.")
    assert prompt["reply"] == result.baseline["reply"]


def test_malformed_judge_output_is_a_judge_error_and_the_rules_decide(
    owner, template, published, judge_server
):
    judge_server.script = [
        {"text": "I think it is fine."},
        {"text": json.dumps({"pass": "yes", "score": 3})},
    ]
    result = _replay(owner, _suite(owner, template, judge_server))
    for side in (result.baseline, result.candidate):
        assert side["judge"]["error"] == "judge_error" and side["judge"]["detail"]
    assert result.baseline_passed is True and result.candidate_passed is True


def test_an_unreachable_judge_does_not_fail_the_replay(owner, template, published, judge_server):
    suite = _suite(owner, template, judge_server)
    judge_server.__exit__(None, None, None)  # the judge's endpoint is gone
    result = _replay(owner, suite)
    assert result.run.status == EvalRun.Status.COMPLETED
    assert result.candidate["judge"]["error"] == "judge_error"
    assert result.candidate_passed is True


def test_a_judge_needs_a_rubric_and_a_provider_of_the_organization(owner, template, published):
    with pytest.raises(InvalidInput):
        services.suite_create(actor=owner, name="a", judge={"provider": "offline"})
    with pytest.raises(InvalidInput):
        services.suite_create(
            actor=owner, name="b", judge={"provider_config": 99999, "rubric": RUBRIC}
        )
    suite = services.suite_create(
        actor=owner, name="c", judge={"provider": "offline", "rubric": RUBRIC}
    )
    assert suite.judge == {"provider": "offline", "rubric": RUBRIC}
    cleared = services.suite_update(actor=owner, suite=suite, judge=None)
    assert cleared.judge == {}


def test_the_api_and_the_console_show_the_judges_verdicts(
    alice, client_for, owner, template, published, judge_server
):
    judge_server.script = [_verdict(True, 0.8, "Correct and polite."), {"text": "no json"}]
    suite = _suite(owner, template, judge_server)
    result = _replay(owner, suite)

    api = client_for(alice)
    shown = api.get(f"/api/v1/evaluation/suites/{suite.pk}/").json()
    assert shown["judge"]["rubric"] == RUBRIC
    results = api.get(f"/api/v1/evaluation/runs/{result.run_id}/results/").json()["results"]
    assert results[0]["judge"]["baseline"] == {
        "passed": True,
        "score": 0.8,
        "reasons": "Correct and polite.",
    }
    assert results[0]["judge"]["candidate"]["error"] == "judge_error"

    page = console_client(alice).get(reverse("console:evaluation_run", args=[result.run_id]))
    html = page.content.decode()
    assert page.status_code == 200
    assert 'data-judge="baseline"' in html and "Correct and polite." in html
    assert "judge_error" in html

    created = api.post(
        "/api/v1/evaluation/suites/",
        {"name": "API judged", "judge": {"provider": "offline", "rubric": RUBRIC}},
        format="json",
    )
    assert created.status_code == 201, created.content
    assert created.json()["judge"] == {"provider": "offline", "rubric": RUBRIC}
