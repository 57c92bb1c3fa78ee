"""The organization's retrieval suite, built from context records, and the recall check of a
re-embed: the suite replayed with the active embedding model as the baseline and the new one
as the candidate, reporting recall@k of both before anyone switches.

A case is one rated turn: the query of the run's first model call, the memories its model
calls were sent (`ContextRecordItem` status `sent`) as what good looks like, the agent's read
scopes and the record's time as `as_of`. Only runs a person rated a success count ("sent and
confirmed useful"); ratings come from the run-outcome sources of `cadre.agents.ratings`.
"""

from __future__ import annotations

from django.db import transaction
from django.db.models import CharField
from django.db.models.functions import Cast
from django.utils.translation import gettext

from cadre.agents.evaluation.models import EvalCase, EvalRun, EvalSuite
from cadre.agents.evaluation.services import eval_run_start
from cadre.agents.models import Run
from cadre.agents.ratings import RUN_OUTCOMES
from cadre.agents.runtime.records.grants import scope_keys_for
from cadre.errors import Conflict, InvalidInput
from cadre.governance import audit
from cadre.identifiers import parse_pks
from cadre.memory import embeddings
from cadre.memory import selectors as memory_selectors
from cadre.memory.models import ContextRecordItem, EmbeddingModel, Memory
from cadre.tenancy.actors import Actor, system_actor

RETRIEVAL_SUITE = "Retrieval: rated turns"
MAX_RECORDS = 5_000  # the newest model-call records looked at per refresh


def rated_successes(organization_id: int, run_ids: list[str]) -> set[str]:
    """The runs among `run_ids` that a person rated a success."""
    successes: set[str] = set()
    for _, lookup in RUN_OUTCOMES.items():
        successes |= {run for run, outcome in lookup(organization_id, run_ids).items()
                      if outcome == "success"}  # fmt: skip
    return successes


def _suite(actor: Actor) -> EvalSuite:
    suite, _ = EvalSuite.objects.get_or_create(
        organization=actor.organization,
        name=RETRIEVAL_SUITE,
        defaults={
            "kind": EvalSuite.Kind.RETRIEVAL,
            "description": "Rated turns: the query and the memories it was sent. Built from "
            "context records; a re-embed replays it old model against new.",
            "created_by": actor.member,
        },
    )
    if suite.kind != EvalSuite.Kind.RETRIEVAL:
        raise Conflict(
            gettext("A suite named %(retrieval_suite)r exists and is not a retrieval suite.")
            % {"retrieval_suite": RETRIEVAL_SUITE},
            code="duplicate_name",
        )
    return suite


@transaction.atomic
def retrieval_suite_refresh(*, actor: Actor) -> tuple[EvalSuite, int]:
    """The organization's retrieval suite with a case for every rated-success run that has
    none yet (`evaluation.manage`); returns the suite and how many cases were added.

    A turn is its person's: without `memory.personal` only the actor's own turns are taken
    (the system, checking a re-embed, takes every one). A case keeps its author, and replays
    as them; the system's cases replay as the person whose turn it was."""
    actor.require("evaluation.manage")
    suite = _suite(actor)
    organization = actor.organization
    # Through the memory gate: every turn for the system and `memory.personal`, else those of
    # the agents serving the actor; and of those, runs the actor's own (a delegated run of
    # someone else's agent is theirs).
    records = memory_selectors.turn_records(actor)
    if actor.kind != "system" and not actor.has("memory.personal"):
        member = memory_selectors.acting_member(actor)
        own_runs = (
            Run.objects.filter(organization=organization, member=member)
            .annotate(key=Cast("pk", CharField()))
            .values("key")
        )
        records = records.filter(run_id__in=own_runs) if member else records.none()
    records = list(
        records.exclude(query="")
        .exclude(run_id="")
        .order_by("-created_at", "-pk")
        .values("pk", "run_id", "step_id", "query", "created_at")[:MAX_RECORDS]
    )
    done = {
        str(run)
        for run in EvalCase.objects.filter(suite=suite, source_run__isnull=False).values_list(
            "source_run_id", flat=True
        )
    }
    useful = rated_successes(organization.pk, sorted({r["run_id"] for r in records} - done))
    by_run: dict[str, list[dict]] = {}
    for record in records:
        if record["run_id"] in useful:
            by_run.setdefault(record["run_id"], []).append(record)
    if not by_run:
        return suite, 0
    sent: dict[int, list[int]] = {}
    for context_id, memory_id in (
        ContextRecordItem.objects.filter(
            context_id__in=[r["pk"] for rs in by_run.values() for r in rs],
            status=ContextRecordItem.Status.SENT,
            memory__deleted_at__isnull=True,
            memory__purged_at__isnull=True,
        )
        .exclude(memory__status=Memory.Status.DELETED)
        .order_by("context_id", "rank")
        .values_list("context_id", "memory_id")
    ):
        sent.setdefault(context_id, []).append(memory_id)
    runs = {
        str(run.pk): run
        for run in Run.objects.filter(
            organization=organization, pk__in=parse_pks(by_run)
        ).select_related("agent", "agent__member")
    }
    # What the case expects is only what its author may read (the gate narrows it).
    scopes_of = {
        memory_id: key
        for memory_id, key in memory_selectors.memory_queryset(actor)
        .filter(pk__in={m for ids in sent.values() for m in ids})
        .values_list("pk", "scope_key")
    }
    cases = []
    for run_id, run_records in by_run.items():
        run_records.sort(key=lambda r: (r["created_at"], r["pk"]))  # the first model call first
        expected = list(dict.fromkeys(m for r in run_records for m in sent.get(r["pk"], [])))
        run = runs.get(run_id)
        if not expected or run is None:
            continue
        read_scopes = (run.grants or {}).get("read_scopes") or []
        scopes = scope_keys_for(run.agent, read_scopes) if read_scopes and run.agent else []
        scopes = list(dict.fromkeys([*scopes, *(scopes_of[m] for m in expected if m in scopes_of)]))
        first = run_records[0]
        cases.append(
            EvalCase(
                organization=organization,
                suite=suite,
                title=f"Run {run_id}, model call {first['step_id']}",
                # the query as the model call was made: the model's side (placeholders)
                input_text=first["query"],
                member_id=run.member_id,
                scopes=scopes,
                as_of=first["created_at"],
                expectations={"expected_memories": expected},
                source=EvalCase.Source.TURN,
                source_run=run,
                created_by=actor.member,
            )
        )
    EvalCase.objects.bulk_create(cases)
    if cases:
        audit.record(
            actor=actor, action="evaluation.case.import", target=suite,
            after={"cases": len(cases), "from": "context_records"},
        )  # fmt: skip
    return suite, len(cases)


def recall_check_start(*, actor: Actor, model: EmbeddingModel) -> EvalRun | None:
    """Refresh the retrieval suite and replay it with the active embedding model as the
    baseline and `model` as the candidate (queued); None when the suite has no cases."""
    active = embeddings.current_model(actor.organization)
    if active is not None and active.pk == model.pk:
        raise InvalidInput(
            gettext("%(pk)s is already the active model.") % {"pk": model.pk}, code="already_active"
        )
    suite, _ = retrieval_suite_refresh(actor=actor)
    if not suite.cases.exists():
        return None
    baseline = {"kind": "embedding", "embedding_model": active.pk} if active else None
    return eval_run_start(
        actor=actor,
        suite=suite,
        candidate={"kind": "embedding", "embedding_model": model.pk},
        baseline=baseline,
    )


def latest_recall_check(organization_id: int, model_id: str) -> EvalRun | None:
    """The organization's newest retrieval-suite replay with `model_id` as the candidate (in
    any state: the console shows it queued, running or finished)."""
    return (
        EvalRun.objects.filter(
            organization_id=organization_id,
            suite__kind=EvalSuite.Kind.RETRIEVAL,
            candidate__kind="embedding",
            candidate__embedding_model=model_id,
        )
        .select_related("suite")
        .order_by("-created_at", "-pk")
        .first()
    )


def reembed_filled(task, model: EmbeddingModel) -> dict:
    """Registered on `cadre.memory.activation.REEMBED_FILLED`: a held re-embed has every vector
    under `model`, so replay the retrieval suite old vs new for the admin to judge."""
    actor = system_actor(
        task.organization,
        label="re-embed recall check",
        # The cases it builds quote people's turns to the admins who read the results.
        reason="build the retrieval suite from rated turns to replay a re-embed",
        audit_reads=True,
    )
    run = recall_check_start(actor=actor, model=model)
    return {"kind": "evaluation_run", "evaluation_run": run.pk if run else None}
