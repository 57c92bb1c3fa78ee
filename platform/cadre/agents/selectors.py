"""Read paths for agents: usage and cost, agents and sessions, transcripts and the web chat."""

from __future__ import annotations

from datetime import timedelta

from django.db.models import Count, Max, Prefetch, Q, Sum
from django.db.models.expressions import RawSQL
from django.db.models.fields.json import KT
from django.utils import timezone

from cadre.agents.live import event_frame
from cadre.agents.models import (
    Agent,
    AgentMessage,
    AgentTemplate,
    Deployment,
    Run,
    RunEvent,
    Session,
    Step,
    TemplateVersion,
    ToolEffect,
    Wait,
)
from cadre.agents.runtime.records.delivery import NOTICES, run_notice
from cadre.governance.confirmations import queue_item
from cadre.governance.models import Confirmation
from cadre.identifiers import parse_pk, parse_pks
from cadre.llm.tool_sentences import failure_sentence, request_sentence
from cadre.memory.agent_scopes import AgentScope
from cadre.memory.models import ContextRecord, ContextRecordItem
from cadre.tenancy.actors import Actor, member_actor
from cadre.tenancy.models import Member

# The web chat shows a session's last CHAT_TURNS conversation runs and, beside them, the
# agent's last CHAT_SESSIONS sessions; a socket catches up CHAT_EVENTS_PAGE events at a time.
CHAT_TURNS = 50
CHAT_SESSIONS = 20
CHAT_EVENTS_PAGE = 200

USAGE_GROUPS = {
    "member": ("member_id", "member__display_name"),
    "agent": ("agent_id", "agent__name"),
    "template": ("version__template_id", "version__template__name"),
    "organization": ("organization_id", "organization__name"),
}


def usage_summary(actor: Actor, *, by: str = "agent", since=None, until=None) -> list[dict]:
    """Runs, tokens and cost of the runs the actor may see, grouped by `by`; `cache_hit_rate`
    is the share of input tokens a provider's prompt cache served."""
    key, label = USAGE_GROUPS[by]
    runs = Run.objects.restrict(actor, "view")
    if since is not None:
        runs = runs.filter(created_at__gte=since)
    if until is not None:
        runs = runs.filter(created_at__lt=until)
    rows = (
        runs.values(key, label)
        .annotate(
            runs=Count("id"),
            tokens_in=Sum("tokens_in"),
            tokens_out=Sum("tokens_out"),
            tokens_cached=Sum("tokens_cached"),
            cost=Sum("cost"),
        )
        .order_by("-cost", key)
    )
    return [
        {
            "id": row[key],
            "label": row[label],
            "runs": row["runs"],
            "tokens_in": row["tokens_in"] or 0,
            "tokens_out": row["tokens_out"] or 0,
            "tokens_cached": row["tokens_cached"] or 0,
            "cache_hit_rate": round((row["tokens_cached"] or 0) / row["tokens_in"], 4)
            if row["tokens_in"]
            else 0.0,
            "cost": str(row["cost"] or 0),
        }
        for row in rows
    ]


def template_names(organization_id: int, ids: list[int]) -> dict[int, str]:
    """{id: name} of the organization's templates among `ids` (for budgets and usage)."""
    return dict(
        AgentTemplate.objects.filter(organization_id=organization_id, pk__in=ids).values_list(
            "pk", "name"
        )
    )


# --- the console's reads: agents, sessions and their transcripts ---------------------------


def transcripts_readable(actor: Actor, queryset):
    """The sessions or runs of `queryset` (any model with `member` and `agent`) whose
    transcript the actor may read — the one gate for conversations, in the API and the console.

    A transcript is personal data: its subject (the session's member), the agent's owner (the
    member the agent serves) and holders of `memory.personal` read it. `agent.view` alone (an
    auditor, a business admin) sees that agents and sessions exist, never what was said, so
    another member's session is not found, not forbidden. Actions that need no transcript
    (cancelling or rating a run as a deployment manager) use `.restrict()` instead.
    """
    queryset = queryset.restrict(actor, "view")
    if actor is None or actor.has("memory.personal"):
        return queryset
    if actor.member is None:
        return queryset.none()
    me = actor.member.pk
    return queryset.filter(Q(member_id=me) | Q(agent__member_id=me))


def run_may_act(actor: Actor, run) -> bool:
    """May the actor cancel or rate `run`: the person it served, or a deployment manager.
    Checked before a request body is read, so a caller who may not act is refused (403), not
    told what their body lacks; the runtime services check it again."""
    own = actor.member is not None and actor.member.pk == run.member_id
    return own or actor.has("deployment.manage")


def agent_find(
    actor: Actor,
    *,
    member_id: int | None = None,
    position_id: int | None = None,
    version_id: int | None = None,
    status: str = "",
    text: str = "",
):
    """Agents the actor may see, narrowed by member, position, template version, status or
    a name fragment (agent or member)."""
    agents = Agent.objects.restrict(actor, "view").select_related(
        "member", "member__department", "version", "deployment"
    )
    if member_id:
        agents = agents.filter(member_id=member_id)
    if position_id:
        agents = agents.filter(member__positions=position_id)
    if version_id:
        agents = agents.filter(version_id=version_id)
    if status:
        agents = agents.filter(status=status)
    if text:
        agents = agents.filter(Q(name__icontains=text) | Q(member__display_name__icontains=text))
    return agents.distinct().order_by("name", "pk")


def agent_sessions_readable(actor: Actor, agent) -> tuple:
    """The agent's sessions whose transcript the actor may read, most recently active first,
    each with its `run_count`; and how many others the agent has (a session's title is its
    first message, so the ones the actor may not read are counted only)."""
    sessions = transcripts_readable(actor, agent.sessions.all())
    sessions = sessions.annotate(run_count=Count("runs")).order_by("-last_activity_at", "-pk")
    return sessions, agent.sessions.count() - sessions.count()


def agents_by_id(organization_id: int, ids) -> dict:
    """{id: agent} of the organization's agents among `ids`, with their members."""
    return {
        agent.pk: agent
        for agent in Agent.objects.filter(organization=organization_id, pk__in=ids).select_related(
            "member"
        )
    }


def template_find(actor: Actor, *, text: str = ""):
    """Templates the actor may see, by name, each with its latest and published version
    numbers and how many versions are not published; narrowed by a name or code fragment."""
    templates = (
        AgentTemplate.objects.restrict(actor, "view")
        .annotate(
            latest_number=Max("versions__number"),
            published_number=Max(
                "versions__number", filter=Q(versions__status=TemplateVersion.Status.PUBLISHED)
            ),
            open_versions=Count(
                "versions", filter=~Q(versions__status=TemplateVersion.Status.PUBLISHED)
            ),
        )
        .order_by("name", "pk")
    )
    if text:
        templates = templates.filter(Q(name__icontains=text) | Q(code__icontains=text))
    return templates


def deployment_find(actor: Actor, *, status: str = ""):
    """Deployments the actor may see, newest first, each with its `agent_count`; narrowed to
    one status when `status` is one."""
    deployments = (
        Deployment.objects.restrict(actor, "view")
        .select_related("template", "version")
        .annotate(agent_count=Count("agents"))
        .order_by("-created_at", "-pk")
    )
    if status in Deployment.Status.values:
        deployments = deployments.filter(status=status)
    return deployments


def chat_agents(actor: Actor):
    """The actor's own agents (never a colleague's, whatever the actor's permissions)."""
    if actor.member is None or not actor.has("chat.use"):
        return Agent.objects.none()
    return (
        Agent.objects.filter(organization=actor.organization, member=actor.member)
        .select_related("version", "deployment")
        .order_by("status", "name", "pk")
    )


def chat_session_get(actor: Actor, session_id: int):
    """One of the actor's own chat sessions, or None (another member's is not found)."""
    if actor.member is None or not actor.has("chat.use"):
        return None
    return (
        Session.objects.filter(
            organization=actor.organization, member=actor.member, agent__member=actor.member
        )
        .select_related("agent", "agent__version", "agent__deployment")
        .filter(pk=session_id)
        .first()
    )


def chat_sessions(agent, *, limit: int = CHAT_SESSIONS) -> list:
    """The agent's most recently active sessions (the chat page's sidebar); the caller has
    already checked that the agent is the actor's own (`chat_agents`)."""
    return list(agent.sessions.order_by("-last_activity_at", "-pk")[:limit])


def chat_confirmation_can_decide(confirmation: Confirmation, member_id: int | None) -> bool:
    """May this member decide the confirmation now: it is pending and they are a decider."""
    return (
        confirmation.status == Confirmation.Status.PENDING and member_id in confirmation.decider_ids
    )


def chat_confirmation_decision(confirmation: Confirmation) -> str:
    """What became of a confirmation, as its card in the transcript says it ("" while it is
    pending): who approved or rejected it, or that it expired or was cancelled."""
    status = confirmation.status
    if status == Confirmation.Status.PENDING:
        return ""
    if status == Confirmation.Status.EXPIRED:
        return "Decision: expired (nobody decided in time)."
    decider = confirmation.decided_by if confirmation.decided_by_id else None
    by = f" by {decider.display_name}" if decider is not None and decider.display_name else ""
    return f"Decision: {confirmation.get_status_display().lower()}{by}."


def chat_confirmation_lines(confirmation: Confirmation) -> list[dict]:
    """The confirmation's summary as the chat shows it to the person asked, in their language
    (`summary_lines`: {"text", "code"}): its arguments line replaced by what the call asks to
    do (`request_sentence`: "Send “hello” to All staff."), when the tool's arguments have a
    plain reading. The confirmation pages keep the arguments as they are."""
    lines = confirmation.summary_lines
    asked = request_sentence(confirmation.tool, confirmation.arguments)
    if not asked:
        return lines
    return [{"text": asked, "code": ""} if line["code"] else line for line in lines]


def chat_confirmation_summary(confirmation: Confirmation) -> str:
    """`chat_confirmation_lines` as one text (the web chat's socket)."""
    return "\n".join(
        f"{line['text']} {line['code']}" if line["code"] else line["text"]
        for line in chat_confirmation_lines(confirmation)
    )


def chat_confirmation_item(confirmation: Confirmation, member_id: int | None) -> dict:
    """A confirmation as the web chat's socket sends it, with whether this member decides and
    what became of it (`decision`)."""
    return {
        **queue_item(confirmation),
        "summary": chat_confirmation_summary(confirmation),
        "can_decide": chat_confirmation_can_decide(confirmation, member_id),
        "decision": chat_confirmation_decision(confirmation),
    }


def chat_confirmation_get(actor: Actor, session_id: int, confirmation_id: int):
    """A confirmation one of this session's runs waits on, or None: the web chat's page and
    socket decide only their own conversation's confirmations (another session's is not
    found). The caller has already checked that the session is the actor's (see
    `chat_session_get`)."""
    return Confirmation.objects.filter(
        organization=actor.organization,
        pk=confirmation_id,
        run_id__in=Run.objects.filter(session_id=session_id).values("pk"),
    ).first()


def chat_stream_from(session, runs=None) -> int:
    """The event id after which a live view of `session` streams: runs still going are sent
    from their first event (the page shows them as in progress); otherwise only what comes
    next. `runs` are the runs the page shows; without them, every run of the session."""
    if runs is None:
        unfinished = Run.objects.filter(session=session).exclude(status__in=Run.TERMINAL)
    else:
        unfinished = [run.pk for run in runs if not run.is_terminal]
    first = (
        RunEvent.objects.filter(run__in=unfinished).order_by("id").values_list("id", flat=True)
    ).first()
    if first is not None:
        return first - 1
    return RunEvent.objects.order_by("-id").values_list("id", flat=True).first() or 0


def chat_viewer_sees_errors(member_id: int | None) -> bool:
    """May this viewer read a run's internal error (the model endpoint's answer, an exception's
    text)? Those who manage models, as the chat page's "check it under Models" note; everyone
    else gets the run's short notice only (its `notice` event)."""
    member = (
        Member.objects.select_related("organization").filter(pk=member_id).first()
        if member_id is not None
        else None
    )
    return member is not None and member_actor(member).has("model.manage")


def event_carries_error(event: dict) -> bool:
    """Does the event carry a run's internal error (the `status` event of a failed run)?"""
    return "error" in (event["data"] or {})


def run_errors_visible(actor: Actor) -> bool:
    """May this API caller read runs' internal errors (the model endpoint's answer, an
    exception's text)? Those who manage models, as on the chat socket
    (`chat_viewer_sees_errors`); everyone else reads `run_error_public`."""
    return actor.has("model.manage")


def run_error_public(status: str, output: dict | None = None) -> dict:
    """A run's error as told to a reader who may not see the internal one: a stable code
    (`run_failed`, or `run_cancelled`) and the run's short notice, no internal details."""
    code = "run_cancelled" if status == Run.Status.CANCELLED else "run_failed"
    notice = (output or {}).get("notice", "")
    return {"error": code, "message": NOTICES.get(notice) or NOTICES.get(status, NOTICES["failed"])}


def run_event_data_for(data: dict, status: str, output: dict | None, visible: bool) -> dict:
    """A run event's data for one reader: a `status` event's internal `error` replaced by
    `run_error_public` unless the reader may see it (`run_errors_visible`)."""
    if visible or "error" not in (data or {}):
        return data
    kept = {key: value for key, value in data.items() if key != "error"}
    return {**kept, **run_error_public(data.get("status") or status, output)}


def chat_frame_depends_on_viewer(event: dict) -> bool:
    """Is the socket frame of this event not the same for every viewer: a confirmation's
    `can_decide`, or an internal error only some may read (see `chat_event_frames`)?"""
    return event_confirmation_id(event) is not None or event_carries_error(event)


def chat_frame_needs_lookup(event: dict) -> bool:
    """Does the socket frame of this event need `chat_event_frames`: one that depends on the
    viewer, a `reply`, which says which model answered (a database read), or a failed
    `effect`, told as a sentence?"""
    return (
        event["kind"] == "reply" or is_failed_effect(event) or chat_frame_depends_on_viewer(event)
    )


def is_failed_effect(event: dict) -> bool:
    """Is the event a tool effect that failed after the reply (an undelivered `im_send`)?"""
    return event["kind"] == "effect" and (event["data"] or {}).get("status") == "failed"


OFFLINE_MODEL = "offline model"


def answered_by_label(provider: str, model: str, offline: bool) -> str:
    """Which model answered, as a person reads it under the reply: "<provider> · <model>"
    (the provider configuration's name, the model the endpoint named), or "offline model"."""
    if offline:
        return OFFLINE_MODEL
    if provider and model and provider != model:
        return f"{provider} · {model}"
    return model or provider


def runs_answered_by(run_ids) -> dict[int, str]:
    """{run id: `answered_by_label`} of each run's last completed model call (the one whose
    answer the run gave); runs that made none (refused before the call, failed on it) are
    absent. One query, reading only those keys of the steps' output."""
    rows = (
        Step.objects.filter(
            run_id__in=list(run_ids),
            kind=Step.Kind.MODEL_CALL,
            status=Step.Status.COMPLETED,
        )
        .order_by("run_id", "-index")
        .distinct("run_id")
        .values(
            "run_id",
            provider=KT("output__provider"),
            model=KT("output__model"),
            offline=KT("output__offline"),
        )
    )
    return {
        row["run_id"]: answered_by_label(
            row["provider"] or "", row["model"] or "", row["offline"] == "true"
        )
        for row in rows
    }


def chat_event_frames(events: list[dict], member_id: int | None) -> list[dict]:
    """Socket frames for run events (`cadre.agents.live.event_frame` dicts); a `wait` on a
    governance confirmation carries the confirmation, as `chat_confirmation_item`, and a
    `reply` which model answered (`answered_by`, as `runs_answered_by`), a failed `effect`
    what went wrong as a sentence (`sentence`). A run's internal `error` is sent only to a
    viewer who may manage models (`chat_viewer_sees_errors`), read afresh, so a role taken
    away meanwhile takes the errors with it."""
    wanted = {event_confirmation_id(event) for event in events} - {None}
    confirmations = (
        {c.pk: c for c in Confirmation.objects.filter(pk__in=wanted).select_related("decided_by")}
        if wanted
        else {}
    )
    replies = {event["run"] for event in events if event["kind"] == "reply"}
    answered_by = runs_answered_by(replies) if replies else {}
    sees_errors = any(event_carries_error(event) for event in events) and (
        chat_viewer_sees_errors(member_id)
    )
    frames = []
    for event in events:
        frame = {"type": "event", **event}
        if event_carries_error(event) and not sees_errors:
            frame["data"] = {key: value for key, value in event["data"].items() if key != "error"}
        confirmation = confirmations.get(event_confirmation_id(event))
        if confirmation is not None:
            frame["confirmation"] = chat_confirmation_item(confirmation, member_id)
        if event["kind"] == "reply" and answered_by.get(event["run"]):
            frame["answered_by"] = answered_by[event["run"]]
        if is_failed_effect(event):
            data = event["data"]
            frame["sentence"] = failure_sentence(data.get("tool", ""), data.get("reason", ""))
        frames.append(frame)
    return frames


def event_confirmation_id(event: dict):
    """The confirmation a `wait` event waits on, else None."""
    details = event["data"].get("details") if event["kind"] == "wait" else None
    return details.get("confirmation") if isinstance(details, dict) else None


def chat_events_after(
    session_id: int, member_id: int | None, after: int, *, limit: int = CHAT_EVENTS_PAGE
) -> list[dict]:
    """Socket frames for up to `limit` events of the session's runs after `after`, oldest
    first (a reconnecting socket catches up page by page)."""
    # `id > after` keeps the scan to the newest rows of the table; the join narrows them to
    # this session.
    events = RunEvent.objects.filter(id__gt=after, run__session_id=session_id).order_by("id")
    return chat_event_frames([event_frame(event) for event in events[:limit]], member_id)


# A queued run is given CHAT_QUEUE_GRACE before the chat says whether workers take runs (an
# idle worker takes one within a second); a worker that touched no run for WORKERS_QUIET is
# not counted as busy (a model call longer than that without a heartbeat is an exception).
CHAT_QUEUE_GRACE = timedelta(seconds=10)
WORKERS_QUIET = timedelta(minutes=5)
# Events only a worker writes: a run started or resumed, a step, a streamed or final reply.
_WORKER_EVENTS = Q(kind__in=["step", "delta", "reply", "hook"]) | Q(
    kind="status", data__status="running"
)


def chat_queue_state(run, *, now=None) -> dict:
    """How a queued run waits, for the chat's "Queued" line: since when (`queued_at`, when it
    was accepted; `waited`, seconds) and `workers`: "" while it is too early to tell
    (CHAT_QUEUE_GRACE since it was last queued), "busy" when workers took other runs since
    (it waits its turn), "none" when no worker has touched any run since — nothing will take
    it until a worker starts.

    The signal is the runs' own records, no question to Celery: a worker writes a run event
    for every run it starts and every step, and a heartbeat on the run it executes. It says
    only whether the install's workers are taking runs, nothing of any other organization's.
    Three indexed queries at most.
    """
    now = now or timezone.now()
    last = (
        RunEvent.objects.filter(run_id=run.pk).order_by("-id").values_list("id", "created_at")
    ).first()
    since_id, since = last if last is not None else (0, run.created_at)
    state = {
        "run": run.pk,
        "queued_at": run.created_at.isoformat(),
        "waited": max(0, int((now - run.created_at).total_seconds())),
        "workers": "",
    }
    if now - since < CHAT_QUEUE_GRACE:
        return state
    # Events after the run was queued: `id > since_id` scans only the newest rows.
    busy = (
        RunEvent.objects.filter(_WORKER_EVENTS, id__gt=since_id).exists()
        or Run.objects.filter(
            status=Run.Status.RUNNING, heartbeat_at__gte=now - WORKERS_QUIET
        ).exists()
    )
    state["workers"] = "busy" if busy else "none"
    return state


def chat_queued_run(actor: Actor, session_id: int, run_id) -> Run | None:
    """A run of this session (one of the actor's own: see `chat_session_get`), or None: the
    chat's Cancel, Retry and queue line reach only their own conversation's runs."""
    key = parse_pk(run_id)
    if key is None:
        return None
    return Run.objects.filter(
        organization=actor.organization, session_id=session_id, pk=key
    ).first()


def chat_transcript(actor: Actor, session, *, limit: int = CHAT_TURNS) -> dict:
    """What the web chat's page shows of one of the actor's own sessions (from
    `chat_session_get`): its last `limit` conversation runs, oldest first, each with the
    confirmations it asked for (pending ones with `can_decide` for the actor, decided ones
    with their `decision`), the agent messages that failed to reach the person (each with its
    `sentence`) and, while it is queued, how it waits (`chat_queue_state`); the pending
    confirmations of this session; and `after`, the event id the page's socket streams from
    (`chat_stream_from`).

    A run that ended without a reply shows its `notice`, the line its IM conversation got.

    Returns {"runs", "turns": [{"run", "notice", "confirmations", "failed_messages",
    "queue"}], "pending", "after"}.
    """
    runs = list(session.runs.filter(parent__isnull=True).order_by("-created_at", "-pk")[:limit])[
        ::-1
    ]
    run_ids = [run.pk for run in runs]
    member_id = actor.member.pk if actor.member is not None else None
    confirmations = list(
        Confirmation.objects.filter(organization=actor.organization, run_id__in=run_ids)
        .select_related("decided_by", "requester")
        .order_by("created_at", "pk")
    )
    by_run: dict[int, list] = {}
    for confirmation in confirmations:
        confirmation.can_decide = chat_confirmation_can_decide(confirmation, member_id)
        confirmation.decision = chat_confirmation_decision(confirmation)
        confirmation.chat_lines = chat_confirmation_lines(confirmation)
        by_run.setdefault(confirmation.run_id, []).append(confirmation)
    failed: dict[int, list] = {}
    for message in AgentMessage.objects.filter(
        organization=actor.organization,
        run_id__in=run_ids,
        status=AgentMessage.Status.FAILED,
    ).order_by("pk"):
        message.sentence = failure_sentence("im_send", message.reason)
        failed.setdefault(message.run_id, []).append(message)
    turns = [
        {
            "run": run,
            "notice": run_notice(run),
            "confirmations": by_run.get(run.pk, []),
            "failed_messages": failed.get(run.pk, []),
            "queue": chat_queue_state(run) if run.status == Run.Status.QUEUED else None,
        }
        for run in runs
    ]
    return {
        "runs": runs,
        "turns": turns,
        "pending": [c for c in confirmations if c.status == Confirmation.Status.PENDING],
        "after": chat_stream_from(session, runs),
    }


def deployment_agent_counts(deployment) -> dict:
    """A deployment's agents counted by status and by template version number."""
    rows = (
        Agent.objects.filter(deployment=deployment)
        .values("status", "version__number")
        .annotate(n=Count("id"))
    )
    by_status: dict[str, int] = {}
    by_version: dict[int, int] = {}
    for row in rows:
        by_status[row["status"]] = by_status.get(row["status"], 0) + row["n"]
        by_version[row["version__number"]] = by_version.get(row["version__number"], 0) + row["n"]
    return {
        "total": sum(by_status.values()),
        "by_status": by_status,
        "by_version": dict(sorted(by_version.items())),
    }


def session_transcript(session) -> list[dict]:
    """Every run of a session, oldest first, with its steps, waits, tool effects, governance
    confirmations and context records (which memories each model call was given).

    The caller has already checked that the actor may see the session; a fixed number of
    queries whatever the number of runs and steps.
    """
    runs = list(
        session.runs.select_related("version")
        .order_by("created_at", "pk")
        .prefetch_related(
            Prefetch("steps", queryset=Step.objects.order_by("index")),
            Prefetch("waits", queryset=Wait.objects.order_by("created_at")),
        )
    )
    run_ids = [run.pk for run in runs]
    keys = [step.idempotency_key for run in runs for step in run.steps.all()]
    effects = {effect.key: effect for effect in ToolEffect.objects.filter(key__in=keys)}
    confirmations: dict[int, list] = {}
    for confirmation in Confirmation.objects.filter(
        organization_id=session.organization_id, run_id__in=run_ids
    ).select_related("decided_by"):
        confirmations.setdefault(confirmation.run_id, []).append(confirmation)
    records: dict[str, list] = {}
    for record in ContextRecord.objects.filter(
        organization_id=session.organization_id, run_id__in=[str(pk) for pk in run_ids]
    ).prefetch_related(
        Prefetch(
            "items",
            queryset=ContextRecordItem.objects.select_related("memory").order_by("rank"),
        )
    ):
        records.setdefault(record.run_id, []).append(record)
    transcript = []
    for run in runs:
        steps = [
            {"step": step, "effect": effects.get(step.idempotency_key)} for step in run.steps.all()
        ]
        transcript.append(
            {
                "run": run,
                "steps": steps,
                "waits": list(run.waits.all()),
                "confirmations": confirmations.get(run.pk, []),
                "context_records": records.get(str(run.pk), []),
            }
        )
    return transcript


def memory_agent_scopes(
    organization_id: int, *, member_id: int | None = None, agent_ids: list[int] | None = None
):
    """Memory's lookup of agent scopes (registered on `cadre.memory.agent_scopes.lookups`):
    the owner and name of each agent of one member, or of the agents with these ids."""
    agents = Agent.objects.filter(organization_id=organization_id)
    if member_id is not None:
        agents = agents.filter(member_id=member_id)
    if agent_ids is not None:
        agents = agents.filter(pk__in=agent_ids)
    rows = agents.order_by("name", "pk").values_list(
        "pk", "name", "member_id", "member__display_name"
    )
    return [
        AgentScope(agent_id=pk, name=name, member_id=owner, member_name=owner_name or "")
        for pk, name, owner, owner_name in rows
    ]


def rated_runs(organization_id: int, run_ids: list[str]) -> dict[str, str]:
    """{run id: "success" | "failure"} for the runs among `run_ids` a person rated (the
    Memory Viewer's run-outcome port)."""
    numeric = parse_pks(str(run) for run in run_ids)
    # One array parameter: the dashboard asks about every run of its window (20k and more),
    # which as placeholders would be a statement of that many parameters to send and plan.
    in_runs = RawSQL("SELECT unnest(%s::bigint[])", [numeric])
    rows = (
        Run.objects.filter(organization_id=organization_id, pk__in=in_runs)
        .exclude(rating="")
        .values_list("pk", "rating")
    )
    return {str(run): rating for run, rating in rows}
