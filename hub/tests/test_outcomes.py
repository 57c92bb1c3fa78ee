"""Outcomes: a run's skills succeed or fail (feedback, else the run's status), per-version
success rates with counts in the Hub API, search ranking by success, and the drop alert."""

from __future__ import annotations

import pytest

from cadre.agents.models import Run
from cadre.agents.runtime.lifecycle import execution as engine
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.errors import NotPermitted
from cadre.governance import alerts
from cadre.governance.models import AuditEvent
from cadre.tenancy.actors import member_actor
from hub import outcomes, selectors
from hub.models import SkillUsage
from hub.tests.agent_setup import deploy, template_with_skills
from hub.tests.factories import publish
from hub.tests.skill_samples import skill_files

pytestmark = pytest.mark.django_db


@pytest.fixture
def agent(alice, bob):
    publish(alice, version="1.0.0")
    template = template_with_skills(alice, [{"package": "@acme/pdf-tools", "range": "^1"}])
    _, by_member = deploy(alice, template, bob)
    return by_member[bob.pk]


def _run(bob, agent, text="merge the pdf forms") -> Run:
    run = runtime.run_start(actor=member_actor(bob), agent=agent, text=text)
    assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    return run


def _record_outcomes(bob, agent, version, results: list[str]) -> None:
    """Arrange many finished runs that had `version` in context (status = outcome)."""
    for result in results:
        run = runtime.run_start(actor=member_actor(bob), agent=agent, text="merge pdf")
        Run.objects.filter(pk=run.pk).update(
            status=Run.Status.COMPLETED if result == "success" else Run.Status.FAILED
        )
        SkillUsage.objects.create(
            organization=agent.organization,
            run=run,
            agent=agent,
            package=version.package,
            version=version,
        )


def test_success_rate_per_version_from_run_status_and_feedback(client_for, alice, bob, agent):
    runs = [_run(bob, agent) for _ in range(3)]
    runtime.run_rate(actor=member_actor(bob), run=runs[0], outcome="failure", note="wrong")
    newer = publish(alice, version="1.0.1")
    _run(bob, agent)
    rates = outcomes.version_success_rates([newer.pk])
    assert rates[newer.pk] == {"uses": 1, "successes": 1, "failures": 0, "success_rate": 1.0}
    response = client_for(bob).get("/api/v1/hub/skills/@acme/pdf-tools/versions/")
    assert response.status_code == 200
    by_version = {row["version"]: row["outcomes"] for row in response.json()["results"]}
    assert by_version["1.0.0"] == {
        "uses": 3,
        "successes": 2,
        "failures": 1,
        "success_rate": 0.6667,
    }
    assert by_version["1.0.1"]["success_rate"] == 1.0
    detail = client_for(bob).get("/api/v1/hub/skills/@acme/pdf-tools/").json()
    assert detail["stats"]["successes"] == 3 and detail["stats"]["failures"] == 1


def test_feedback_api_rates_the_runs_skills_and_is_audited(client_for, bob, agent):
    run = _run(bob, agent)
    response = client_for(bob).post(
        f"/api/v1/hub/runs/{run.pk}/feedback/",
        {"outcome": "failure", "note": "the merged file was empty"},
        format="json",
    )
    assert response.status_code == 200
    [skill] = response.json()["skills"]
    assert skill["package"] == "@acme/pdf-tools" and skill["outcome"] == "failure"
    event = AuditEvent.objects.get(action="skill.outcome")
    assert event.changes["skill"] == "@acme/pdf-tools" and event.changes["success"] is False
    listed = client_for(bob).get(f"/api/v1/hub/runs/{run.pk}/skills/").json()["results"]
    assert listed[0]["version"] == "1.0.0" and listed[0]["outcome"] == "failure"


def test_feedback_refused_for_bad_input_colleagues_and_outsiders(
    client_for, bob, charlie, make_member, agent
):
    run = _run(bob, agent)
    bad = client_for(bob).post(
        f"/api/v1/hub/runs/{run.pk}/feedback/", {"outcome": "great"}, format="json"
    )
    assert bad.status_code == 400 and bad.json()["error"]["details"]["outcome"]
    colleague = make_member()
    for member in (colleague, charlie):
        response = client_for(member).post(
            f"/api/v1/hub/runs/{run.pk}/feedback/", {"outcome": "success"}, format="json"
        )
        assert response.status_code == 404
    auditor = make_member(roles=["auditor"])  # sees every run, but it is not theirs to rate
    with pytest.raises(NotPermitted):
        runtime.run_rate(actor=member_actor(auditor), run=run, outcome="success")
    assert SkillUsage.objects.get(run=run).feedback == ""


def test_search_ranks_the_skill_that_succeeds_higher(alice, bob, agent):
    description = "Summarise a supplier contract and its renewal terms."
    older = publish(
        alice, name="contract-one", files=skill_files("contract-one", description=description)
    )
    newer = publish(
        alice, name="contract-two", files=skill_files("contract-two", description=description)
    )
    actor = member_actor(alice)
    before = [p.name for p, _ in selectors.search(actor, "supplier contract", semantic=False)]
    assert before[:2] == ["contract-one", "contract-two"]  # a tie goes to the older one
    _record_outcomes(bob, agent, older, ["failure"] * 8)
    _record_outcomes(bob, agent, newer, ["success"] * 8)
    after = [p.name for p, _ in selectors.search(actor, "supplier contract", semantic=False)]
    assert after[:2] == ["contract-two", "contract-one"]


def test_success_rate_drop_alert_fires_with_enough_samples(alice, bob, agent):
    first = publish(alice, version="1.0.1")
    second = publish(alice, version="1.0.2")
    rule = alerts.alert_rule_create(
        actor=member_actor(alice),
        name="skill drop",
        kind="skill_version_drop",
        params={"min_uses": 10, "drop": 0.2},
    )
    _record_outcomes(bob, agent, first, ["success"] * 9 + ["failure"])  # 90 %
    _record_outcomes(bob, agent, second, ["success"] * 5 + ["failure"] * 4)  # 9 samples
    assert alerts.alert_rule_evaluate(rule) == []  # not enough samples yet
    _record_outcomes(bob, agent, second, ["failure"])  # 10 samples, 50 %
    [alert] = alerts.alert_rule_evaluate(rule)
    assert alert.details["skill"] == "@acme/pdf-tools" and alert.details["version"] == "1.0.2"
    assert alert.details["previous_version"] == "1.0.1"
    assert alert.details["success_rate"] == 0.5 and alert.details["previous_success_rate"] == 0.9


def test_a_small_dip_does_not_fire_the_drop_alert(alice, bob, agent):
    first = publish(alice, version="1.0.1")
    second = publish(alice, version="1.0.2")
    rule = alerts.alert_rule_create(
        actor=member_actor(alice),
        name="skill drop",
        kind="skill_version_drop",
        params={"min_uses": 10, "drop": 0.2},
    )
    _record_outcomes(bob, agent, first, ["success"] * 9 + ["failure"])  # 90 %
    _record_outcomes(bob, agent, second, ["success"] * 8 + ["failure"] * 2)  # 80 %
    assert alerts.alert_rule_evaluate(rule) == []


def test_without_hub_evaluating_it_the_drop_rule_never_fires(alice, bob, agent):
    first = publish(alice, version="1.0.1")
    second = publish(alice, version="1.0.2")
    rule = alerts.alert_rule_create(
        actor=member_actor(alice),
        name="skill drop",
        kind="skill_version_drop",
        params={"min_uses": 10, "drop": 0.2},
    )
    _record_outcomes(bob, agent, first, ["success"] * 9 + ["failure"])  # 90 %
    _record_outcomes(bob, agent, second, ["success"] * 5 + ["failure"] * 5)  # 50 %
    assert alerts.ALERT_EVALUATORS.get("skill_version_drop") is outcomes.skill_version_drop_alerts
    others = {k: v for k, v in alerts.ALERT_EVALUATORS.items() if k != "skill_version_drop"}
    with alerts.ALERT_EVALUATORS.overridden(others):
        assert alerts.alert_rule_evaluate(rule) == []
    rule.refresh_from_db()
    assert rule.last_evaluated_at is None and not rule.alerts.exists()
    [alert] = alerts.alert_rule_evaluate(rule)  # with hub's evaluator
    assert alert.details["version"] == "1.0.2"


def test_run_feedback_is_the_runs_rating(client_for, bob, agent):
    run = _run(bob, agent)
    response = client_for(bob).post(
        f"/api/v1/hub/runs/{run.pk}/feedback/", {"outcome": "success"}, format="json"
    )
    assert response.status_code == 200
    run.refresh_from_db()
    assert run.rating == "success"
    assert {e.action for e in AuditEvent.objects.all()} >= {"run.rating", "skill.outcome"}
    # Rated from chat (the runs API), the run's skills get the outcome as well.
    client_for(bob).post(f"/api/v1/runs/{run.pk}/rating/", {"outcome": "failure"}, format="json")
    assert SkillUsage.objects.get(run=run).feedback == "failure"


def test_feedback_given_before_runs_had_ratings_becomes_their_rating(bob, agent):
    from importlib import import_module

    from django.apps import apps

    carried = import_module("hub.migrations.0003_run_ratings_from_feedback")
    rated, unrated, kept = (_run(bob, agent) for _ in range(3))
    SkillUsage.objects.filter(run=rated).update(feedback="failure", feedback_note="empty file")
    SkillUsage.objects.filter(run=kept).update(feedback="failure")
    Run.objects.filter(pk=kept.pk).update(rating="success")  # a rating of its own stays
    carried.ratings_from_feedback(apps, None)
    ratings = dict(Run.objects.values_list("pk", "rating"))
    assert (ratings[rated.pk], ratings[unrated.pk], ratings[kept.pk]) == ("failure", "", "success")
    assert Run.objects.get(pk=rated.pk).rating_note == "empty file"
