"""Evaluation gates: an organization may require a passing replay before a template version is
published (`organization.settings["evaluation_gates"]["template_publish"]`). A failing or
missing replay blocks the change unless the actor overrides it with a reason, which is audited
with who overrode it and the replay it overrode."""

from __future__ import annotations

from django.db import transaction

from cadre.agents.evaluation.models import EvalRun
from cadre.errors import Conflict, InvalidInput
from cadre.governance import audit
from cadre.tenancy.actors import Actor

GATES = ("template_publish",)


def gates_of(organization) -> dict:
    configured = (organization.settings or {}).get("evaluation_gates") or {}
    return {gate: bool(configured.get(gate)) for gate in GATES}


@transaction.atomic
def evaluation_gates_set(*, actor: Actor, gates: dict) -> dict:
    """Turn gates on or off for the actor's organization (`organization.manage`)."""
    actor.require("organization.manage")
    unknown = sorted(set(gates) - set(GATES))
    if unknown:
        raise InvalidInput(f"Unknown gates: {', '.join(unknown)}.", details={"gates": unknown})
    organization = (
        type(actor.organization).objects.select_for_update().get(pk=actor.organization.pk)
    )
    before = gates_of(organization)
    organization.settings = {
        **(organization.settings or {}),
        "evaluation_gates": {**before, **{k: bool(v) for k, v in gates.items()}},
    }
    organization.save(update_fields=["settings"])
    after = gates_of(organization)
    audit.record(
        actor=actor, action="evaluation.gates.update", target=organization, before=before,
        after=after,
    )  # fmt: skip
    return after


def latest_replay(version) -> EvalRun | None:
    """The newest finished replay with `version` as its candidate."""
    return (
        EvalRun.objects.filter(
            organization_id=version.organization_id,
            candidate__kind="template_version",
            candidate__version=version.pk,
            status=EvalRun.Status.COMPLETED,
        )
        .order_by("-finished_at", "-pk")
        .first()
    )


def check_publish(*, actor: Actor, version, override_reason: str = "") -> EvalRun | None:
    """Raise Conflict `evaluation_gate` when the gate is on and the version's newest replay is
    missing or regressed, unless `override_reason` is given: then the override is audited."""
    if not gates_of(version.organization)["template_publish"]:
        return None
    replay = latest_replay(version)
    if replay is not None and replay.verdict == EvalRun.Verdict.PASS:
        return replay
    why = "no finished replay of this version" if replay is None else "its replay regressed"
    if not override_reason.strip():
        raise Conflict(
            f"Publishing needs a passing evaluation suite: {why}.",
            code="evaluation_gate",
            details={"replay": replay.pk if replay else None},
        )
    audit.record(
        actor=actor,
        action="evaluation.gate.override",
        target=version,
        after={
            "gate": "template_publish",
            "replay": replay.pk if replay else None,
            "verdict": replay.verdict if replay else None,
            "reason": override_reason.strip()[:500],
        },
        reason=override_reason.strip()[:500],
    )
    return replay
