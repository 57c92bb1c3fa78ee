"""Factories of skill lifecycle objects for the API sweeps (tests/api/tenant_objects.py)."""

from __future__ import annotations

import itertools
from collections.abc import Callable

_counter = itertools.count(1)


def _candidate(owner):
    from cadre.skills import services
    from cadre.tenancy.actors import member_actor
    from tests.skills.conftest import skill_md

    name = f"sweep-candidate-{next(_counter)}"
    files = {"SKILL.md": skill_md(name, "A candidate made for the API sweep.", ["One", "Two"])}
    return services.candidate_create(
        actor=member_actor(owner), source="upload", files=files, requested_by=owner
    )


def _proposal(owner):
    from cadre.agents.models import Run
    from cadre.skills.models import SkillProposal
    from tests.api.tenant_objects import FACTORIES

    run = FACTORIES[Run](owner)
    name = f"sweep-proposal-{next(_counter)}"
    return SkillProposal.objects.create(
        organization=owner.organization,
        member=owner,
        run=run,
        session=run.session,
        kind=SkillProposal.Kind.NEW_SKILL,
        name=name,
        correction="Next time, also include the budget.",
        files={"SKILL.md": f"---\nname: {name}\ndescription: sweep\n---\n\nBody\n"},
        drafted_by="sweep",
    )


def _distillation(owner):
    from cadre.skills.models import DistillationRecord

    return DistillationRecord.objects.create(
        organization=owner.organization,
        cluster_key=f"sweep-{next(_counter)}",
        check_method="rules",
        reason="sweep",
    )


def tenant_factories() -> dict[type, Callable]:
    from cadre.skills.models import DistillationRecord, SkillCandidate, SkillProposal

    return {
        SkillCandidate: _candidate,
        SkillProposal: _proposal,
        DistillationRecord: _distillation,
    }
