"""Installed skills in an agent's context: the `assemble_context` hook `skills`.

For each of the agent's installs the hook verifies the installed version (the stored file
listing against the published fingerprint and the instance's Ed25519 signature, and SKILL.md's
bytes against their SHA-256) — a mismatching version is skipped and recorded with the reason.
Every verified skill's description goes into the context; its body only when it is relevant
to the input: asked for by name (`@ns/name`, or `input["skills"]`), sharing words with the
skill's name or description, or (when embeddings are available) close in meaning. Bodies share
`body_tokens` of the context (a quarter of it by default). Each version handed to the context —
and each one skipped — is recorded as a `SkillUsage` of the run.

The hook returns one section carrying the skills (`{"title": "Skills", "skills": [...]}`);
`cadre.agents.runtime.steps.context.fit` places the descriptions and bodies within the budget.
Hook config: `{"semantic": true, "semantic_threshold": 0.4, "body_tokens": <int>}`.
"""

from __future__ import annotations

import hashlib
import logging
import re

from django.db import transaction

from cadre import signing
from cadre.agents.hooks import builtins  # noqa: F401 - registered first: a stable default order
from cadre.agents.hooks.registry import hook
from cadre.agents.runtime.lifecycle.warm import warming
from cadre.llm import estimate_tokens
from hub import skill_prefetch
from hub.bundles import fingerprint as compute_fingerprint
from hub.distribution import installs_sync
from hub.integrity import signed_payload
from hub.models import SkillBlob, SkillFile, SkillInstall, SkillUsage, SkillVersion
from hub.validation import parse_skill_md

logger = logging.getLogger(__name__)

SECTION_TITLE = "Skills"
# Cosine similarity (all-MiniLM-L6-v2, the memory layer's local model) from which an input is
# close enough in meaning to a skill's "name: description" to load its body. Measured on that
# model: close paraphrases sharing no word with their skill scored 0.43-0.70 against it (looser
# ones 0.23-0.40), unrelated requests and other skills at most 0.38; 0.5 missed 5 of the 9
# close paraphrases measured. hub/tests/test_skills_semantic.py holds the calibration.
SEMANTIC_THRESHOLD = 0.4
_WORD = re.compile(r"[\w]+", re.UNICODE)
# Words too common to make a skill relevant on their own.
STOPWORDS = frozenset(
    {
        "a",
        "about",
        "after",
        "all",
        "also",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "been",
        "but",
        "by",
        "can",
        "could",
        "do",
        "does",
        "for",
        "from",
        "get",
        "give",
        "has",
        "have",
        "help",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "just",
        "let",
        "me",
        "my",
        "need",
        "not",
        "of",
        "on",
        "or",
        "our",
        "please",
        "should",
        "so",
        "some",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "this",
        "to",
        "up",
        "us",
        "use",
        "using",
        "want",
        "was",
        "we",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
    }
)


def _words(text: str) -> set[str]:
    found = set()
    for word in _WORD.findall(text.lower()):
        if len(word) < 3 or word in STOPWORDS or word.isdigit():
            continue
        found.add(word[:-1] if len(word) > 4 and word.endswith("s") else word)
    return found


# --- integrity ---------------------------------------------------------------------------


def verify_installed(version: SkillVersion) -> tuple[str, bytes | None]:
    """("", SKILL.md bytes) when the version is intact, else (reason, None)."""
    if version.status != SkillVersion.Status.PUBLISHED or not version.signature:
        return "not a signed, published version", None
    files = list(SkillFile.objects.filter(version=version).values_list("path", "sha256", "size"))
    if compute_fingerprint((path, digest) for path, digest, _ in files) != version.fingerprint:
        return "the stored files do not match the published fingerprint", None
    if version.key_id and version.key_id != signing.key_id():
        return "signed by a key other than this instance's", None
    payload = signed_payload(
        package=version.package.full_name,
        version=version.version,
        fingerprint=version.fingerprint,
        files=files,
    )
    if not signing.verify(payload, version.signature):
        return "the signature does not match the version's files", None
    skill_md = next((entry for entry in files if entry[0] == "SKILL.md"), None)
    if skill_md is None:
        return "the version has no SKILL.md", None
    blob = SkillBlob.objects.filter(sha256=skill_md[1]).values_list("content", flat=True).first()
    content = bytes(blob) if blob is not None else b""
    if hashlib.sha256(content).hexdigest() != skill_md[1] or len(content) != skill_md[2]:
        return "SKILL.md's bytes do not match their published SHA-256", None
    return "", content


# --- relevance ---------------------------------------------------------------------------


def requested_names(text: str, explicit: list | None) -> set[str]:
    """Skills the input asks for: `@ns/name` mentions and the run's `skills` list."""
    names = {str(name).lstrip("@").lower() for name in (explicit or []) if name}
    names |= {m.lower() for m in re.findall(r"@([a-z0-9-]+/[a-z0-9-]+)", text.lower())}
    return names


def lexical_score(input_words: set[str], name: str, description: str) -> int:
    """Words the input shares with the skill's name and description."""
    return len(input_words & (_words(name.replace("-", " ")) | _words(description)))


def _semantic_scores(text: str, descriptions: list[str]) -> list[float] | None:
    """Cosine similarity of the input to each description; None when embeddings are off."""
    return skill_prefetch.embedded_scores(text, descriptions)


# --- the hook ----------------------------------------------------------------------------


def _installs(agent) -> list[SkillInstall]:
    return list(
        SkillInstall.objects.filter(agent=agent).select_related(
            "package__namespace", "version__package__namespace"
        )
    )


def _verified(run, installs: list[SkillInstall], text: str, explicit) -> tuple[list, list]:
    """(the installed versions that verify, with their relevance by name and words; those that
    do not, with the reason)."""
    asked = requested_names(text, explicit)
    input_words = _words(text)
    loaded: list[dict] = []
    skipped: list[dict] = []
    for install in installs:
        version = install.version
        if version is None:
            continue
        reason, content = verify_installed(version)
        if reason:
            logger.warning("hub skills: skipping %s for run %s: %s", version, run.pk, reason)
            skipped.append({"version": version, "reason": reason})
            continue
        document, _ = parse_skill_md(content.decode("utf-8", errors="replace"))
        frontmatter = document.frontmatter if document else {}
        description = str(frontmatter.get("description", ""))
        name = str(frontmatter.get("name", install.package.name))
        full_name = install.package.full_name
        relevance = ""
        score = 0
        if full_name.lstrip("@") in asked or name in asked:
            relevance, score = "requested", 1000
        else:
            score = lexical_score(input_words, name, description)
            relevance = "lexical" if score else ""
        loaded.append(
            {
                "version": version,
                "name": full_name,
                "description": description,
                "body": (document.body.strip() if document else ""),
                "relevance": relevance,
                "score": score,
            }
        )
    return loaded, skipped


def _semantic(skills: list[dict], scores: list[float] | None, config: dict) -> None:
    threshold = float(config.get("semantic_threshold", SEMANTIC_THRESHOLD))
    for skill, similarity in zip(skills, scores or [], strict=False):
        if similarity >= threshold:
            skill["relevance"], skill["score"] = "semantic", similarity


def _with_bodies(loaded: list[dict], room: int) -> None:
    for skill in sorted(loaded, key=lambda s: -s["score"]):
        cost = estimate_tokens(skill["body"]) + 8
        skill["with_body"] = bool(skill["relevance"] and skill["body"] and cost <= room)
        if skill["with_body"]:
            room -= cost


def _output(loaded: list[dict], skipped: list[dict]) -> dict:
    skills = [
        {
            "name": skill["name"],
            "version": skill["version"].version,
            "description": skill["description"],
            **({"body": skill["body"]} if skill["with_body"] else {}),
        }
        for skill in loaded
    ]
    return {
        "sections": [{"title": SECTION_TITLE, "text": "", "skills": skills}],
        "loaded": [f"{s['name']}@{s['version'].version}" for s in loaded],
        "bodies": [f"{s['name']}@{s['version'].version}" for s in loaded if s["with_body"]],
        "skipped": [{"skill": str(s["version"]), "reason": s["reason"]} for s in skipped],
    }


def skills_for_run(run, agent, *, config: dict | None = None, context_tokens: int = 8000) -> dict:
    """Load the agent's installed skills for `run` and record them; the hook's output."""

    config = config or {}
    # Most runs' agents have no skill installed: a plain lookup says so far more cheaply
    # than the joined one below.
    installed = SkillInstall.objects.filter(agent=agent).exists()
    installs = _installs(agent) if installed else []
    # The run's pinned version (already loaded with the run) names the template's skills.
    template_skills = getattr(run, "version", None) or agent.version
    if not installs and not template_skills.skills:
        return {"sections": [], "loaded": [], "bodies": [], "skipped": []}
    if not installs and template_skills.skills:
        # Agents that existed before their skills were published resolve on first use.
        installs_sync(agent_ids=[agent.pk])
        installs = _installs(agent)
    text = str(run.input.get("text", ""))
    loaded, skipped = _verified(run, installs, text, run.input.get("skills"))
    prefetched = False
    if config.get("semantic", True) and text.strip():
        unmatched = [skill for skill in loaded if not skill["relevance"]]
        # The description vectors a topic-shift prefetch kept, when this input is on its
        # topic (see hub/skill_prefetch.py); otherwise the descriptions are embedded now.
        scores, prefetched = skill_prefetch.semantic_scores(run, text, unmatched)
        _semantic(unmatched, scores, config)
    _with_bodies(loaded, int(config.get("body_tokens", context_tokens // 4)))
    _record(run, agent, loaded, skipped)
    output = _output(loaded, skipped)
    if prefetched:
        output["prefetched"] = True
    return output


def skills_predict(run, config: dict) -> dict | None:
    """The hook's output for the next turn of `run`'s session, predicted from this turn's input
    (as the memory prefetch predicts it), for the runtime's prompt-cache warming; the
    descriptions' vectors are kept for that turn's semantic stage. Verifies every version as
    the hook does and records nothing; None when there is nothing to predict."""
    if run.session_id is None or not skill_prefetch.enabled():
        return None
    if not config.get("semantic", True) and not warming(run.version):
        return None  # no vectors to keep, no warm-up to assemble: nothing to do ahead
    installs = _installs(run.agent)
    text = str(run.input.get("text", ""))
    if not installs:
        # none resolved yet: the next turn resolves them first (see skills_for_run)
        return None if run.version.skills else {"sections": [], "loaded": [], "bodies": []}
    loaded, _ = _verified(run, installs, text, None)
    if config.get("semantic", True) and text.strip() and loaded:
        scores = skill_prefetch.prefetch(run, text, loaded)
        unmatched = [
            (skill, score)
            for skill, score in zip(loaded, scores or [], strict=False)
            if not skill["relevance"]
        ]
        _semantic([s for s, _ in unmatched], [score for _, score in unmatched], config)
    budget = int((run.version.model_settings or {}).get("context_tokens", 8000))
    _with_bodies(loaded, int(config.get("body_tokens", budget // 4)))
    return _output(loaded, [])


def _record(run, agent, loaded: list[dict], skipped: list[dict]) -> None:
    """One SkillUsage per version in (or refused from) the run's context; idempotent."""
    rows = [
        (skill["version"], True, skill["with_body"], skill["relevance"], "") for skill in loaded
    ] + [(entry["version"], False, False, "", entry["reason"]) for entry in skipped]
    with transaction.atomic():
        for version, is_loaded, body, relevance, reason in rows:
            SkillUsage.objects.update_or_create(
                run=run,
                version=version,
                defaults={
                    "organization_id": run.organization_id,
                    "agent": agent,
                    "package_id": version.package_id,
                    "loaded": is_loaded,
                    "body_loaded": body,
                    "relevance": relevance,
                    "skip_reason": reason[:300],
                },
            )


@hook(
    "assemble_context",
    "skills",
    description="Load the agent's installed Hub skills: every description, the body when "
    "relevant to the input; verify each version's signature and record its use.",
)
def skills_hook(ctx, config: dict) -> dict:
    budget = int((ctx.version.model_settings or {}).get("context_tokens", 8000))
    return skills_for_run(ctx.run, ctx.agent, config=config, context_tokens=budget)
