"""Memory-to-skill: trajectories clustered on their memory embeddings (the local model), a draft
kept only when its steps explain success (held-out successes follow them, failures do not),
and a chance correlation dropped; each cluster's decision recorded with its reason."""

from __future__ import annotations

import pytest

from cadre.memory import services as memory_services
from cadre.skills import distill
from cadre.skills.models import DistillationRecord, SkillCandidate, SkillEvidence
from cadre.skills.selectors import decode_files
from cadre.skills.tasks import memory_distill
from cadre.tenancy.actors import member_actor

pytestmark = pytest.mark.django_db

SHOW_CITIES = ["Berlin", "Paris", "Milan", "Madrid", "Vienna", "Prague"]
REFUND_ITEMS = ["a laptop", "a monitor", "a keyboard", "a headset", "a dock", "a webcam"]


def _trajectory(member, task: str, steps: list[str], outcome: str):
    return memory_services.memory_add(
        actor=member_actor(member),
        scope="organization",
        kind="experience",
        content=f"Task: {task}\n" + "\n".join(f"- {step}" for step in steps),
        attributes={"task": task, "steps": steps, "outcome": outcome},
        source_kind="system",
    )


@pytest.fixture
def trajectories(alice):
    # Trade shows: the runs that went well confirmed the budget and sent the follow-up list;
    # the failed ones booked the booth too, but skipped both.
    for city in SHOW_CITIES:
        _trajectory(
            alice,
            f"Prepare the trade show booth in {city}",
            [
                "Book the booth space",
                "Confirm the booth budget with finance",
                f"Ship the banners to {city}",
                "Send the follow-up list to sales",
            ],
            "success",
        )
    for city in ("Lyon", "Turin", "Porto"):
        _trajectory(
            alice,
            f"Prepare the trade show booth in {city}",
            ["Book the booth space", "Print the brochures"],
            "failure",
        )
    # Refunds: successful and failed runs took exactly the same steps, so the steps say
    # nothing about why some succeeded — a skill from them would be a chance correlation.
    for index, item in enumerate(REFUND_ITEMS):
        _trajectory(
            alice,
            f"Refund the customer for {item} returned damaged",
            [
                "Look up the customer order",
                "Issue the refund in the billing system",
                "Email the customer a confirmation",
            ],
            "success" if index % 2 == 0 else "failure",
        )
    _trajectory(alice, "Unrelated note", ["Water the plants"], "unknown")  # no outcome: ignored


def test_supported_steps_become_a_candidate_and_a_chance_correlation_is_dropped(
    trajectories, alice
):
    result = memory_distill(alice.organization_id)
    assert result["acme"] == {"kept": 1, "dropped": 1}

    kept = DistillationRecord.objects.get(kept=True)
    assert "trade" in kept.name or "booth" in kept.name
    texts = [step["text"] for step in kept.steps]
    assert "Confirm the booth budget with finance" in texts
    assert "Send the follow-up list to sales" in texts
    assert kept.figures["held_out_coverage"] > kept.figures["failure_coverage"]
    assert kept.check_method == "rules"
    assert kept.successes == 6 and kept.failures == 3

    candidate = kept.candidate
    assert candidate.source == SkillCandidate.Source.MEMORY
    assert candidate.requested_by is None
    skill = decode_files(candidate.files)["SKILL.md"].decode()
    assert "Confirm the booth budget with finance" in skill
    assert "Print the brochures" not in skill  # only the failures did that
    trajectories_evidence = candidate.evidence.get(kind=SkillEvidence.Kind.TRAJECTORIES)
    assert len(trajectories_evidence.data["successes"]) == 6
    assert candidate.evidence.filter(kind=SkillEvidence.Kind.COUNTERFACTUAL).exists()

    dropped = DistillationRecord.objects.get(kept=False)
    assert dropped.candidate is None
    assert "chance correlation" in dropped.reason
    assert SkillCandidate.objects.count() == 1

    again = memory_distill(alice.organization_id)  # the same clusters are not looked at twice
    assert again["acme"] == {"kept": 0, "dropped": 0}
    assert DistillationRecord.objects.count() == 2

    _trajectory(  # the cluster grows: looked at again, but its skill is already in review
        alice,
        "Prepare the trade show booth in Lisbon",
        [
            "Book the booth space",
            "Confirm the booth budget with finance",
            "Send the follow-up list to sales",
        ],
        "success",
    )
    memory_distill(alice.organization_id)
    grown = DistillationRecord.objects.latest("pk")
    assert not grown.kept and f"candidate {candidate.pk} is in review" in grown.reason
    assert SkillCandidate.objects.count() == 1


def test_steps_no_majority_shares_are_not_a_skill():
    steps = ["Book a coach", "Order pizza", "Rent a sailing boat", "Print name badges"]
    members = [
        distill.Trajectory(i, "Plan the offsite", [step], True)
        for i, step in enumerate(steps, start=1)
    ]
    result = distill.distill_cluster(members)
    assert not result.kept
    assert "majority" in result.reason


def test_without_failures_held_out_successes_must_follow_the_steps():
    common = ["Collect the receipts", "Submit the expense form"]
    members = [
        distill.Trajectory(i, "File the expenses", [*common, f"Extra {i}"], True)
        for i in range(1, 7)
    ]
    result = distill.distill_cluster(members)
    assert result.kept, result.reason
    assert result.figures["held_out_coverage"] == 1.0
    assert result.figures["failure_coverage"] is None
