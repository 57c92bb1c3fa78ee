"""One gate to memory: every read of memories, their versions, vectors and context records goes
through `cadre.memory.selectors`, which takes an actor (docs/memory.md, "One gate").

The walk over platform/, hub/ and connectors/ (tests and migrations aside) fails on any
reference to a personal-data model's manager (`Memory.objects`, `_default_manager`,
`_base_manager`), its table (`Memory._meta.db_table`) or the search engine's actorless
functions, outside an allow-list in which each entry says why it may. Behaviour tests: a
system read needs a stated reason and is audited with it where it reaches a person or a model
(the agents' side: tests/agents/test_memory_gate_runs.py).
"""

from __future__ import annotations

import ast
import hashlib
from pathlib import Path

import pytest

from cadre.errors import NotPermitted
from cadre.governance.models import AuditEvent
from cadre.memory import selectors
from cadre.memory.models import Memory
from cadre.memory.text import lexical_document
from cadre.tenancy.actors import member_actor, system_actor

ROOT = Path(__file__).resolve().parents[2]
WALKED = ("platform", "hub", "connectors")

# Models holding personal data (a member's words, or what is derived from them): memories,
# their versions (each keeps the content it had), their vectors (which give text back to
# anyone who inverts them) and context records (the query is what a person said).
PERSONAL_MODELS = frozenset({"Memory", "MemoryVersion", "MemoryEmbedding", "ContextRecord"})
MANAGERS = frozenset({"objects", "_default_manager", "_base_manager"})
MODELS_MODULE = "cadre.memory.models"
ENGINE_MODULE = "cadre.memory.search"
# The engine's functions that return rows or ids for scopes given without an actor.
ENGINE_READS = frozenset(
    {
        "_search",
        "_filter_sql",
        "_plain_hits",
        "_fuse",
        "count_filtered",
        "lexical_candidates",
        "vector_candidates",
        "fetch_candidates",
        "load_candidates",
    }
)

# module (path from the repository) -> {name it may reach: why}. "*" stands for every
# personal-data model and engine function.
ALLOWED: dict[str, dict[str, str]] = {
    "platform/cadre/memory/selectors.py": {"*": "the gate itself: every read takes an actor"},
    "platform/cadre/memory/search.py": {"*": "the engine, called only by the gate"},
    "platform/cadre/memory/services/common.py": {
        "*": "write services: lock and version the rows they change (the actor checked first)"
    },
    "platform/cadre/memory/services/context.py": {
        "*": "writes the ContextRecord of a model call (versions of the memories it records)"
    },
    "platform/cadre/memory/services/deletion.py": {
        "*": "deletes, purges and sweeps retention: changes rows, returns no content"
    },
    "platform/cadre/memory/services/experience.py": {
        "*": "write service: finds the run's experience record to update it"
    },
    "platform/cadre/memory/services/feedback.py": {
        "Memory": "write service: locks the memories a correction supersedes, read again so "
        "one changed meanwhile is left as it is"
    },
    "platform/cadre/memory/services/funnel.py": {
        "*": "the dedup funnel (a write path): compares a new memory with its scope's rows"
    },
    "platform/cadre/memory/services/reidentify.py": {
        "*": "rewrites masked placeholders in stored rows (maintenance, returns no content)"
    },
    "platform/cadre/memory/services/writes.py": {
        "*": "write services: lock the row they change, drop its stale vectors"
    },
    "platform/cadre/memory/dedup.py": {
        "MemoryEmbedding": "the dedup funnel's vector neighbours of a memory being written"
    },
    "platform/cadre/memory/embeddings.py": {
        "Memory": "the embedding job: the rows still without a vector (returns no content)",
        "MemoryEmbedding": "the embedding job stores and checks vectors",
    },
    "platform/cadre/memory/turns.py": {
        "Memory": "the embedding job's context: the same owner's neighbouring turns of a "
        "memory being embedded (feeds a vector, returns no content to anyone)"
    },
    "platform/cadre/memory/reembed.py": {
        "MemoryEmbedding": "re-embed progress: which memories have a vector under a model"
    },
    "platform/cadre/memory/tasks.py": {
        "Memory": "a memory task loads the memory it processes (extraction, enrichment)"
    },
    "platform/cadre/viewer/vector_map.py": {
        "MemoryEmbedding": "the map job's vectors of a selection the requesting actor's reach "
        "decided (points carry ids and coordinates, no content)",
    },
    "platform/cadre/viewer/activity.py": {
        "MemoryVersion": "counts of versions of memories the gate returned (subqueries)"
    },
    "platform/cadre/viewer/quality.py": {
        "MemoryVersion": "counts of versions of memories the gate returned (subqueries)",
        "ContextRecord": "counts of model calls sent memories the gate returned (numbers only)",
    },
    "platform/cadre/viewer/timeline.py": {
        "MemoryVersion": "counts of versions of memories the gate returned (subqueries)"
    },
    "platform/cadre/viewer/trail.py": {
        "MemoryVersion": "the versions of one memory memory_get returned to the actor"
    },
    "platform/cadre/agents/selectors.py": {
        "ContextRecord": "a session's transcript, for those `transcripts_readable` lets read "
        "it (its subject, the agent's owner, memory.personal)"
    },
    "platform/cadre/agents/call_chain.py": {
        "ContextRecord": "a run's call chain, for those `transcripts_readable` lets read it"
    },
    "platform/cadre/agents/redaction.py": {
        "ContextRecord": "redacts a deleted memory's words from the records of runs given it "
        "(a write path)"
    },
}


def _dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def ungated_reads(source: str) -> list[tuple[int, str]]:
    """(line, name) of each reference in `source` to a personal-data model's manager or table,
    or to the search engine's actorless functions. An empty queryset (`Memory.objects.none()`)
    reads nothing and is not one."""
    tree = ast.parse(source)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    models: dict[str, str] = {}  # local name -> personal model it names
    model_modules: set[str] = set()  # local names of cadre.memory.models
    engines: set[str] = set()  # local names of cadre.memory.search
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                local = alias.asname or alias.name
                if node.module == MODELS_MODULE and alias.name in PERSONAL_MODELS:
                    models[local] = alias.name
                elif node.module == "cadre.memory" and alias.name == "models":
                    model_modules.add(local)
                elif node.module == "cadre.memory" and alias.name == "search":
                    engines.add(local)
                elif node.module == ENGINE_MODULE and alias.name in ENGINE_READS:
                    found.append((node.lineno, f"{ENGINE_MODULE}.{alias.name}"))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == ENGINE_MODULE:
                    engines.add(alias.asname or alias.name)
                elif alias.name == MODELS_MODULE:
                    model_modules.add(alias.asname or alias.name)

    def model_of(node: ast.AST) -> str | None:
        if isinstance(node, ast.Name):
            return models.get(node.id)
        if isinstance(node, ast.Attribute) and node.attr in PERSONAL_MODELS:
            return node.attr if _dotted(node.value) in model_modules else None
        return None

    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        model = model_of(node.value)
        parent = parents.get(node)
        if model is not None and node.attr in MANAGERS:
            if isinstance(parent, ast.Attribute) and parent.attr == "none":
                continue
            found.append((node.lineno, f"{model}.{node.attr}"))
        elif model is not None and node.attr == "_meta":
            if isinstance(parent, ast.Attribute) and parent.attr == "db_table":
                found.append((node.lineno, f"{model}._meta.db_table"))
        elif node.attr in ENGINE_READS and _dotted(node.value) in engines:
            found.append((node.lineno, f"{ENGINE_MODULE}.{node.attr}"))
    return sorted(set(found))


def _allowed(path: str, name: str) -> bool:
    entry = ALLOWED.get(path, {})
    head = name.split(".")[0]
    return "*" in entry or head in entry or name in entry


def _walked_files():
    for top in WALKED:
        for path in sorted((ROOT / top).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if "/migrations/" in relative or "/tests/" in relative or relative.startswith("tests/"):
                continue
            yield relative, path


def test_no_memory_read_bypasses_the_gate():
    offenders = []
    for relative, path in _walked_files():
        for line, name in ungated_reads(path.read_text(encoding="utf-8")):
            if not _allowed(relative, name):
                offenders.append(f"{relative}:{line}: {name}")
    assert not offenders, (
        "Read memory through cadre.memory.selectors (it takes an actor; internal jobs use "
        "selectors.system_reader with a stated reason), or add the module to ALLOWED with "
        "the reason it may:\n" + "\n".join(offenders)
    )


def test_every_allow_list_entry_exists_and_says_why():
    for relative, names in ALLOWED.items():
        assert (ROOT / relative).is_file(), f"{relative} is allowed but does not exist"
        for name, reason in names.items():
            assert name == "*" or name in PERSONAL_MODELS | ENGINE_READS, (relative, name)
            assert len(reason.split()) >= 4, f"{relative}: say why {name} is allowed"


def test_every_allow_list_entry_is_still_needed():
    """An entry nothing uses any more is removed: the list stays the truth."""
    for relative, names in ALLOWED.items():
        used = {
            name.split(".")[0]
            for _, name in ungated_reads((ROOT / relative).read_text(encoding="utf-8"))
        }
        if "*" in names:
            assert used, f"{relative} reads no personal model directly: drop it from ALLOWED"
            continue
        for name in names:
            assert name in used, f"{relative} no longer reaches {name}: drop the entry"


@pytest.mark.parametrize(
    "snippet, expected",
    [
        (
            "from cadre.memory.models import Memory\n"
            "def peek(pk):\n    return Memory.objects.filter(pk=pk).first()\n",
            "Memory.objects",
        ),
        (
            "from cadre.memory.models import Memory as M\nrows = M._default_manager.all()\n",
            "Memory._default_manager",
        ),
        (
            "from cadre.memory import models\nrows = models.ContextRecord.objects.all()\n",
            "ContextRecord.objects",
        ),
        (
            "from cadre.memory.models import MemoryVersion\n"
            "def old(m):\n    return MemoryVersion.objects.filter(memory=m)\n",
            "MemoryVersion.objects",
        ),
        (
            "from cadre.memory.models import MemoryEmbedding\n"
            "sql = f'SELECT * FROM {MemoryEmbedding._meta.db_table}'\n",
            "MemoryEmbedding._meta.db_table",
        ),
        (
            "from cadre.memory import search\n"
            "def find(org):\n"
            "    return search._search(organization=org, scope_keys=['user:1'], query='x')\n",
            "cadre.memory.search._search",
        ),
        (
            "import cadre.memory.search as engine\n"
            "ids = engine.lexical_candidates([], '', [], limit=5)\n",
            "cadre.memory.search.lexical_candidates",
        ),
        ("from cadre.memory.search import _search\n", "cadre.memory.search._search"),
    ],
)
def test_the_walk_catches_a_new_module_reading_memory_directly(snippet, expected):
    found = [name for _, name in ungated_reads(snippet)]
    assert expected in found
    assert not _allowed("platform/cadre/agents/new_surface.py", expected)


def test_the_walk_lets_gated_reads_and_empty_querysets_pass():
    source = (
        "from cadre.memory import selectors\n"
        "from cadre.memory.models import Memory\n"
        "def rows(actor):\n"
        "    if actor is None:\n"
        "        return Memory.objects.none()\n"
        "    return selectors.memory_queryset(actor).filter(status=Memory.Status.ACTIVE)\n"
    )
    assert ungated_reads(source) == []


def test_the_engine_search_takes_no_call_without_the_gate():
    """The engine's search is private; nothing public in it searches by scopes alone."""
    from cadre.memory import search

    assert not hasattr(search, "search")
    assert callable(search._search)


# --- behaviour ------------------------------------------------------------------------------


def remember(org, content: str, scope_key: str, **fields) -> Memory:
    scope, _, scope_id = scope_key.partition(":")
    return Memory.objects.create(
        organization=org,
        scope=scope,
        scope_id=int(scope_id) if scope_id else None,
        scope_key=scope_key,
        content=content,
        search_text=lexical_document(content, {}),
        content_hash=hashlib.sha256(content.encode()).hexdigest(),
        **fields,
    )


@pytest.mark.django_db
def test_a_system_read_without_a_reason_is_refused(org_a):
    remember(org_a, "Alice's note", "organization")
    nameless = system_actor(org_a, label="some job")
    with pytest.raises(NotPermitted):
        selectors.memory_queryset(nameless)
    with pytest.raises(NotPermitted):
        selectors.memory_search(actor=nameless, query="note", force=True)
    with pytest.raises(NotPermitted):
        selectors.context_record_queryset(nameless)


@pytest.mark.django_db
def test_an_audited_system_read_records_its_job_and_reason(org_a, alice):
    memory = remember(org_a, "Alice prefers tea", f"user:{alice.pk}")
    reader = selectors.system_reader(
        org_a, job="memory-to-skill", reason="distil skills from trajectories", audited=True
    )
    assert list(selectors.memory_queryset(reader).values_list("pk", flat=True)) == [memory.pk]
    event = AuditEvent.objects.get(organization=org_a, action="memory.system_read")
    assert event.reason == "distil skills from trajectories"
    assert event.actor_type == "system"
    assert event.actor_label == "memory-to-skill"


@pytest.mark.django_db
def test_an_unaudited_system_read_leaves_no_event(org_a, alice):
    remember(org_a, "Alice prefers tea", f"user:{alice.pk}")
    reader = selectors.system_reader(org_a, job="demo_reset", reason="purge the demo data")
    assert selectors.memory_queryset(reader).count() == 1
    assert not AuditEvent.objects.filter(action="memory.system_read").exists()


@pytest.mark.django_db
def test_skill_distillation_reads_through_the_gate_and_is_audited(org_a, alice):
    from cadre.skills import distill

    remember(
        org_a,
        "Filed the expenses\n1. Open the form\n2. Attach receipts",
        f"user:{alice.pk}",
        kind="experience",
        attributes={"outcome": "success", "task": "File the expenses"},
    )
    found = distill.load_trajectories(org_a)
    assert [t.task for t in found] == ["File the expenses"]
    event = AuditEvent.objects.get(organization=org_a, action="memory.system_read")
    assert event.actor_label == "memory-to-skill" and "distil" in event.reason


@pytest.mark.django_db
def test_a_scim_token_actor_reads_no_memory(org_a, alice):
    from cadre.tenancy.actors import Actor

    remember(org_a, "Org rule", "organization")
    token = Actor(kind="scim_token", organization=org_a, member=alice)
    assert selectors.memory_queryset(token).count() == 0


@pytest.mark.django_db
def test_a_member_actor_is_unchanged_by_the_gate(org_a, alice, bob):
    mine = remember(org_a, "Bob's note", f"user:{bob.pk}")
    remember(org_a, "Alice's note", f"user:{alice.pk}")
    assert list(selectors.memory_queryset(member_actor(bob)).values_list("pk", flat=True)) == [
        mine.pk
    ]


@pytest.mark.django_db
def test_a_records_passed_over_memory_shows_only_to_who_may_read_it(org_a, alice, bob, make_member):
    """The "why retrieved" of a model call names the memories diversity passed over; an admin
    reading the transcript (memory.view, not memory.personal) sees a colleague's personal one
    by id only, its subject sees its words."""
    from cadre.memory.models import ContextRecord
    from cadre.viewer.why import annotate_records

    theirs = remember(org_a, "Bob's medical appointment on Friday", f"user:{bob.pk}")
    record = ContextRecord.objects.create(
        organization=org_a,
        kind=ContextRecord.Kind.MODEL_CALL,
        run_id="1",
        step_id="1",
        query="friday",
        passed_over=[{"id": theirs.pk, "version": 1, "score": 0.5, "components": {}}],
    )
    admin = make_member(roles=["business_admin"])
    annotate_records(member_actor(admin), [record])
    (row,) = record.passed_over_rows
    assert row["id"] == theirs.pk and row["memory"] is None
    annotate_records(member_actor(bob), [record])
    assert record.passed_over_rows[0]["memory"].content == "Bob's medical appointment on Friday"
