"""The `post_process:skill_backflow` hook: after a run, spot an employee's correction of the
agent's previous answer, draft the skill change and ask the employee to confirm it.

Registered on import (the app's `ready()` imports this module), so it joins the registry's
defaults for every template that does not configure `post_process` itself. A reply such as
"yes, save it" to a pending proposal in the same conversation confirms it.
"""

from __future__ import annotations

import logging

from django.utils import translation
from django.utils.translation import gettext

from cadre.agents.hooks.registry import hook
from cadre.agents.models import Run
from cadre.agents.runtime.records.bookkeeping import emit
from cadre.agents.runtime.records.grants import agent_actor
from cadre.errors import CadreError
from cadre.llm import ProviderError
from cadre.llm.metering import purpose
from cadre.memory import services as memory_services
from cadre.skills import drafting, services
from cadre.skills.models import SkillProposal
from cadre.skills.scoring import jaccard
from cadre.tenancy.actors import member_actor
from cadre.tenancy.languages import member_language
from hub.models import SkillPackage, SkillUsage
from hub.selectors import resolve_version

logger = logging.getLogger(__name__)
DRAFTING_PURPOSE = "skills.drafting"
MIN_CONTEXT_OVERLAP = 0.05


def _previous_run(run):
    return (
        Run.objects.filter(
            session_id=run.session_id, status=Run.Status.COMPLETED, created_at__lt=run.created_at
        )
        .exclude(pk=run.pk)
        .order_by("-created_at", "-pk")
        .first()
    )


def _latest(package, fallback=None):
    try:
        return resolve_version(package, "latest")
    except CadreError:  # nothing installable: the version that was used, if any
        return fallback


def _skills_in_context(run, previous) -> list:
    """(package, latest published version) of the skills in the answer's context: the Hub's
    record of what the runs loaded when it has one, else the template's skill references."""
    found: dict[int, tuple] = {}
    usages = SkillUsage.objects.filter(
        run_id__in=[previous.pk, run.pk], loaded=True
    ).select_related("version__package__namespace")
    for usage in usages:
        latest = _latest(usage.version.package, usage.version)
        if latest is not None:
            found.setdefault(usage.package_id, (usage.version.package, latest))
    if found:
        return list(found.values())
    for entry in run.version.skills or []:
        reference = str(entry.get("package") or "").lstrip("@")
        if "/" not in reference:
            continue
        handle, name = reference.split("/", 1)
        package = SkillPackage.objects.filter(
            organization_id=run.organization_id, namespace__handle=handle, name=name
        ).first()
        latest = _latest(package) if package is not None else None
        if latest is not None:
            found.setdefault(package.pk, (package, latest))
    return list(found.values())


def _best_skill(candidates: list, text: str):
    mine = set(drafting.words(text))
    best, best_score = None, MIN_CONTEXT_OVERLAP
    for package, version in candidates:
        theirs = set(
            drafting.words(
                f"{package.name.replace('-', ' ')} {version.frontmatter.get('description', '')} "
                f"{version.body}"
            )
        )
        score = jaccard(mine, theirs)
        if score >= best_score:
            best, best_score = (package, version), score
    return best


def _confirm_by_reply(run) -> dict | None:
    if not drafting.is_affirmation(run.input.get("text", "")):
        return None
    proposal = (
        SkillProposal.objects.filter(
            session_id=run.session_id,
            member_id=run.member_id,
            status=SkillProposal.Status.PENDING,
            run__created_at__lt=run.created_at,
        )
        .order_by("-created_at")
        .first()
    )
    if proposal is None:
        return None
    candidate = services.proposal_confirm(
        actor=member_actor(run.member), proposal=proposal, via="agent_reply"
    )
    return {"confirmed": proposal.pk, "candidate": candidate.pk}


def _draft(run, *, request: str, output: str, correction: str, base) -> drafting.Draft | None:
    base_md = _skill_md_of(base[1]) if base else None
    base_name = base[0].name if base else ""
    provider = drafting.model_for_version(run.version)
    if provider is not None:
        try:
            # Charged to the run's account (its after-run hook) under its own purpose.
            with purpose(DRAFTING_PURPOSE):
                return drafting.model_correction_draft(
                    provider,
                    request=request,
                    output=output,
                    correction=correction,
                    base_skill_md=base_md,
                    base_name=base_name,
                    organization=run.organization,
                )
        except ProviderError as error:
            logger.warning("skill backflow: the model could not draft (%s); using rules", error)
    return drafting.offline_correction_draft(
        request=request,
        output=output,
        correction=correction,
        base_skill_md=base_md,
        base_name=base_name,
        organization=run.organization,
    )


def _skill_md_of(version) -> str:
    file = version.files.select_related("blob").filter(path="SKILL.md").first()
    return bytes(file.blob.content).decode("utf-8", errors="replace") if file else ""


# Where a template states what its agents follow, and what the person is shown for each.
SOP_FIELDS = (("sop", "SOP"), ("agent_md", "AGENT.md"))
SOP_DRAFT = "rules (a correction of the template's SOP)"


def _sop_change(run, text: str) -> dict | None:
    """A correction of a fact the agent's template states ("No, that's wrong: our discount
    limit is 12%, not 10%" where its SOP says 10%): a proposed change the employee confirms
    and reviewers decide like any skill change. The draft is a skill stating the corrected
    line, which agents load once it is approved; it names the template lines to change."""
    if not memory_services.is_factual_correction(text):
        return None
    version = run.version
    found = [
        (label, line)
        for field, label in SOP_FIELDS
        for line in memory_services.contradicted_lines(text, getattr(version, field, "") or "")
    ]
    if not found:
        return None
    existing = SkillProposal.objects.filter(run=run).first()
    if existing is not None:  # a redelivered task: the proposal is already there
        return {"proposal": existing.pk}
    statement = memory_services.correction_statement(text)
    label, line = found[0]
    template = version.name
    name = drafting.skill_name(statement, fallback="sop-correction")
    summary = gettext(
        "Proposed a change to the %(label)s of %(template)s: “%(line)s” → “%(statement)s”"
    ) % {
        "label": label,
        "template": template,
        "line": line,
        "statement": statement,
    }
    body = "\n".join(
        [
            f"# {template}: {label} correction",
            "",
            f"> Proposed from a conversation: an employee corrected what the {label} of the "
            f"{template} template says. Read it before approving, and change the {label} too.",
            "",
            "## Correction",
            "",
            *[f"- The {where} says: “{said}”" for where, said in found],
            f"- What is right: {statement}",
            "",
            "## Steps",
            "",
            f"1. Follow “{statement}” wherever the {label} of {template} says otherwise.",
        ]
    )
    draft = drafting.Draft(
        name=name,
        files={
            "SKILL.md": drafting.render_skill_md(
                name=name,
                description=f"Correction to the {label} of {template}: {statement}",
                body=body,
                metadata={"drafted-by": "rules", "corrects": f"{template} {label}"},
            )
        },
        summary=summary,
        drafted_by=SOP_DRAFT,
    )
    previous = _previous_run(run)
    messages = [
        *(
            [
                {"role": "user", "content": previous.input.get("text", ""), "run_id": previous.pk},
                {
                    "role": "assistant",
                    "content": previous.output.get("text", ""),
                    "run_id": previous.pk,
                },
            ]
            if previous is not None
            else []
        ),
        {"role": "user", "content": text, "run_id": run.pk},
        {"role": "assistant", "content": run.output.get("text", ""), "run_id": run.pk},
    ]
    proposal = services.proposal_create(
        actor=agent_actor(run.agent), run=run, draft=draft, correction=text, messages=messages
    )
    _tell_proposal(
        run,
        proposal,
        question=gettext(
            "Send this change to review? Reply “yes, save it” or confirm it in the console."
        ),
        corrects=label,
    )
    return {"proposal": proposal.pk, "drafted_by": SOP_DRAFT, "name": name, "corrects": label}


def _tell_proposal(run, proposal, *, question: str, **extra) -> None:
    """The `skill_proposal` event the chat shows as a card: what was drafted and the question."""
    emit(
        run.pk,
        "skill_proposal",
        {
            "proposal": proposal.pk,
            "name": proposal.name,
            "kind": proposal.kind,
            "package": proposal.package.full_name if proposal.package else None,
            "summary": proposal.summary,
            **extra,
            "question": question,
        },
    )


@hook(
    "post_process",
    "skill_backflow",
    description="Spot an employee's correction of the agent's answer, draft a skill change "
    "and ask them to confirm it (a confirmed change becomes a skill candidate).",
)
def skill_backflow(run, config: dict) -> dict:
    # What the person reads (the proposal's summary and question) is in their language.
    with translation.override(member_language(run.member)):
        return _skill_backflow(run, config)


def _skill_backflow(run, config: dict) -> dict:
    if run.trigger != "message" or run.parent_id is not None:
        return {"proposal": None, "reason": "not a person's message"}  # events, subagents
    confirmed = _confirm_by_reply(run)
    if confirmed is not None:
        return confirmed
    correction = run.input.get("text", "")
    if not drafting.is_correction(correction):  # (only a correction makes a proposal)
        # ... or a correction of a fact the agent's SOP states: a proposed change to that line.
        return _sop_change(run, correction) or {
            "proposal": None,
            "reason": "no correction in the message",
        }
    existing = SkillProposal.objects.filter(run=run).first()
    if existing is not None:  # a redelivered task: the proposal is already there
        return {"proposal": existing.pk}
    previous = _previous_run(run)
    if previous is None:
        return {"proposal": None, "reason": "no earlier answer in the conversation to improve"}
    request = previous.input.get("text", "")
    output = previous.output.get("text", "")
    base = _best_skill(_skills_in_context(run, previous), f"{request} {correction}")
    draft = _draft(run, request=request, output=output, correction=correction, base=base)
    if draft is None:
        return {"proposal": None, "reason": "the model found no reusable skill in the correction"}
    messages = [
        {"role": "user", "content": request, "run_id": previous.pk},
        {"role": "assistant", "content": output, "run_id": previous.pk},
        {"role": "user", "content": correction, "run_id": run.pk},
        {"role": "assistant", "content": run.output.get("text", ""), "run_id": run.pk},
    ]
    proposal = services.proposal_create(
        actor=agent_actor(run.agent),
        run=run,
        draft=draft,
        correction=correction,
        messages=messages,
        package=base[0] if base else None,
        base_version=base[1] if base else None,
    )
    _tell_proposal(
        run,
        proposal,
        question=gettext(
            "Save this as a skill for your team? Reply “yes, save it” or confirm it in the console."
        ),
    )
    return {"proposal": proposal.pk, "drafted_by": proposal.drafted_by, "name": proposal.name}
