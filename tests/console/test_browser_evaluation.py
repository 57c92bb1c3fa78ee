# ruff: noqa: F811 - the fixtures imported from other test modules are parameters here
"""Evaluation in a real browser (headless Chromium, the ASGI server of test_browser_chat.py):
alice opens the Evaluation page, the suite and a regressed replay — baseline and candidate side
by side per case, the aggregate with its intervals, the verdict and who overrode the publish
gate — then adds a turn of bob's session to the suite from the transcript. Screenshots in
var/screenshots/evaluation-*.png (git-ignored)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cadre.agents import services as agents
from cadre.agents.evaluation import services
from cadre.agents.evaluation.gates import evaluation_gates_set
from cadre.agents.evaluation.models import EvalCase
from cadre.agents.runtime.lifecycle import execution as engine
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.tenancy.actors import member_actor
from tests.console.agents_setup import (  # noqa: F401 - fixtures
    bob_agent,
    deployment,
    owner,
    published,
    sales,
    template,
)
from tests.console.test_browser_chat import (  # noqa: F401 - fixtures and page helpers
    PASSWORD,
    browser_page,
    chromium,
    expect,
    live_server_url,
)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
SHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"


@pytest.fixture
def replayed(owner, template, published, bob, bob_agent):
    """A suite of two cases, a draft that drops the discount replayed against the published
    version (one case regresses), its publishing overridden, and a turn of bob's."""
    suite = services.suite_create(actor=owner, name="Sales turns", template=template)
    for title, text, facts in (
        ("The discount", "What is the standard discount?", ["5 percent"]),
        ("A greeting", "Hello there", []),
    ):
        services.case_create(
            actor=owner,
            suite=suite,
            data={"title": title, "input": text, "required_facts": facts},
        )
    draft = agents.version_draft(actor=owner, template=template)
    agents.version_update(actor=owner, version=draft, sop="# SOP\nAsk your manager.")
    run = services.eval_run_start(
        actor=owner, suite=suite, candidate={"kind": "template_version", "version": draft.pk}
    )
    services.eval_run_execute(run.pk)
    evaluation_gates_set(actor=owner, gates={"template_publish": True})
    draft = agents.version_submit(actor=owner, version=draft)
    agents.version_publish(actor=owner, version=draft, override_gate="the old SOP is withdrawn")
    turn = runtime.run_start(
        actor=member_actor(bob), agent=bob_agent, text="remind me to call Dana"
    )
    engine.run_execute(turn.pk)
    return {"suite": suite, "run": run, "turn": turn}


def test_a_replay_side_by_side_and_a_turn_added_from_the_transcript(
    chromium, live_server_url, alice, replayed
):
    SHOTS.mkdir(parents=True, exist_ok=True)
    run, turn, suite = replayed["run"], replayed["turn"], replayed["suite"]
    with browser_page(chromium, live_server_url) as page:
        page.set_viewport_size({"width": 1280, "height": 900})
        page.goto("/login/?next=/evaluation/")
        page.get_by_label("Email").fill(alice.user.email)
        page.get_by_label("Password").fill(PASSWORD)
        with page.expect_navigation():
            page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_role("heading", name="Evaluation", exact=True)).to_be_visible()
        expect(page.locator('[data-override-gate="template_publish"]')).to_contain_text(
            "the old SOP is withdrawn"
        )
        page.get_by_role("link", name="Sales turns").click()
        expect(page.locator("#cases tr[data-case]")).to_have_count(2)
        page.get_by_role("link", name=f"Replay {run.pk}").click()
        page.wait_for_url(f"**/evaluation/runs/{run.pk}/")
        expect(page.locator('[data-figure="baseline-pass-rate"]')).to_have_text("1.00")
        expect(page.locator('[data-figure="candidate-pass-rate"]')).to_have_text("0.50")
        regressed = page.locator('.eval-case[data-regressed="true"]')
        expect(regressed).to_have_count(1)
        expect(regressed.locator('[data-side="baseline"] [data-passed="true"]')).to_be_visible()
        expect(regressed.locator('[data-side="candidate"] [data-passed="false"]')).to_be_visible()
        expect(regressed.locator('[data-side="candidate"]')).to_contain_text("Missing: 5 percent")
        expect(page.locator("#gate-overrides")).to_contain_text("Alice")
        page.screenshot(path=str(SHOTS / "evaluation-run.png"), full_page=True)

        page.goto(f"/sessions/{turn.session_id}/")
        card = page.locator(f"#run-{turn.pk}")
        card.get_by_text("Add to evaluation").click()
        card.get_by_label("Suite").select_option(label="Sales turns (conversation)")
        card.get_by_label("Required facts (one a line, optional)").fill("Dana")
        card.locator(".card-header").screenshot(path=str(SHOTS / "evaluation-add-turn-form.png"))
        card.get_by_role("button", name="Save as a case").click()
        expect(page.get_by_text("The turn was added to “Sales turns”")).to_be_visible()
        page.evaluate("window.scrollTo(0, 0)")
        page.screenshot(path=str(SHOTS / "evaluation-add-turn.png"))
    case = EvalCase.objects.get(source_run=turn)
    assert case.suite_id == suite.pk and case.expectations["required_facts"] == ["Dana"]
