"""The quality score: every component computed from the candidate and shown with its reason."""

from __future__ import annotations

import pytest

from cadre.skills import scoring, services
from cadre.skills.models import SkillEvidence
from cadre.tenancy.actors import member_actor
from hub.bundles import bundle_from_files
from hub.services import package_publish
from tests.skills.conftest import skill_md

pytestmark = pytest.mark.django_db


def _components(candidate) -> dict:
    return {c["key"]: c for c in candidate.score_components}


def _candidate(member, files, evidence=()):
    return services.candidate_create(
        actor=member_actor(member),
        source="upload",
        files=files,
        requested_by=member,
        evidence=list(evidence),
    )


def test_a_clear_distinct_skill_with_evidence_scores_high_on_every_component(alice):
    files = {
        "SKILL.md": skill_md(
            "expense-report",
            "File a monthly expense report with receipts, cost centre and manager approval.",
            ["Collect the receipts", "Fill in the cost centre", "Ask the manager to approve"],
            example="March travel to Berlin.",
        )
    }
    evidence = [
        {"kind": SkillEvidence.Kind.CONVERSATION, "summary": "case", "data": {}, "weight": 3}
    ]
    candidate = _candidate(alice, files, evidence)
    parts = _components(candidate)
    assert parts["validation"]["value"] == 1.0
    assert parts["scan"]["value"] == 1.0 and parts["scan"]["data"]["verdict"] == "pass"
    assert parts["evidence"]["value"] == 1.0 and parts["evidence"]["data"]["cases"] == 3
    assert parts["overlap"]["value"] == 1.0
    assert parts["clarity"]["value"] == 1.0
    assert parts["model_rubric"]["value"] is None  # no skills model: shown, not counted
    assert "no skills model" in parts["model_rubric"]["detail"]
    assert candidate.score == 1.0


def test_a_vague_skill_that_copies_a_hub_skill_loses_on_clarity_overlap_and_evidence(alice):
    existing = {
        "SKILL.md": skill_md(
            "expense-report",
            "File a monthly expense report with receipts, cost centre and manager approval.",
            ["Collect the receipts", "Fill in the cost centre", "Ask the manager to approve"],
        )
    }
    package_publish(
        actor=member_actor(alice),
        bundle=bundle_from_files(existing, folder_name="expense-report"),
        version="1.0.0",
        name="expense-report",
    )
    copy = {
        "SKILL.md": b"---\nname: expense-reports\ndescription: Expense report receipts\n---\n\n"
        b"File the monthly expense report: receipts, cost centre, manager approval.\n"
    }
    candidate = _candidate(alice, copy)
    parts = _components(candidate)
    assert parts["overlap"]["value"] < 0.7
    assert parts["overlap"]["data"]["nearest"][0]["package"] == "@acme/expense-report"
    assert "expense-report" in parts["overlap"]["detail"]
    assert parts["clarity"]["data"]["checks"] == {
        "description_length": False,
        "steps": False,
        "examples": False,
    }
    assert parts["clarity"]["value"] == 0.0
    assert parts["evidence"]["value"] == 0.0
    assert candidate.score < 0.8


def test_warnings_and_scan_findings_lower_their_components():
    warned = scoring.validation_component(
        {"problems": [{"severity": "warning", "message": "SKILL.md has no instructions"}]}
    )
    assert warned["value"] == 0.7 and "warning" in warned["detail"]
    review = scoring.scan_component("review", [{"rule": "network_reach"}])
    assert review["value"] == 0.8 and "network_reach" in review["detail"]
    assert scoring.scan_component("block", [{"rule": "download_execute"}])["value"] == 0.0


def test_the_total_is_the_weighted_mean_of_the_scored_components():
    parts = [
        {"key": "validation", "value": 1.0, "weight": 2.0},
        {"key": "scan", "value": 0.0, "weight": 2.0},
        {"key": "model_rubric", "value": None, "weight": 1.0},
    ]
    assert scoring.total(parts) == 0.5
