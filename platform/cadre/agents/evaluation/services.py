"""Write paths of evaluation: suites, cases (written, saved from a turn, imported from JSONL),
and replays (started here, executed by a Celery task, resumable case by case).

Evaluation is an admin's tool (`evaluation.manage` to build, `evaluation.view` to read): a case
is a window on memory, so what it may reach is its author's reach. Its scopes and expected
memories must be ones the author may read (the memory gate's own rules), a replay runs as the
author, and a person's turn becomes a case only for that person or a holder of
`memory.personal`, masked like a transcript."""

from __future__ import annotations

import json

from django.db import IntegrityError, transaction
from django.utils import timezone, translation
from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext

from cadre import queues
from cadre.agents.evaluation import judge as judge_rubric
from cadre.agents.evaluation.compare import aggregate, compare_case
from cadre.agents.evaluation.models import EvalCase, EvalResult, EvalRun, EvalSuite
from cadre.agents.evaluation.replay import clean_side, replay_case, resolve_side
from cadre.agents.models import AgentTemplate, Run, Step
from cadre.agents.runtime.records.grants import scope_keys_for
from cadre.agents.runtime.records.runs import model_side
from cadre.errors import Conflict, InvalidInput, NotFound, NotPermitted
from cadre.governance import audit
from cadre.governance.budgets import account_for_actor, account_for_member, usage_admit
from cadre.governance.masking.engine import mask
from cadre.governance.masking.vault import EphemeralVault
from cadre.identifiers import parse_pk
from cadre.llm import BudgetExceeded
from cadre.llm.metering import Account, charged_to, purpose
from cadre.memory import selectors as memory_selectors
from cadre.memory.models import ContextRecordItem
from cadre.tenancy.actors import Actor, system_actor
from cadre.tenancy.languages import member_language, organization_language
from cadre.tenancy.models import Member

# The replay task (evaluation/tasks.py), queued by name: the task module imports this one.
EVAL_RUN_TASK = "cadre.agents.evaluation.tasks.eval_run_execute"
MAX_IMPORT_LINES = 5_000
RESULT_BATCH = 50
# The purposes a replay's model calls are metered under (docs/budgets.md).
REPLAY_PURPOSE = "evaluation.replay"
JUDGE_PURPOSE = "evaluation.judge"
MAX_TEXT = 20_000
EXPECTATION_KEYS = (
    "reference_reply",
    "required_facts",
    "forbidden_facts",
    "expected_tool_calls",
    "expected_policy",
    "expected_memories",
    "min_memory_recall",
)
POLICY_OUTCOMES = ("allow", "modify", "deny", "require_confirmation")
MAX_DEPTH = 32  # nesting of a case's JSON values (conversation, tool results, expectations)
PERSONAL_PERMISSION = memory_selectors.PERSONAL_PERMISSION


# --- suites ----------------------------------------------------------------------------------


def _suite_snapshot(suite: EvalSuite) -> dict:
    return {
        "name": suite.name,
        "kind": suite.kind,
        "template": suite.template_id,
        "regression_threshold": suite.regression_threshold,
        "judge": suite.judge,
    }


def _clean_threshold(value) -> float:
    try:
        value = float(value)
    except (TypeError, ValueError):
        value = -1.0
    if not 0 <= value <= 1:
        raise InvalidInput(
            gettext("regression_threshold must be a fraction between 0 and 1."),
            details={"regression_threshold": ["Between 0 and 1."]},
        )
    return value


@transaction.atomic
def suite_create(
    *,
    actor: Actor,
    name: str,
    kind: str = EvalSuite.Kind.CONVERSATION,
    template: AgentTemplate | None = None,
    regression_threshold: float = 0.05,
    description: str = "",
    judge: dict | None = None,
) -> EvalSuite:
    actor.require("evaluation.manage")
    if kind not in EvalSuite.Kind.values:
        raise InvalidInput(
            gettext("kind must be conversation or retrieval."), details={"kind": ["Unknown."]}
        )
    if template is not None and template.organization_id != actor.organization.pk:
        raise NotFound(gettext("No such template."))
    suite = EvalSuite(
        organization=actor.organization,
        name=(name or "").strip()[:200],
        kind=kind,
        template=template,
        regression_threshold=_clean_threshold(regression_threshold),
        description=description or "",
        judge=judge_rubric.clean_judge(actor.organization.pk, judge),
        created_by=actor.member,
    )
    if not suite.name:
        raise InvalidInput(gettext("A suite needs a name."), details={"name": ["Required."]})
    try:
        with transaction.atomic():
            suite.save()
    except IntegrityError:
        raise Conflict(gettext("A suite of that name exists."), code="duplicate_name") from None
    audit.record(
        actor=actor, action="evaluation.suite.create", target=suite, after=_suite_snapshot(suite)
    )
    return suite


@transaction.atomic
def suite_update(*, actor: Actor, suite: EvalSuite, **changes) -> EvalSuite:
    actor.require("evaluation.manage")
    before = _suite_snapshot(suite)
    if "regression_threshold" in changes:
        suite.regression_threshold = _clean_threshold(changes["regression_threshold"])
    if "name" in changes:
        suite.name = (changes["name"] or "").strip()[:200]
        if not suite.name:
            raise InvalidInput(gettext("A suite needs a name."), details={"name": ["Required."]})
    if "description" in changes:
        suite.description = changes["description"] or ""
    if "judge" in changes:
        suite.judge = judge_rubric.clean_judge(suite.organization_id, changes["judge"])
    try:
        with transaction.atomic():
            suite.save(update_fields=["name", "description", "regression_threshold", "judge"])
    except IntegrityError:
        raise Conflict(gettext("A suite of that name exists."), code="duplicate_name") from None
    audit.record(
        actor=actor, action="evaluation.suite.update", target=suite, before=before,
        after=_suite_snapshot(suite),
    )  # fmt: skip
    return suite


@transaction.atomic
def suite_delete(*, actor: Actor, suite: EvalSuite) -> None:
    actor.require("evaluation.manage")
    audit.record(
        actor=actor, action="evaluation.suite.delete", target=suite, before=_suite_snapshot(suite)
    )
    suite.delete()


# --- cases -----------------------------------------------------------------------------------


def _masked(value, vault, organization):
    """Every string in `value` masked with the case's vault (one placeholder per value)."""
    if isinstance(value, str):
        return mask(value, conversation=vault, organization=organization).text
    if isinstance(value, list):
        return [_masked(item, vault, organization) for item in value]
    if isinstance(value, dict):
        return {key: _masked(item, vault, organization) for key, item in value.items()}
    return value


def _error(errors: list[str], condition: bool, message: str) -> None:
    if condition:
        errors.append(message)


def _unstorable(value, depth: int = 0) -> str | None:
    """What in `value` PostgreSQL cannot store or a replay should not walk: a NUL character,
    a lone surrogate, nesting past MAX_DEPTH; None when it is fine."""
    if depth > MAX_DEPTH:
        return gettext("nested deeper than %(depth)s levels") % {"depth": MAX_DEPTH}
    if isinstance(value, str):
        if "\x00" in value:
            return gettext("a NUL character")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return gettext("a character that is not valid Unicode")
        return None
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return gettext("a number JSON cannot hold")
    if isinstance(value, list):
        items = value
    elif isinstance(value, dict):
        items = [*value.keys(), *value.values()]
    else:
        return None
    for item in items:
        problem = _unstorable(item, depth + 1)
        if problem:
            return problem
    return None


def _clean_scopes(author: Actor, scopes, errors: list[str]) -> list[str]:
    """The case's scope keys, normalized; a key the author may not read is an error (a case is
    a window on memory, and its window is its author's)."""
    if not isinstance(scopes, list) or any(not isinstance(s, str) for s in scopes):
        errors.append(gettext("scopes: a list of memory scope keys"))
        return []
    cleaned: list[str] = []
    for raw in scopes:
        try:
            key = memory_selectors.parse_scope_key(raw)
        except InvalidInput:
            errors.append(gettext("scopes: %(key)r is not a scope key") % {"key": raw[:200]})
            continue
        if not memory_selectors.can_read_scope(author, key):
            errors.append(gettext("scopes: %(key)s is not a scope you may read") % {"key": key})
            continue
        cleaned.append(key)
    return list(dict.fromkeys(cleaned))


def _clean_expected_memories(author: Actor, memories, errors: list[str]) -> list[int]:
    """The expected memory ids, each one the author may read. A memory they may not read and
    one that does not exist are refused alike: the case is no oracle for memory ids."""
    if not isinstance(memories, list) or any(
        isinstance(m, bool) or not isinstance(m, int) for m in memories
    ):
        errors.append(gettext("expected_memories: a list of memory ids"))
        return []
    ids = list(dict.fromkeys(memories))
    keys = [pk for pk in ids if parse_pk(pk) is not None]
    readable = set(
        memory_selectors.memory_queryset(author).filter(pk__in=keys).values_list("pk", flat=True)
    )
    unreadable = [pk for pk in ids if pk not in readable]
    if unreadable:
        errors.append(
            gettext("expected_memories: not a memory you may read: %(ids)s")
            % {"ids": ", ".join(str(pk) for pk in unreadable[:20])}
        )
    return [pk for pk in ids if pk in readable]


def clean_case(organization, data, *, author: Actor) -> tuple[dict, list[str]]:
    """A case's fields from an incoming object (API body or JSONL line), and what is wrong with
    it; nothing is masked yet. `author` is who writes it: its scopes and expected memories
    must be theirs to read."""
    errors: list[str] = []
    if not isinstance(data, dict):
        return {}, ["a case must be a JSON object"]
    problem = _unstorable(data)
    if problem:
        return {}, [gettext("the case holds %(problem)s") % {"problem": problem}]
    text = data.get("input", data.get("input_text"))
    _error(
        errors,
        not isinstance(text, str) or not text.strip(),
        "input: a non-empty string is required",
    )
    _error(
        errors,
        isinstance(text, str) and len(text) > MAX_TEXT,
        f"input: at most {MAX_TEXT} characters",
    )
    conversation = data.get("conversation") or []
    _error(
        errors,
        not isinstance(conversation, list)
        or any(
            not isinstance(t, dict)
            or t.get("role") not in ("user", "assistant", "system")
            or not isinstance(t.get("content", ""), str)
            for t in conversation
        ),
        "conversation: a list of {role: user|assistant|system, content: string}",
    )
    scopes = _clean_scopes(author, data.get("scopes") or [], errors)
    as_of = data.get("as_of")
    moment = timezone.now()
    if as_of is not None:
        try:
            parsed = parse_datetime(as_of) if isinstance(as_of, str) else None
        except ValueError:  # well formed, but no such moment (month 13)
            parsed = None
        _error(errors, parsed is None, "as_of: an ISO 8601 date and time")
        if parsed is not None:
            moment = parsed if timezone.is_aware(parsed) else timezone.make_aware(parsed)
    tool_results = data.get("tool_results") or []
    _error(
        errors,
        not isinstance(tool_results, list)
        or any(
            not isinstance(t, dict)
            or not isinstance(t.get("name"), str)
            or not isinstance(t.get("arguments", {}), dict)
            for t in tool_results
        ),
        "tool_results: a list of {name, arguments: object, result}",
    )
    expectations = (
        dict(data.get("expectations") or {})
        if isinstance(data.get("expectations") or {}, dict)
        else None
    )
    _error(errors, expectations is None, "expectations: an object")
    expectations = expectations or {}
    for key in EXPECTATION_KEYS:  # also accepted at the top level of a JSONL line
        if key in data and key not in expectations:
            expectations[key] = data[key]
    unknown = sorted(set(expectations) - set(EXPECTATION_KEYS))
    _error(errors, bool(unknown), f"expectations: unknown keys {', '.join(unknown)[:500]}")
    for key in ("required_facts", "forbidden_facts"):
        value = expectations.get(key, [])
        _error(
            errors,
            not isinstance(value, list) or any(not isinstance(f, str) or not f for f in value),
            f"{key}: a list of non-empty strings",
        )
    calls = expectations.get("expected_tool_calls", [])
    _error(
        errors,
        not isinstance(calls, list)
        or any(not isinstance(c, dict) or not isinstance(c.get("name"), str) for c in calls),
        "expected_tool_calls: a list of {name, arguments?}",
    )
    policy = expectations.get("expected_policy")
    _error(
        errors,
        policy is not None and (not isinstance(policy, str) or policy not in POLICY_OUTCOMES),
        f"expected_policy: one of {', '.join(POLICY_OUTCOMES)}",
    )
    if "expected_memories" in expectations:
        expectations["expected_memories"] = _clean_expected_memories(
            author, expectations["expected_memories"], errors
        )
    member = None
    member_id = data.get("member")
    if member_id is not None:
        member_pk = parse_pk(member_id) if isinstance(member_id, int) else None
        member = (
            Member.objects.filter(pk=member_pk, organization=organization).first()
            if member_pk is not None
            else None
        )
        _error(errors, member is None, "member: no such member in this organization")
    title = data.get("title", "")
    _error(errors, not isinstance(title, str), "title: a string")
    fields = {
        "title": (title or "")[:200] if isinstance(title, str) else "",
        "input_text": text,
        "conversation": conversation,
        "scopes": scopes,
        "as_of": moment,
        "tool_results": tool_results,
        "expectations": expectations,
        "member": member,
    }
    return fields, errors


def _case(suite: EvalSuite, actor: Actor, fields: dict, source: str, source_run=None) -> EvalCase:
    vault = EphemeralVault()
    organization = suite.organization
    expectations = dict(fields["expectations"])
    for key in ("reference_reply", "required_facts", "forbidden_facts", "expected_tool_calls"):
        if key in expectations:
            expectations[key] = _masked(expectations[key], vault, organization)
    return EvalCase(
        organization=organization,
        suite=suite,
        # a title may quote the turn ("what bob.private@… asked"): masked like the rest
        title=_masked(fields["title"], vault, organization)[:200],
        input_text=_masked(fields["input_text"], vault, organization),
        conversation=_masked(fields["conversation"], vault, organization),
        member=fields["member"],
        scopes=fields["scopes"],
        as_of=fields["as_of"],
        tool_results=_masked(fields["tool_results"], vault, organization),
        expectations=expectations,
        source=source,
        source_run=source_run,
        created_by=actor.member,
    )


@transaction.atomic
def case_create(*, actor: Actor, suite: EvalSuite, data: dict) -> EvalCase:
    """A case written by hand (or sent through the API), masked like a transcript."""
    actor.require("evaluation.manage")
    fields, errors = clean_case(suite.organization, data, author=actor)
    if errors:
        raise InvalidInput(gettext("The case is not valid."), details={"case": errors})
    case = _case(suite, actor, fields, EvalCase.Source.MANUAL)
    case.save()
    audit.record(
        actor=actor,
        action="evaluation.case.create",
        target=case,
        after={"suite": suite.pk, "source": case.source},
    )
    return case


@transaction.atomic
def cases_import_jsonl(*, actor: Actor, suite: EvalSuite, content: bytes | str) -> list[EvalCase]:
    """One case per JSONL line. A bad line refuses the whole file (InvalidInput listing every
    bad line by number); nothing is imported then."""
    actor.require("evaluation.manage")
    if isinstance(content, bytes):
        try:
            content = content.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidInput(
                gettext("The file is not UTF-8 text."), code="invalid_jsonl"
            ) from None
    lines = [(n, line) for n, line in enumerate(content.splitlines(), start=1) if line.strip()]
    if not lines:
        raise InvalidInput(gettext("The file holds no cases."), code="invalid_jsonl")
    if len(lines) > MAX_IMPORT_LINES:
        raise InvalidInput(
            gettext("At most %(max_import_lines)s cases per file.")
            % {"max_import_lines": MAX_IMPORT_LINES},
            code="invalid_jsonl",
        )
    problems: list[dict] = []
    cleaned: list[dict] = []
    with memory_selectors.scope_keys_memo():  # the author's reach computed once per file
        for number, line in lines:
            try:
                data = json.loads(line)
            except ValueError as error:
                message = getattr(error, "msg", str(error))
                problems.append({"line": number, "errors": [f"not JSON: {message}"]})
                continue
            except RecursionError:
                message = gettext("not JSON: nested too deeply")
                problems.append({"line": number, "errors": [message]})
                continue
            fields, errors = clean_case(suite.organization, data, author=actor)
            if errors:
                problems.append({"line": number, "errors": errors})
            else:
                cleaned.append(fields)
    if problems:
        raise InvalidInput(
            gettext("%(count)s line(s) are not valid cases; nothing was imported.")
            % {"count": len(problems)},
            code="invalid_jsonl",
            details={"lines": problems},
        )
    cases = EvalCase.objects.bulk_create(
        [_case(suite, actor, fields, EvalCase.Source.IMPORT) for fields in cleaned]
    )
    audit.record(
        actor=actor, action="evaluation.case.import", target=suite,
        after={"cases": len(cases)},
    )  # fmt: skip
    return cases


@transaction.atomic
def case_from_turn(
    *,
    actor: Actor,
    suite: EvalSuite,
    run: Run,
    step_index: int | None = None,
    expectations: dict | None = None,
    title: str = "",
) -> EvalCase:
    """A reviewer's case from a real turn: its input and the conversation before it as the model
    saw them (masked), the agent's read scopes, the memories as of the turn's start, the tools'
    recorded results, and — unless given — the turn's reply, tool calls, policy outcome (and,
    for a retrieval suite, the memories it was sent) as what good looks like. `step_index`
    names the model call whose messages give the conversation (default: the first).

    A turn is its person's: only they, or a holder of `memory.personal` (never a key: no key
    scope carries it), save it as a case."""
    actor.require("evaluation.manage")
    if run.organization_id != actor.organization.pk:
        raise NotFound(gettext("No such run."))
    member = memory_selectors.acting_member(actor)
    own = member is not None and run.member_id == member.pk
    if not (actor.has("agent.view") or own):
        raise NotFound(
            gettext("No such run.")
        )  # a transcript the reviewer may not read is not there
    if not (own or actor.has(PERSONAL_PERMISSION)):
        raise NotPermitted(
            gettext(
                "Saving another member's turn as a case needs the 'memory.personal' permission."
            )
        )
    if run.status != Run.Status.COMPLETED:
        raise InvalidInput(
            gettext("Only a completed turn can become a case."), code="run_not_completed"
        )
    steps = list(run.steps.filter(status=Step.Status.COMPLETED).order_by("index"))
    model_calls = [s for s in steps if s.kind == Step.Kind.MODEL_CALL]
    if step_index is not None:
        model_calls = [s for s in model_calls if s.index == step_index]
        if not model_calls:
            raise InvalidInput(
                gettext("That step is not a model call of the run."), code="invalid_step"
            )
    messages = model_calls[0].input.get("messages", []) if model_calls else []
    last_user = max(
        (i for i, m in enumerate(messages) if m.get("role") == "user"), default=len(messages)
    )
    conversation = [
        {"role": m["role"], "content": m.get("content") or ""}
        for m in messages[:last_user]
        if m.get("role") in ("user", "assistant")
    ]
    tool_results = [
        {"name": s.name, "arguments": s.input.get("arguments", {}), "result": s.output}
        for s in steps
        if s.kind == Step.Kind.TOOL_CALL
    ]
    policy = next((s.output for s in steps if s.name == "input_policy"), {}) or {}
    read_scopes = (run.grants or {}).get("read_scopes") or []
    scopes = scope_keys_for(run.agent, read_scopes) if read_scopes else []
    proposed = {
        "reference_reply": model_side(run.output or {}),
        "expected_tool_calls": [
            {"name": t["name"], "arguments": t["arguments"]} for t in tool_results
        ],
        "expected_policy": policy.get("action", "allow")
        if policy.get("action") in POLICY_OUTCOMES
        else "allow",
    }
    if suite.kind == EvalSuite.Kind.RETRIEVAL:
        sent = list(
            dict.fromkeys(
                ContextRecordItem.objects.filter(
                    context__organization_id=run.organization_id,
                    context__run_id=str(run.pk),
                    status=ContextRecordItem.Status.SENT,
                )
                .order_by("context_id", "rank")
                .values_list("memory_id", flat=True)
            )
        )
        # Proposed, not asked for: what the author may not read (deleted since) is left out.
        readable = set(
            memory_selectors.memory_queryset(actor).filter(pk__in=sent).values_list("pk", flat=True)
        )
        proposed["expected_memories"] = [pk for pk in sent if pk in readable]
    data = {
        "title": title or f"Turn of run {run.pk}",
        "input": model_side(run.input or {}) or " ",
        "conversation": conversation,
        "scopes": scopes,
        "as_of": run.created_at.isoformat(),
        "tool_results": tool_results,
        "expectations": {**proposed, **(expectations or {})},
        "member": run.member_id,
    }
    fields, errors = clean_case(suite.organization, data, author=actor)
    if errors:
        raise InvalidInput(gettext("The case is not valid."), details={"case": errors})
    # The model's side (placeholders) masked once more with the one engine: what the turn's
    # masking let through (a reply quoting a value, a tool's result) is caught here.
    case = _case(suite, actor, fields, EvalCase.Source.TURN, source_run=run)
    case.save()
    audit.record(
        actor=actor, action="evaluation.case.create", target=case,
        after={"suite": suite.pk, "source": case.source, "run": run.pk},
    )  # fmt: skip
    return case


@transaction.atomic
def case_delete(*, actor: Actor, case: EvalCase) -> None:
    actor.require("evaluation.manage")
    audit.record(
        actor=actor, action="evaluation.case.delete", target=case, before={"suite": case.suite_id}
    )
    case.delete()


# --- replays ---------------------------------------------------------------------------------


@transaction.atomic
def eval_run_start(
    *, actor: Actor, suite: EvalSuite, candidate: dict, baseline: dict | None = None
) -> EvalRun:
    """A replay of `suite`: queued, executed by the `eval_run_execute` task after commit."""
    actor.require("evaluation.manage")
    candidate = clean_side(suite, candidate)
    baseline = clean_side(suite, baseline or {"kind": "current"})
    if not suite.cases.exists():
        raise InvalidInput(gettext("The suite has no cases."), code="empty_suite")
    # Refused here, where the person starts it, when a hard budget could not hold a call now.
    usage_admit(
        account=account_for_actor(actor, template_id=suite.template_id, purpose=REPLAY_PURPOSE)
    )
    run = EvalRun.objects.create(
        organization=suite.organization,
        suite=suite,
        baseline=baseline,
        candidate=candidate,
        created_by=actor.member,
    )
    audit.record(
        actor=actor, action="evaluation.run.start", target=run,
        after={"suite": suite.pk, "baseline": baseline, "candidate": candidate},
    )  # fmt: skip
    transaction.on_commit(lambda: queues.enqueue(EVAL_RUN_TASK, run.pk))
    return run


def replay_account(run: EvalRun) -> Account:
    """What a replay's model calls (both sides and the judge) are charged to: the member who
    started it (else the organization) and the suite's template."""
    template_id = run.suite.template_id
    if run.created_by is not None:
        return account_for_member(run.created_by, template_id=template_id, purpose=REPLAY_PURPOSE)
    return Account(
        organization_id=run.organization_id, template_id=template_id, purpose=REPLAY_PURPOSE
    )


def eval_run_execute(run_id: int) -> str:
    """Replay every case of the run's suite on both sides, then aggregate (every model call
    charged to `replay_account`; a hard budget refusing one fails the run with
    `budget_exceeded`). Run in the language of who started it (else the organization's): the
    worker has no request, and what the replay writes (the offline model's replies, the
    judge's reasons) is read in it."""
    run = (
        EvalRun.objects.select_related(
            "suite", "suite__organization", "created_by", "created_by__organization"
        )
        .filter(pk=run_id)
        .first()
    )
    if run is None or run.status in (EvalRun.Status.COMPLETED, EvalRun.Status.FAILED):
        return run.status if run else "missing"
    with (
        translation.override(
            member_language(run.created_by)
            if run.created_by is not None
            else organization_language(run.suite.organization)
        ),
        charged_to(replay_account(run)),
    ):
        try:
            return _execute(run)
        except BudgetExceeded as exceeded:
            return _finish(run, failed=f"{exceeded.code}: {exceeded.message}"[:1000])


def _execute(run: EvalRun) -> str:
    """Idempotent: a case with a result is not replayed again."""
    if run.status == EvalRun.Status.QUEUED:
        run.status, run.started_at = EvalRun.Status.RUNNING, timezone.now()
        run.save(update_fields=["status", "started_at"])
    suite = run.suite
    try:
        baseline, candidate = resolve_side(suite, run.baseline), resolve_side(suite, run.candidate)
    except Exception as error:  # a side that cannot run fails the replay with the reason
        return _finish(run, failed=f"{type(error).__name__}: {error}"[:1000])
    done = set(run.results.values_list("case_id", flat=True))
    # One verdict cache: its keys name the chain (ids and version), so sides that share a
    # chain share verdicts and sides that do not never mix them.
    candidate.verdicts = baseline.verdicts
    pending: list[EvalResult] = []
    cases = suite.cases.select_related(
        "suite",
        "suite__organization",
        "organization",
        "created_by__organization",
        "member__organization",
    )
    try:
        judge = judge_rubric.judge_provider(suite)
    except Exception as error:  # an unreachable judge is recorded on each result, not fatal
        judge, judge_unavailable = None, f"{type(error).__name__}: {error}"[:500]
    else:
        judge_unavailable = ""
    for case in cases.exclude(pk__in=done).iterator(chunk_size=RESULT_BATCH):
        base, cand = replay_case(case, baseline), replay_case(case, candidate)
        if suite.judge:
            for outcome in (base, cand):
                if judge is None:
                    verdict = {"error": judge_rubric.JUDGE_ERROR, "detail": judge_unavailable}
                else:
                    with purpose(JUDGE_PURPOSE):
                        verdict = judge_rubric.judge_reply(
                            judge, suite.judge["rubric"], case, outcome["reply"]
                        )
                judge_rubric.apply(outcome, verdict)
        pending.append(
            EvalResult(
                run=run,
                case=case,
                baseline=base,
                candidate=cand,
                comparison=compare_case(base, cand),
                baseline_passed=base["passed"],
                candidate_passed=cand["passed"],
                regressed=base["passed"] and not cand["passed"],
            )
        )
        if len(pending) >= RESULT_BATCH:  # stored in batches: a redelivery resumes after them
            EvalResult.objects.bulk_create(pending, ignore_conflicts=True)
            pending = []
    EvalResult.objects.bulk_create(pending, ignore_conflicts=True)
    return _finish(run)


@transaction.atomic
def _finish(run: EvalRun, failed: str = "") -> str:
    if failed:
        run.status, run.error = EvalRun.Status.FAILED, failed
    else:
        results = list(run.results.values("baseline", "candidate", "comparison"))
        run.summary = aggregate(results, run.suite.regression_threshold)
        run.verdict = run.summary["verdict"]
        run.status = EvalRun.Status.COMPLETED
    run.finished_at = timezone.now()
    run.save(update_fields=["status", "error", "summary", "verdict", "finished_at"])
    audit.record(
        actor=system_actor(run.organization, label="evaluation"),
        action="evaluation.run.finish",
        target=run,
        after={"status": run.status, "verdict": run.verdict, "error": run.error},
    )
    return run.status
