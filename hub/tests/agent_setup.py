"""Helpers that deploy agents with Hub skills through the real agents services (tests only)."""

from __future__ import annotations

import itertools

from cadre.agents import services as agents
from cadre.tenancy.actors import member_actor
from tests.factories import PositionFactory

_codes = itertools.count(1)

# Memory retrieval embeds the query with the local model (slow to load); the skills hook is
# listed explicitly, as a template that configures its assemble_context hooks must.
HOOKS = {
    "assemble_context": [
        {"name": "memory_retrieval", "enabled": False},
        {"name": "skills", "config": {"semantic": False}},
    ]
}


def template_with_skills(owner, skills: list[dict], **content):
    """A published template version referencing `skills`."""
    actor = member_actor(owner)
    number = next(_codes)
    template = agents.template_create(
        actor=actor,
        name=f"Assistant {number}",
        code=f"assistant-{number}",
        agent_md="# Persona\nYou help with office work.",
        sop=content.pop("sop", "# SOP\nAnswer briefly."),
        model_settings=content.pop("model_settings", {"provider": "offline", "model": "offline-1"}),
        memory_policy=content.pop(
            "memory_policy", {"read_scopes": ["agent"], "write_scopes": ["agent"]}
        ),
        hooks=content.pop("hooks", HOOKS),
        skills=skills,
        **content,
    )
    version = template.versions.get()
    agents.version_submit(actor=actor, version=version)
    agents.version_publish(actor=actor, version=version, reason="ready")
    return template


def deploy(owner, template, *members):
    """Deploy `template` to a new position held by `members`; returns {member pk: agent}."""
    # Named like the shared templates ("Assistant N"): test data, English in every language.
    number = next(_codes)
    position = PositionFactory(
        organization=owner.organization,
        name=f"Assistant position {number}",
        code=f"assistant-position-{number}",
    )
    for member in members:
        member.positions.add(position)
    deployment = agents.deployment_create(
        actor=member_actor(owner),
        name=f"{template.name} agents",
        template=template,
        positions=[position],
    )
    return deployment, {agent.member_id: agent for agent in deployment.agents.all()}


def completed_run(member, agent, text: str, session=None):
    """One turn of `agent` for `member`, executed in-process, asserted completed."""
    from cadre.agents.models import Run
    from cadre.agents.runtime.lifecycle import execution as engine
    from cadre.agents.runtime.lifecycle import services as runtime

    run = runtime.run_start(actor=member_actor(member), agent=agent, text=text, session=session)
    assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    run.refresh_from_db()
    return run


def install_and_run(owner) -> dict:
    """An agent of the owner's organization with a Hub skill installed, and one run of it:
    URL kwargs for the install and run routes (the cross-tenant sweep)."""
    from cadre.agents.runtime.lifecycle import services as runtime
    from hub.models import SkillInstall
    from hub.tests.factories import publish

    version = publish(owner, name=f"sweep-installed-{next(_codes)}")
    template = template_with_skills(owner, [{"package": version.package.full_name, "range": "*"}])
    _, by_member = deploy(owner, template, owner)
    agent = by_member[owner.pk]
    run = runtime.run_start(actor=member_actor(owner), agent=agent, text="hello")
    return {"pk": SkillInstall.objects.get(agent=agent).pk, "run_id": run.pk}
