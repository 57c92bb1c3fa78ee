"""Redacting a deleted memory's text from the runs that carried it.

A memory reaches a run three ways: the retrieval hook or the `memory_search` tool returned it
(a ContextRecord links the run to the memory), a caller shared it (`shared_memories` in the
run's input), or an earlier turn quoted it (the session's later runs read earlier replies as
recent turns). The carriers are the runs of the first two kinds and, in their sessions, every
later run. Within a carrier the memory's text is replaced by a marker ("[memory 12 deleted on
2025-06-01]"):

- by id, where a record names the memory: an entry `{"id": 12, "content": …}` of a
  `memories` / `shared` / `shared_memories` list (hook and tool outputs, the run's input) —
  its content, whatever form it took (masked or not), becomes the marker and is remembered as
  a form of the text to look for;
- by exact text, everywhere else in those runs: the memory's content and every form found by
  id, in step inputs (model calls' messages) and outputs, step errors, run events, waits, the
  run's input and output, and the query of the memory's context records. A line of the
  context block (`[agent:5#12] <text>`) is matched with its id whatever the text's length;
  a bare text is matched only from `MIN_TEXT_MATCH` characters (an ideograph counts three,
  `cadre.memory.text.match_length`), so a two-word memory cannot erase the same two words
  elsewhere.

Sessions are handled whole (their runs share the quoted text), a bounded number per call;
a session with a run in progress is deferred until the run rests (its worker may still write
the steps it holds in memory). Redaction is idempotent: a redacted run holds only markers, so
a second pass changes nothing.

Registered in `AgentsConfig.ready()` on memory's `run_copies` port.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import timedelta

from django.db import transaction
from django.db.models import Min
from django.utils import timezone

from cadre.agents.models import Run, RunEvent, SessionSummary, Step, Wait
from cadre.identifiers import parse_pks
from cadre.memory.models import ContextRecord
from cadre.memory.text import match_length

MIN_TEXT_MATCH = 12
# Keys of the lists whose entries are memories ({"id", "content", "scope"}).
MEMORY_LISTS = ("memories", "shared", "shared_memories")
# A running run whose worker beat its heart this recently may still write steps it holds.
ACTIVE_HEARTBEAT = timedelta(minutes=10)


@dataclass
class RedactionBatch:
    """What one call redacted (ids only) and where to continue."""

    sessions: list[int] = field(default_factory=list)
    runs: list[int] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)
    events: list[int] = field(default_factory=list)
    waits: list[int] = field(default_factory=list)
    context_records: list[int] = field(default_factory=list)
    summaries: list[int] = field(default_factory=list)  # session summaries quoting it
    deferred_runs: list[int] = field(default_factory=list)  # in progress: redacted later
    cursor: int = 0  # the last session handled (sessions are taken in id order)
    done: bool = True  # no session after the cursor is left

    def as_dict(self) -> dict:
        return {
            "sessions": self.sessions,
            "runs": self.runs,
            "steps": self.steps,
            "events": self.events,
            "waits": self.waits,
            "context_records": self.context_records,
            "summaries": self.summaries,
            "deferred_runs": self.deferred_runs,
            "cursor": self.cursor,
            "done": self.done,
        }


class _Redactor:
    """Replaces one memory's text by its marker inside JSON values and strings."""

    def __init__(self, memory_id: int, marker: str, texts: list[str]):
        self.memory_id = memory_id
        self.marker = marker
        self.texts: list[str] = []
        self.tagged: set[str] = set()  # "[scope#12] " prefixes seen by id
        # A marker of an earlier pass (of any date) is never taken for the text again.
        self.any_marker = re.compile(rf"\[memory {memory_id} deleted on [^\]]*\]")
        for text in texts:
            self.add_text(text)

    def _is_marker(self, text: str) -> bool:
        return text == self.marker or bool(self.any_marker.fullmatch(text))

    def add_text(self, text) -> None:
        fresh = isinstance(text, str) and text.strip() and text not in self.texts
        if fresh and not self._is_marker(text):
            self.texts.append(text)
            self.texts.sort(key=len, reverse=True)  # longest first: no partial leftovers

    def collect(self, value) -> None:
        """Learn the forms the text took from entries that name the memory by id."""
        if isinstance(value, dict):
            for key, item in value.items():
                if key in MEMORY_LISTS and isinstance(item, list):
                    for entry in item:
                        if self._is_entry(entry):
                            self.add_text(entry["content"])
                            if entry.get("scope"):
                                self.tagged.add(f"[{entry['scope']}#{self.memory_id}] ")
                self.collect(item)
        elif isinstance(value, list):
            for item in value:
                self.collect(item)

    def _is_entry(self, entry) -> bool:
        return (
            isinstance(entry, dict)
            and entry.get("id") == self.memory_id
            and isinstance(entry.get("content"), str)
            and not self._is_marker(entry["content"])
        )

    def string(self, text: str) -> str:
        for prefix in self.tagged:  # "- [agent:5#12] <text>" lines of the context block
            for form in self.texts:
                text = text.replace(prefix + form, prefix + self.marker)
        for form in self.texts:
            if match_length(form) >= MIN_TEXT_MATCH:
                text = text.replace(form, self.marker)
        return text

    def value(self, value):
        if isinstance(value, str):
            return self.string(value)
        if isinstance(value, list):
            return [self.value(item) for item in value]
        if isinstance(value, dict):
            redacted = {}
            for key, item in value.items():
                if key in MEMORY_LISTS and isinstance(item, list):
                    item = [
                        {**entry, "content": self.marker} if self._is_entry(entry) else entry
                        for entry in item
                    ]
                redacted[key] = self.value(item)
            return redacted
        return value


def _direct_run_ids(organization_id: int, memory_id: int) -> set[int]:
    """Runs given the memory: by a context record (retrieval, the search tool) or shared."""
    recorded = ContextRecord.objects.filter(
        organization_id=organization_id, items__memory_id=memory_id
    ).values_list("run_id", flat=True)
    ids = set(parse_pks(str(value) for value in recorded))
    ids |= set(
        Run.objects.filter(
            organization_id=organization_id,
            input__shared_memories__contains=[{"id": memory_id}],
        ).values_list("pk", flat=True)
    )
    return ids


def carrier_sessions(organization_id: int, memory_id: int) -> dict[int, int]:
    """{session id: the first run in it that was given the memory}."""
    direct = _direct_run_ids(organization_id, memory_id)
    if not direct:
        return {}
    return dict(
        Run.objects.filter(organization_id=organization_id, pk__in=direct)
        .values("session_id")
        .annotate(first=Min("pk"))
        .values_list("session_id", "first")
    )


def _in_progress(run: Run, now) -> bool:
    if run.status != Run.Status.RUNNING:
        return False
    beat = run.heartbeat_at or run.started_at or run.created_at
    return beat is not None and now - beat < ACTIVE_HEARTBEAT


def redact_memory(
    *,
    organization_id: int,
    memory_id: int,
    texts: list[str],
    marker: str,
    after_session: int = 0,
    limit: int = 50,
) -> RedactionBatch:
    """Redact the memory from up to `limit` carrier sessions after `after_session`."""
    batch = RedactionBatch(cursor=after_session)
    sessions = carrier_sessions(organization_id, memory_id)
    pending = sorted(pk for pk in sessions if pk > after_session)
    redactor = _Redactor(memory_id, marker, texts)
    now = timezone.now()
    for session_id in pending[:limit]:
        with transaction.atomic():
            runs = list(
                Run.objects.select_for_update()
                .filter(
                    organization_id=organization_id,
                    session_id=session_id,
                    pk__gte=sessions[session_id],
                )
                .order_by("pk")
            )
            busy = [run.pk for run in runs if _in_progress(run, now)]
            if busy:
                batch.deferred_runs += busy
                batch.cursor = session_id
                continue
            _redact_session(redactor, runs, batch, organization_id, memory_id)
            batch.sessions.append(session_id)
        batch.cursor = session_id
    batch.done = len(pending) <= limit and not batch.deferred_runs
    if batch.deferred_runs:  # come back to the deferred sessions: continue from before them
        first_deferred = min(
            Run.objects.filter(pk__in=batch.deferred_runs).values_list("session_id", flat=True)
        )
        batch.cursor = max(after_session, first_deferred - 1)
    return batch


def _redact_session(
    redactor: _Redactor, runs: list[Run], batch: RedactionBatch, organization_id, memory_id
) -> None:
    run_ids = [run.pk for run in runs]
    steps = list(Step.objects.select_for_update().filter(run_id__in=run_ids).order_by("pk"))
    events = list(RunEvent.objects.select_for_update().filter(run_id__in=run_ids).order_by("pk"))
    waits = list(Wait.objects.select_for_update().filter(run_id__in=run_ids))
    # First learn every form the text took (by id), then replace it everywhere.
    for run in runs:
        redactor.collect(run.input)
    for step in steps:
        redactor.collect(step.input)
        redactor.collect(step.output)
    changed_runs: set[int] = set()
    for run in runs:
        new_input, new_output = redactor.value(run.input), redactor.value(run.output)
        if (new_input, new_output) != (run.input, run.output):
            run.input, run.output = new_input, new_output
            run.save(update_fields=["input", "output"])
            changed_runs.add(run.pk)
    for step in steps:
        new = (redactor.value(step.input), redactor.value(step.output), redactor.string(step.error))
        if new != (step.input, step.output, step.error):
            step.input, step.output, step.error = new
            step.save(update_fields=["input", "output", "error"])
            batch.steps.append(step.pk)
            changed_runs.add(step.run_id)
    changed_events = []
    for event in events:
        data = redactor.value(event.data)
        if data != event.data:
            event.data = data
            changed_events.append(event)
            changed_runs.add(event.run_id)
    # A plain UPDATE: redacting must not push events to live chats again.
    RunEvent.objects.bulk_update(changed_events, ["data"])
    batch.events += [event.pk for event in changed_events]
    for wait in waits:
        details, payload = redactor.value(wait.details), redactor.value(wait.payload)
        if (details, payload) != (wait.details, wait.payload):
            wait.details, wait.payload = details, payload
            wait.save(update_fields=["details", "payload"])
            batch.waits.append(wait.pk)
            changed_runs.add(wait.run_id)
    linked = ContextRecord.objects.filter(
        organization_id=organization_id,
        run_id__in=[str(pk) for pk in run_ids],
        items__memory_id=memory_id,
    ).values("pk")
    for record in ContextRecord.objects.select_for_update().filter(pk__in=linked).order_by("pk"):
        query = redactor.string(record.query)
        if query != record.query:
            record.query = query
            record.save(update_fields=["query"])
        batch.context_records.append(record.pk)
    # A session summary (compaction) quotes the turns it covers: it carries the text too.
    for summary in SessionSummary.objects.select_for_update().filter(run_id__in=run_ids):
        text, items = redactor.string(summary.text), redactor.value(summary.items)
        if (text, items) != (summary.text, summary.items):
            summary.text, summary.items = text, items
            summary.save(update_fields=["text", "items"])
            batch.summaries.append(summary.pk)
    batch.runs += sorted(changed_runs)


def redaction_pending(*, organization_id: int, memory_id: int, after_session: int = 0) -> int:
    """How many carrier sessions after the cursor are still to be handled."""
    return sum(1 for pk in carrier_sessions(organization_id, memory_id) if pk > after_session)
