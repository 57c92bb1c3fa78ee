# ruff: noqa: F811 - the fixtures imported from tests.console.agents_setup are parameters here
"""Evaluation in the console: the gates (set by an owner, read by others), suites and their
cases, a replay's baseline and candidate side by side with the aggregate and who overrode a
gate, and "Add to evaluation" on a transcript turn (saved by the from-turn service)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from cadre.agents import services as agents
from cadre.agents.evaluation import services
from cadre.agents.evaluation.gates import evaluation_gates_set
from cadre.agents.evaluation.models import EvalCase, EvalSuite
from cadre.agents.runtime.lifecycle import execution as engine
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.governance.models import AuditEvent
from cadre.memory.models import EmbeddingModel, OrganizationEmbeddingModel
from cadre.tenancy.actors import member_actor
from cadre.tenancy.models import Organization
from tests.console.agents_setup import (  # noqa: F401 - fixtures
    alice_agent,
    bob_agent,
    client,
    deployment,
    owner,
    published,
    sales,
    template,
)
from tests.refusals import nothing_changes

pytestmark = pytest.mark.django_db


@pytest.fixture
def suite(owner, template, published):
    suite = services.suite_create(actor=owner, name="Sales turns", template=template)
    services.case_create(
        actor=owner,
        suite=suite,
        data={
            "title": "The discount",
            "input": "What is the standard discount?",
            "required_facts": ["5 percent"],
        },
    )
    return suite


@pytest.fixture
def regressed(owner, template, suite):
    """A draft that drops the discount from the SOP, replayed: it regresses."""
    draft = agents.version_draft(actor=owner, template=template)
    agents.version_update(actor=owner, version=draft, sop="# SOP\nAsk your manager.")
    run = services.eval_run_start(
        actor=owner, suite=suite, candidate={"kind": "template_version", "version": draft.pk}
    )
    services.eval_run_execute(run.pk)
    run.refresh_from_db()
    assert run.verdict == "regression"
    return run


def test_the_evaluation_page_lists_suites_and_the_gates(alice, bob, make_member, suite, regressed):
    auditor = make_member(roles=["auditor"])
    page = client(auditor).get(reverse("console:evaluation"))
    assert page.status_code == 200
    html = page.content.decode()
    assert "Sales turns" in html and reverse("console:evaluation_suite", args=[suite.pk]) in html
    assert 'data-verdict="regression"' in html
    assert 'data-gate="template_publish"' in html and "Save gates" not in html  # read only
    owner_page = client(alice).get(reverse("console:evaluation")).content.decode()
    assert "Save gates" in owner_page and "Build the retrieval suite" in owner_page
    home = client(auditor).get(reverse("console:home")).content.decode()
    assert reverse("console:evaluation") in home
    # evaluation is an admin's tool: an employee has neither the page nor the link to it
    assert client(bob).get(reverse("console:evaluation")).status_code == 403
    assert (
        reverse("console:evaluation")
        not in client(bob).get(reverse("console:home")).content.decode()
    )


def test_an_owner_sets_the_gates_and_an_employee_may_not(alice, bob, org_a):
    response = client(alice).post(
        reverse("console:evaluation_gates"), {"template_publish": "on", "embedding_activate": "on"}
    )
    assert response.status_code == 302
    stored = Organization.objects.get(pk=org_a.pk).settings["evaluation_gates"]
    assert stored == {
        "template_publish": True,
        "template_model_change": False,
        "embedding_activate": True,
    }
    with nothing_changes(Organization.objects.get(pk=org_a.pk)):
        refused = client(bob).post(reverse("console:evaluation_gates"), {})
    assert refused.status_code == 403


def test_the_suite_page_shows_cases_and_starts_a_replay(alice, suite, template, owner):
    page = client(alice).get(reverse("console:evaluation_suite", args=[suite.pk])).content.decode()
    assert "The discount" in page and "<code>5 percent</code>" in page
    assert "Start the replay" in page
    response = client(alice).post(
        reverse("console:evaluation_replay", args=[suite.pk]),
        {"kind": "model", "model": "offline-2"},
    )
    run = suite.runs.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("console:evaluation_run", args=[run.pk])
    assert run.candidate == {"kind": "model", "model_settings": {"model": "offline-2"}}
    # a bad candidate is refused with its reason, nothing started
    refused = client(alice).post(
        reverse("console:evaluation_replay", args=[suite.pk]), {"kind": "embedding"}, follow=True
    )
    assert "embedding_model must name a known embedding model" in refused.content.decode()
    assert suite.runs.count() == 1


def test_the_replay_form_offers_the_organizations_embedding_models_with_their_status(
    alice, org_b, suite
):
    ours = EmbeddingModel.objects.create(
        id="local/ours", provider="local", name="ours", dimension=8
    )
    theirs = EmbeddingModel.objects.create(
        id="local/theirs", provider="local", name="theirs", dimension=8
    )
    OrganizationEmbeddingModel.objects.create(organization=alice.organization, model=ours)
    OrganizationEmbeddingModel.objects.create(organization=org_b, model=theirs, status="active")
    page = client(alice).get(reverse("console:evaluation_suite", args=[suite.pk]))
    assert page.status_code == 200  # a 500 while any embedding model existed
    html = page.content.decode()
    assert '<option value="local/ours">local/ours (building)' in html
    assert "local/theirs" not in html


def test_the_run_page_shows_both_sides_per_case_the_aggregate_and_overrides(
    alice, bob, make_member, owner, template, suite, regressed
):
    auditor = make_member(roles=["auditor"])
    draft = agents.version_submit(
        actor=owner, version=template.versions.get(pk=regressed.candidate["version"])
    )
    evaluation_gates_set(actor=owner, gates={"template_publish": True})
    agents.version_publish(actor=owner, version=draft, override_gate="approved by the sales lead")
    assert client(bob).get(reverse("console:evaluation_run", args=[regressed.pk])).status_code in (
        403,
        404,
    )
    page = client(auditor).get(reverse("console:evaluation_run", args=[regressed.pk]))
    assert page.status_code == 200
    html = page.content.decode()
    # the aggregate: pass rates with intervals, the difference and the verdict
    assert 'data-figure="baseline-pass-rate">1.00' in html
    assert 'data-figure="candidate-pass-rate">0.00' in html
    assert "(Wilson)" in html and "(paired bootstrap)" in html
    assert 'data-verdict="regression"' in html
    # per case, side by side: the baseline passes with the fact, the candidate misses it
    assert 'data-side="baseline"' in html and 'data-side="candidate"' in html
    assert 'data-regressed="true"' in html and "Missing: <code>5 percent</code>" in html
    assert "Retrieval overlap" in html
    # who overrode the gate, from the audit log
    assert 'data-override-gate="template_publish"' in html
    assert "Alice" in html and "approved by the sales lead" in html
    only = client(auditor).get(
        reverse("console:evaluation_run", args=[regressed.pk]) + "?regressed=1"
    )
    assert 'data-regressed="true"' in only.content.decode()


def test_an_outsider_gets_404_for_another_organizations_suite_and_run(charlie, suite, regressed):
    outsider = client(charlie)
    assert outsider.get(reverse("console:evaluation_suite", args=[suite.pk])).status_code == 404
    assert outsider.get(reverse("console:evaluation_run", args=[regressed.pk])).status_code == 404
    assert "Sales turns" not in outsider.get(reverse("console:evaluation")).content.decode()


def test_add_to_evaluation_on_a_transcript_turn_saves_a_case(alice, bob, bob_agent, suite):
    run = runtime.run_start(actor=member_actor(bob), agent=bob_agent, text="hello there")
    engine.run_execute(run.pk)
    session_url = reverse("console:session", args=[run.session_id])
    page = client(alice).get(session_url).content.decode()
    assert 'data-testid="add-to-evaluation"' in page and "Save as a case" in page
    # an employee who cannot build suites sees no button
    assert "Save as a case" not in client(bob).get(session_url).content.decode()
    response = client(alice).post(
        reverse("console:evaluation_case_from_turn"),
        {
            "suite": suite.pk,
            "run": run.pk,
            "required_facts": "hello\n",
            "next": f"{session_url}#run-{run.pk}",
        },
    )
    assert response.status_code == 302 and response["Location"] == f"{session_url}#run-{run.pk}"
    case = EvalCase.objects.get(source_run=run)
    assert case.suite == suite and case.source == "turn"
    assert case.expectations["required_facts"] == ["hello"]
    assert case.expectations["reference_reply"]
    event = AuditEvent.objects.filter(action="evaluation.case.create").latest("pk")
    assert event.actor_id == str(alice.pk)


def test_add_to_evaluation_refuses_an_outside_redirect_and_another_orgs_suite(
    alice, bob, bob_agent, charlie, suite
):
    run = runtime.run_start(actor=member_actor(bob), agent=bob_agent, text="hello there")
    engine.run_execute(run.pk)
    theirs = services.suite_create(actor=member_actor(charlie), name="Theirs")
    with nothing_changes(EvalCase):
        response = client(alice).post(
            reverse("console:evaluation_case_from_turn"),
            {"suite": theirs.pk, "run": run.pk, "next": "https://evil.test/"},
        )
    assert response.status_code == 302 and response["Location"] == reverse("console:evaluation")
    with nothing_changes(EvalCase):
        assert (
            client(bob)
            .post(reverse("console:evaluation_case_from_turn"), {"suite": suite.pk, "run": run.pk})
            .status_code
            == 403
        )


def test_publishing_in_the_console_is_gated_and_takes_an_override(alice, owner, template, suite):
    from cadre.agents.models import TemplateVersion

    evaluation_gates_set(actor=owner, gates={"template_publish": True})
    draft = agents.version_submit(
        actor=owner, version=agents.version_draft(actor=owner, template=template)
    )
    url = reverse("console:template_version_action", args=[template.pk, draft.number, "publish"])
    page = client(alice).get(reverse("console:template_version", args=[template.pk, draft.number]))
    assert 'name="override_gate"' in page.content.decode()
    refused = client(alice).post(url, {"reason": "ship"}, follow=True).content.decode()
    assert "needs a passing evaluation suite (template_publish)" in refused
    assert TemplateVersion.objects.get(pk=draft.pk).status == "in_review"
    client(alice).post(url, {"reason": "ship", "override_gate": "urgent price fix"})
    assert TemplateVersion.objects.get(pk=draft.pk).status == "published"
    assert AuditEvent.objects.get(action="evaluation.gate.override").reason == "urgent price fix"


def test_a_suite_is_created_in_the_console_and_the_transcript_points_there_first(
    alice, bob, bob_agent, template
):
    run = runtime.run_start(actor=member_actor(bob), agent=bob_agent, text="hello there")
    engine.run_execute(run.pk)
    session = client(alice).get(reverse("console:session", args=[run.session_id])).content
    assert "create a suite first" in session.decode()
    response = client(alice).post(
        reverse("console:evaluation_suite_create"),
        {"name": "Greetings", "kind": "conversation", "template": template.pk,
         "regression_threshold": "0.1"},
    )  # fmt: skip
    suite = EvalSuite.objects.get(name="Greetings")
    assert response["Location"] == reverse("console:evaluation_suite", args=[suite.pk])
    assert (suite.template_id, suite.regression_threshold) == (template.pk, 0.1)
    assert AuditEvent.objects.filter(action="evaluation.suite.create").count() == 1
    session = client(alice).get(reverse("console:session", args=[run.session_id])).content
    assert "Save as a case" in session.decode()
    with nothing_changes(EvalSuite):
        assert (
            client(bob).post(reverse("console:evaluation_suite_create"), {"name": "x"}).status_code
            == 403
        )
