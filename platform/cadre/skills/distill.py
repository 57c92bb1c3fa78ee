"""Memory-to-skill: cluster task trajectories in memory, distill a SKILL.md from the successful
ones, and keep the draft only if a counterfactual check passes.

Trajectories are `experience` memories whose attributes say how the task went:
`{"task": "...", "steps": ["...", ...], "outcome": "success" | "failure"}` (`ok` or `success`
booleans are read too; without steps, the content's list lines are the steps). They are
clustered on their memory-layer embeddings (`cadre.memory.embeddings`, the active model).

The check, per cluster, on cases the draft was not distilled from (every third success is held
out, and every failure is a contrast case):
- with a skills model: each held-out case is planned by the model with and without the skill,
  and the model judges both plans against what actually happened; the skill must help;
- without one, rules: the skill's steps must be shared by a majority of the training
  successes, not by a majority of the failures, and must cover the held-out successes much
  better than the failures — so a step everybody takes, or a pattern found by chance in a few
  runs, does not become a skill.
Every cluster looked at leaves a `DistillationRecord` saying why it was kept or dropped.

The newest trajectories are read (a window of `limit`), so what people did lately is what gets
distilled. A draft quotes tasks and steps masked by the governance masking engine (phone
numbers, e-mail addresses, colleagues' names become placeholders): it goes to an
organization-wide review queue and to the skills model, never an employee's raw words.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, field, replace

from cadre.governance.masking.engine import mask
from cadre.governance.masking.vault import EphemeralVault
from cadre.llm import ProviderError
from cadre.memory import embeddings
from cadre.memory.models import EmbeddingModel, Kind, Memory, Verification
from cadre.memory.selectors import memory_queryset, memory_vectors, system_reader
from cadre.skills import drafting
from cadre.skills.scoring import jaccard

# Cosine similarity to a cluster's centroid for joining it, on the usual scale (unrelated ≈ 0;
# moved onto the model's own by `embeddings.similarity_threshold`). Measured on real
# trajectories: paraphrased tasks 0.67-0.93, unrelated ones at most 0.51 (English and Chinese,
# multilingual-e5-small and all-MiniLM-L6-v2).
CLUSTER_SIMILARITY = 0.55
STEP_SIMILARITY = 0.5  # word-set Jaccard for two steps to count as the same step
MIN_SUCCESSES = 3
MAJORITY = 0.5
HELD_OUT_COVERAGE = 0.5
HELD_OUT_COVERAGE_NO_CONTRAST = 0.75
MIN_LIFT = 0.3
MODEL_MIN_GAIN = 0.1
MAX_MODEL_CASES = 4
_LIST_LINE = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s+(.*\S)")


@dataclass
class Trajectory:
    memory_id: int
    task: str
    steps: list[str]
    success: bool
    vector: list[float] | None = None
    organization: object | None = None  # whose memory it is (its vector is read as theirs)


@dataclass
class StepGroup:
    text: str
    tokens: set[str]
    members: set[int] = field(default_factory=set)  # trajectory memory ids having the step
    positions: list[int] = field(default_factory=list)


def outcome_of(attributes: dict) -> bool | None:
    outcome = str(attributes.get("outcome") or "").lower()
    if outcome in ("success", "succeeded", "ok", "done"):
        return True
    if outcome in ("failure", "failed", "error"):
        return False
    for key in ("success", "ok"):
        if isinstance(attributes.get(key), bool):
            return attributes[key]
    return None


def steps_of(content: str, attributes: dict) -> list[str]:
    steps = attributes.get("steps")
    if isinstance(steps, list):
        return [drafting.clean_line(str(s)) for s in steps if drafting.clean_line(str(s))]
    return [m.group(1) for line in content.splitlines() if (m := _LIST_LINE.match(line))]


def distill_reader(organization):
    """The named system actor skill distillation reads memory as: audited, since the
    trajectories it reads are sent to the drafting model and become a candidate people read."""
    return system_reader(
        organization,
        job="memory-to-skill",
        reason="distil skills from verified task trajectories (sent to the drafting model)",
        audited=True,
    )


def load_trajectories(organization, *, limit: int = 2000) -> list[Trajectory]:
    """Of the newest `limit` verified experiences, those with an outcome and steps, oldest
    first (the clustering is the same for the same window)."""
    rows = (
        memory_queryset(distill_reader(organization))
        .filter(
            kind=Kind.EXPERIENCE,
            status=Memory.Status.ACTIVE,
            deleted_at__isnull=True,
            verification=Verification.VERIFIED,  # a waiting experience teaches no skill
        )
        .order_by("-pk")
        .only("pk", "content", "attributes")[:limit]
    )
    found = []
    for memory in reversed(list(rows)):
        attributes = memory.attributes or {}
        success = outcome_of(attributes)
        steps = steps_of(memory.content, attributes)
        if success is None or not steps:
            continue
        task = drafting.clean_line(str(attributes.get("task") or memory.content.splitlines()[0]))
        found.append(Trajectory(memory.pk, task[:300], steps, success, organization=organization))
    return found


def attach_vectors(trajectories: list[Trajectory]) -> EmbeddingModel:
    """Give each trajectory its memory's vector under its organization's active model;
    memories the memory layer has not embedded yet are embedded here by the same provider (in
    process: storing vectors stays the memory layer's job). Returns the model."""
    organizations = {t.organization for t in trajectories if t.organization is not None}
    # One organization's trajectories are clustered together: one vector space, its own.
    model = embeddings.active_model(next(iter(organizations)) if len(organizations) == 1 else None)
    stored: dict = {}
    for organization in organizations:
        ids = [t.memory_id for t in trajectories if t.organization == organization]
        stored |= memory_vectors(distill_reader(organization), model=model, memory_ids=ids)
    missing = [t for t in trajectories if t.memory_id not in stored]
    if missing:
        texts = [f"{t.task}\n" + "\n".join(t.steps) for t in missing]
        for trajectory, vector in zip(
            missing, embeddings.provider_for(model).embed(texts), strict=True
        ):
            stored[trajectory.memory_id] = vector
    for trajectory in trajectories:
        vector = stored.get(trajectory.memory_id)
        trajectory.vector = [float(x) for x in vector] if vector is not None else None
    return model


def _cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=False))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


def cluster(trajectories: list[Trajectory], *, model: EmbeddingModel) -> list[list[Trajectory]]:
    """Leader clustering on cosine similarity to each cluster's running centroid; `model` is
    the one the vectors are from (its cosines are on its own scale)."""
    threshold = embeddings.similarity_threshold(model, CLUSTER_SIMILARITY)
    clusters: list[tuple[list[float], list[Trajectory]]] = []
    for trajectory in trajectories:
        if trajectory.vector is None:
            continue
        best, best_similarity = None, threshold
        for index, (centroid, _members) in enumerate(clusters):
            similarity = _cosine(trajectory.vector, centroid)
            if similarity >= best_similarity:
                best, best_similarity = index, similarity
        if best is None:
            clusters.append((list(trajectory.vector), [trajectory]))
            continue
        centroid, members = clusters[best]
        members.append(trajectory)
        n = len(members)
        clusters[best] = (
            [(c * (n - 1) + v) / n for c, v in zip(centroid, trajectory.vector, strict=False)],
            members,
        )
    return [members for _centroid, members in clusters]


def _step_tokens(text: str) -> set[str]:
    return set(drafting.words(text))


def _match(groups: list[StepGroup], tokens: set[str]) -> StepGroup | None:
    best, best_score = None, STEP_SIMILARITY
    for group in groups:
        score = jaccard(group.tokens, tokens)
        if score >= best_score:
            best, best_score = group, score
    return best


def group_steps(training: list[Trajectory]) -> list[StepGroup]:
    groups: list[StepGroup] = []
    for trajectory in training:
        for position, step in enumerate(trajectory.steps):
            tokens = _step_tokens(step)
            if not tokens:
                continue
            group = _match(groups, tokens)
            if group is None:
                group = StepGroup(text=step, tokens=tokens)
                groups.append(group)
            group.members.add(trajectory.memory_id)
            group.positions.append(position)
    return groups


def coverage(trajectory: Trajectory, steps: list[StepGroup]) -> float:
    """The share of the skill's steps that the trajectory took."""
    if not steps:
        return 0.0
    own = [tokens for step in trajectory.steps if (tokens := _step_tokens(step))]
    taken = sum(1 for group in steps if any(_match([group], tokens) for tokens in own))
    return taken / len(steps)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def cluster_key(members: list[Trajectory]) -> str:
    """The cluster's identity: the SHA-256 of its sorted memory ids (looked at once)."""
    ids = ",".join(str(i) for i in sorted(t.memory_id for t in members))
    return hashlib.sha256(ids.encode()).hexdigest()


def masked_members(members: list[Trajectory]) -> list[Trajectory]:
    """The cluster with every task and step masked, one placeholder per value for the cluster
    (what the draft quotes and the skills model reads)."""
    organization = next((t.organization for t in members if t.organization is not None), None)
    vault = EphemeralVault()

    def masked(text: str) -> str:
        return mask(text, conversation=vault, organization=organization).text

    return [
        replace(t, task=masked(t.task), steps=[masked(step) for step in t.steps]) for t in members
    ]


@dataclass
class ClusterResult:
    members: list[Trajectory]
    name: str = ""
    steps: list[dict] = field(default_factory=list)
    draft: str = ""
    method: str = "rules"
    figures: dict = field(default_factory=dict)
    kept: bool = False
    reason: str = ""

    @property
    def key(self) -> str:
        return cluster_key(self.members)

    @property
    def successes(self) -> list[Trajectory]:
        return [t for t in self.members if t.success]

    @property
    def failures(self) -> list[Trajectory]:
        return [t for t in self.members if not t.success]


def split(successes: list[Trajectory]) -> tuple[list[Trajectory], list[Trajectory]]:
    """(training, held out): every third success is held out."""
    ordered = sorted(successes, key=lambda t: t.memory_id)
    held = [t for index, t in enumerate(ordered) if index % 3 == 2]
    return [t for t in ordered if t not in held], held


def render_draft(name: str, tasks: list[str], steps: list[StepGroup], sources: int) -> str:
    example = tasks[0] if tasks else name
    body = "\n".join(
        [
            f"# {name.replace('-', ' ').capitalize()}",
            "",
            f"Distilled from {sources} successful task runs in memory; each step was taken by "
            "most of them and not by most failed runs.",
            "",
            "## Steps",
            "",
            *[f"{i}. {group.text.rstrip('.')}." for i, group in enumerate(steps, start=1)],
            "",
            "## Example",
            "",
            f"Task: {example}",
        ]
    )
    description = f"How the team does this task successfully: {example[:200]}"
    return drafting.render_skill_md(
        name=name, description=description, body=body, metadata={"drafted-by": "memory-to-skill"}
    )


def distill_cluster(members: list[Trajectory], provider=None) -> ClusterResult:
    result = ClusterResult(members=masked_members(members))
    successes, failures = result.successes, result.failures
    result.figures = {"successes": len(successes), "failures": len(failures)}
    if len(successes) < MIN_SUCCESSES:
        result.reason = f"only {len(successes)} successful trajectories; {MIN_SUCCESSES} are needed"
        return result
    training, held_out = split(successes)
    groups = group_steps(training)
    chosen = [g for g in groups if len(g.members) / len(training) > MAJORITY]
    chosen.sort(key=lambda g: _mean(g.positions))
    result.name = drafting.skill_name(" ".join(t.task for t in successes))
    result.steps = [
        {
            "text": g.text,
            "training_support": round(len(g.members) / len(training), 3),
            "failure_support": round(
                _mean([1.0 if coverage(f, [g]) == 1.0 else 0.0 for f in failures]), 3
            )
            if failures
            else None,
        }
        for g in chosen
    ]
    if not chosen:
        result.reason = "no step is shared by a majority of the successful trajectories"
        return result
    result.draft = render_draft(result.name, [t.task for t in successes], chosen, len(successes))
    discriminating = [
        s for s in result.steps if s["failure_support"] is None or s["failure_support"] <= MAJORITY
    ]
    held_cover = _mean([coverage(t, chosen) for t in held_out])
    fail_cover = _mean([coverage(t, chosen) for t in failures]) if failures else None
    result.figures.update(
        {
            "training": len(training),
            "held_out": len(held_out),
            "held_out_coverage": round(held_cover, 3),
            "failure_coverage": None if fail_cover is None else round(fail_cover, 3),
        }
    )
    if failures and not discriminating:
        result.reason = (
            "the failed trajectories took the same steps: the steps do not explain success "
            "(a chance correlation)"
        )
        return result
    if fail_cover is not None:
        lift = held_cover - fail_cover
        result.figures["lift"] = round(lift, 3)
        if held_cover < HELD_OUT_COVERAGE or lift < MIN_LIFT:
            result.reason = (
                f"held-out successes follow {held_cover:.0%} of the steps and failures "
                f"{fail_cover:.0%}: too little difference to credit the steps"
            )
            return result
    elif held_cover < HELD_OUT_COVERAGE_NO_CONTRAST:
        result.reason = (
            f"no failed runs to contrast, and held-out successes follow only {held_cover:.0%} "
            "of the steps"
        )
        return result
    if provider is not None:
        return _model_check(result, held_out, failures, provider)
    result.kept = True
    result.reason = (
        f"{len(chosen)} step(s) shared by most successes; held-out successes follow "
        f"{held_cover:.0%} of them"
        + (f", failures {fail_cover:.0%}" if fail_cover is not None else "")
    )
    return result


PLAN_PROMPT = "Plan how to do the task. Answer with a short numbered list of steps."
JUDGE_PROMPT = """Two plans for the same task, and the steps a successful run actually took.
Score how likely each plan is to succeed, from 0 to 1. Answer with one JSON object
{"without": number, "with": number} (the first plan is "without", the second is "with")."""


def _model_check(result: ClusterResult, held_out, failures, provider) -> ClusterResult:
    """The same held-out cases, planned with and without the skill, judged by the model."""
    result.method = f"model {provider.kind}:{provider.model}"
    cases = held_out[:MAX_MODEL_CASES]
    gains = []
    try:
        for case in cases:
            plain = provider.chat(
                [
                    {"role": "system", "content": PLAN_PROMPT},
                    {"role": "user", "content": case.task},
                ]
            ).text
            skilled = provider.chat(
                [
                    {
                        "role": "system",
                        "content": f"{PLAN_PROMPT}\nUse this skill:\n{result.draft}",
                    },
                    {"role": "user", "content": case.task},
                ]
            ).text
            verdict = drafting.ask_json(
                provider,
                JUDGE_PROMPT,
                f"TASK: {case.task}\nPLAN WITHOUT: {plain}\nPLAN WITH: {skilled}\n"
                f"WHAT SUCCEEDED: {'; '.join(case.steps)}",
            )
            gains.append(float(verdict["with"]) - float(verdict["without"]))
    except (ProviderError, KeyError, TypeError, ValueError) as error:
        result.reason = f"the model check failed ({error}); not kept without it"
        return result
    gain = _mean(gains)
    result.figures.update({"model_cases": len(gains), "model_gain": round(gain, 3)})
    result.kept = gain >= MODEL_MIN_GAIN
    result.reason = (
        f"with the skill, the model judged held-out cases {gain:+.2f} better"
        if result.kept
        else f"the skill did not help on held-out cases (gain {gain:+.2f})"
    )
    return result
