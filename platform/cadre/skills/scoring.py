"""The quality score of a skill candidate, every component shown with its value and why.

Components (each 0..1, weighted): validation (hub/validation.py), scan verdict (hub/scan.py),
evidence (how many cases stand behind it), overlap with the Hub's skills (lexical, plus
semantic when the Hub has embeddings), clarity rules (description, steps, examples), and a
model rubric when the organization has a skills model. The total is the weighted mean of the
components that apply; a component that does not apply says so and is left out.
"""

from __future__ import annotations

import re

from django.contrib.postgres.search import SearchQuery, SearchRank
from django.db.models import Exists, F, OuterRef, Q

from cadre.llm import ProviderError
from cadre.skills import drafting
from cadre.tenancy.actors import system_actor
from hub.models import SkillEmbedding, SkillVersion
from hub.selectors import packages_visible
from hub.semantic import semantic_matches

WEIGHTS = {
    "validation": 2.0,
    "scan": 2.0,
    "evidence": 1.0,
    "overlap": 1.0,
    "clarity": 1.0,
    "model_rubric": 1.0,
}
SCAN_SCORES = {"pass": 1.0, "review": 0.8, "warn": 0.4, "block": 0.0}
EVIDENCE_FULL = 3  # cases for full marks
MIN_DESCRIPTION = 40
NEIGHBOURS = 10
_STEP = re.compile(r"^\s*(?:\d+[.)]|[-*+])\s+\S", re.MULTILINE)
_EXAMPLE = re.compile(
    r"^#+\s*examples?\b|```|^\s*(?:example|e\.g\.)\b", re.IGNORECASE | re.MULTILINE
)


def _component(key: str, value: float | None, detail: str, **data) -> dict:
    return {
        "key": key,
        "value": None if value is None else round(max(0.0, min(1.0, value)), 3),
        "weight": WEIGHTS[key],
        "detail": detail,
        "data": data,
    }


def validation_component(validation: dict) -> dict:
    problems = validation.get("problems", [])
    errors = [p for p in problems if p.get("severity") == "error"]
    warnings = [p for p in problems if p.get("severity") != "error"]
    if errors:
        return _component(
            "validation", 0.0, f"{len(errors)} error(s): {errors[0]['message']}", errors=len(errors)
        )
    if warnings:
        return _component(
            "validation",
            0.7,
            f"valid, {len(warnings)} warning(s): {warnings[0]['message']}",
            warnings=len(warnings),
        )
    return _component("validation", 1.0, "valid Agent Skill, no warnings")


def scan_component(verdict: str, findings: list) -> dict:
    rules = sorted({f.get("rule", "") for f in findings})
    detail = f"scan verdict {verdict}" + (f" ({', '.join(rules)})" if rules else "")
    return _component("scan", SCAN_SCORES.get(verdict, 0.0), detail, verdict=verdict)


def evidence_component(cases: int) -> dict:
    return _component(
        "evidence",
        cases / EVIDENCE_FULL,
        f"{cases} case(s) of evidence ({EVIDENCE_FULL} for full marks)",
        cases=cases,
    )


def _tokens(text: str) -> set[str]:
    return set(drafting.words(text))


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def _lexical_neighbours(actor, name: str, tokens: set[str]) -> list:
    """Published Hub skills the actor sees that share any word (any-word full-text match on
    the Hub's search document, GIN-indexed) or look like the name (trigram)."""
    if not tokens:
        return []
    # Words are [a-z0-9]+ only (drafting.words), so the raw tsquery cannot be malformed.
    query = SearchQuery(
        " | ".join(f"{word}:*" for word in sorted(tokens)[:32]), search_type="raw", config="simple"
    )
    published = SkillVersion.objects.filter(
        package=OuterRef("pk"), status=SkillVersion.Status.PUBLISHED
    )
    return list(
        packages_visible(actor)
        .filter(Exists(published))
        .filter(Q(search_vector=query) | Q(name__trigram_similar=name))
        .annotate(rank=SearchRank(F("search_vector"), query))
        .order_by("-rank", "pk")[:NEIGHBOURS]
    )


def overlap_component(organization, *, name: str, text: str, exclude_package_id=None) -> dict:
    """1 - the highest similarity to a published Hub skill the organization can see (not the
    package this candidate would version). Lexical: word overlap with the name, description
    and body; semantic: the Hub's embeddings, when it has any."""
    actor = system_actor(organization, label="skill scoring")
    mine = _tokens(f"{name.replace('-', ' ')} {text}")
    nearest: list[dict] = []
    for package in _lexical_neighbours(actor, name, mine):
        if package.pk == exclude_package_id:
            continue
        theirs = _tokens(
            f"{package.name.replace('-', ' ')} {package.summary} {package.search_text}"
        )
        nearest.append(
            {
                "package": package.full_name,
                "similarity": round(jaccard(mine, theirs), 3),
                "how": "lexical",
            }
        )
    if SkillEmbedding.objects.filter(package__organization=organization).exists():
        visible = packages_visible(actor)
        exclude = {exclude_package_id} if exclude_package_id else set()
        for package, similarity in semantic_matches(visible, text[:2000], limit=5, exclude=exclude):
            nearest.append(
                {
                    "package": package.full_name,
                    "similarity": round(similarity, 3),
                    "how": "semantic",
                }
            )
    nearest.sort(key=lambda row: -row["similarity"])
    top = nearest[0]["similarity"] if nearest else 0.0
    detail = (
        f"closest Hub skill {nearest[0]['package']} ({nearest[0]['how']} similarity {top:.2f})"
        if nearest
        else "no similar skill in the Hub"
    )
    return _component("overlap", 1.0 - top, detail, nearest=nearest[:5])


def clarity_component(description: str, body: str) -> dict:
    checks = {
        "description_length": MIN_DESCRIPTION <= len(description or "") <= 1024,
        "steps": len(_STEP.findall(body or "")) >= 2,
        "examples": bool(_EXAMPLE.search(body or "")),
    }
    missing = [name for name, ok in checks.items() if not ok]
    detail = (
        "description, steps and an example present"
        if not missing
        else ("missing: " + ", ".join(missing))
    )
    return _component("clarity", sum(checks.values()) / len(checks), detail, checks=checks)


RUBRIC_PROMPT = """Rate an Agent Skill for an enterprise team. Criteria: clear trigger in the
description, concrete actionable steps, correct and safe, reusable beyond one case. Answer
with one JSON object {"score": number from 0 to 1, "reasons": "one or two sentences"}."""


def model_rubric_component(provider, skill_md: str) -> dict:
    if provider is None:
        return _component("model_rubric", None, "no skills model configured: not scored")
    try:
        answer = drafting.ask_json(provider, RUBRIC_PROMPT, skill_md[:12000])
        value = float(answer.get("score"))
    except (ProviderError, TypeError, ValueError) as error:
        return _component("model_rubric", None, f"the model could not score it: {error}")
    return _component(
        "model_rubric",
        value,
        str(answer.get("reasons") or "")[:500],
        model=f"{provider.kind}:{provider.model}",
    )


def total(components: list[dict]) -> float:
    scored = [c for c in components if c["value"] is not None]
    weight = sum(c["weight"] for c in scored)
    return round(sum(c["value"] * c["weight"] for c in scored) / weight, 3) if weight else 0.0


def score_candidate(candidate, *, evidence_cases: int, provider=None) -> tuple[float, list[dict]]:
    """(total, components) for the candidate's current files and checks."""
    frontmatter = candidate.validation.get("frontmatter") or {}
    description = frontmatter.get("description") if isinstance(frontmatter, dict) else ""
    description = description if isinstance(description, str) else ""
    skill_md = candidate_skill_md(candidate)
    _front, body = drafting.split_skill_md(skill_md)
    components = [
        validation_component(candidate.validation),
        scan_component(candidate.scan_verdict, candidate.scan_findings),
        evidence_component(evidence_cases),
        overlap_component(
            candidate.organization,
            name=candidate.name,
            text=f"{description}\n{body}",
            exclude_package_id=candidate.package_id,
        ),
        clarity_component(description, body),
        model_rubric_component(provider, skill_md),
    ]
    return total(components), components


def candidate_skill_md(candidate) -> str:
    import base64

    encoded = (candidate.files or {}).get("SKILL.md")
    if not encoded:
        return ""
    return base64.b64decode(encoded).decode("utf-8", errors="replace")
