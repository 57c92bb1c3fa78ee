"""Conversation turns are embedded with the turns before them (memory/turns.py: the mean of
the turn's views alone, with one and with two turns before it): only from the same owner,
scope and conversation, only what the memory stores, and whatever removes or changes a turn
recomputes the following turns' vectors without its old words. The embedding model is an
OpenAI-compatible endpoint on loopback returning a bag of words, so a vector says exactly
which words it was computed from."""

from __future__ import annotations

import hashlib
import io
import threading

import pytest
from django.core.management import CommandError, call_command
from django.db import connection, transaction
from django.utils import timezone

from cadre.memory import embeddings, reembed, services, turns
from cadre.memory.models import Memory, MemoryEmbedding, MemoryTask, Verification
from tests.memory.conftest import actor
from tests.memory.test_reembed import DIMENSION, bag_of_words
from tests.memory.test_reembed import embedding_server as embedding_server
from tests.waiting import wait_until

MODEL = "openai/fake-embed-16"
ASKED = "Alice: When is the board meeting?"
ANSWER = "Bob: Thursday at nine, in room four."
FOLLOW = "Alice: Great, I will book the projector."


@pytest.fixture
def bag_model(monkeypatch, embedding_server):
    """The organization's embedding model is the loopback bag-of-words endpoint."""
    monkeypatch.setenv("CADRE_EMBEDDING_PROVIDER", "openai")
    monkeypatch.setenv("CADRE_EMBEDDING_MODEL", "fake-embed-16")
    monkeypatch.setenv("CADRE_EMBEDDING_DIMENSION", str(DIMENSION))
    embeddings.forget_providers()
    return embedding_server


def add_turn(
    member, content: str, turn: int, *, conversation: str = "chat-1", scope="user", **fields
):
    return services.memory_add(
        actor=actor(member),
        scope=scope,
        kind="fact",
        content=content,
        attributes={"turn": turn, "speaker": content.split(":")[0]},
        source_kind="import",
        conversation_id=conversation,
        **fields,
    )


def vector(memory: Memory, model_id: str = MODEL) -> list[float] | None:
    row = MemoryEmbedding.objects.filter(memory=memory, model_id=model_id).first()
    return None if row is None else [float(x) for x in row.embedding]


def expected(*texts: str):
    """The vector of a turn (the last text) after these turns before it: the mean of its views'
    vectors, each view the turn with up to `window` turns before it (stored as float32)."""
    *before, own = texts
    views = [
        bag_of_words("\n".join([*before[len(before) - min(window, len(before)) :], own]))
        for window in turns.VIEWS
    ]
    return pytest.approx(
        [sum(values) / len(views) for values in zip(*views, strict=True)], abs=1e-6
    )


def widest_views(memories) -> list[str]:
    """Each memory's widest view: the text with all the context its vector embeds."""
    return [views[-1] for views in turns.embedding_views(memories)]


def test_a_turn_is_embedded_with_the_previous_turn_and_other_memories_alone(
    bob, run_async, bag_model
):
    with run_async():
        first = add_turn(bob, ASKED, 0)
        second = add_turn(bob, ANSWER, 1)
        fact = services.memory_add(
            actor=actor(bob),
            scope="user",
            kind="fact",
            content="Bob prefers morning meetings",
            source_kind="user_statement",
            conversation_id="chat-1",
        )
    assert vector(first) == expected(ASKED)
    assert vector(second) == expected(ASKED, ANSWER)
    assert vector(second) != expected(ANSWER)
    assert vector(fact) == expected("Bob prefers morning meetings")
    assert f"{ASKED}\n{ANSWER}" in bag_model and ANSWER in bag_model
    # What is stored, shown and searched lexically is the turn's own text.
    second.refresh_from_db()
    assert second.content == ANSWER
    assert "board" not in second.search_text


def test_a_turns_vector_is_the_mean_of_its_views_with_up_to_two_turns_before(
    bob, run_async, bag_model
):
    with run_async():
        add_turn(bob, ASKED, 0)
        add_turn(bob, ANSWER, 1)
        third = add_turn(bob, FOLLOW, 2)
    assert turns.embedding_views([third]) == [
        (FOLLOW, f"{ANSWER}\n{FOLLOW}", f"{ASKED}\n{ANSWER}\n{FOLLOW}")
    ]
    assert {FOLLOW, f"{ANSWER}\n{FOLLOW}", f"{ASKED}\n{ANSWER}\n{FOLLOW}"} <= set(bag_model)
    assert vector(third) == expected(ASKED, ANSWER, FOLLOW)
    # Not normalized: views that disagree leave a vector shorter than a unit one.
    assert sum(value * value for value in vector(third)) < 0.99


def test_deleting_a_turn_re_embeds_the_next_one_without_its_words(
    bob, run_async, bag_model, django_capture_on_commit_callbacks
):
    with run_async():
        first = add_turn(bob, ASKED, 0)
        second = add_turn(bob, ANSWER, 1)
    assert vector(second) == expected(ASKED, ANSWER)
    tasks_before = MemoryTask.objects.filter(memory=second, kind=MemoryTask.Kind.ENRICH).count()

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        services.memory_delete(actor=actor(bob), memory=first, reason="said by mistake")
    # Committed with the deletion: the old vector is gone and a durable task is queued, so a
    # crash before the task runs never leaves the deleted words in a vector.
    assert vector(second) is None
    queued = MemoryTask.objects.filter(memory=second, kind=MemoryTask.Kind.ENRICH)
    assert queued.count() == tasks_before + 1
    assert queued.order_by("-pk").first().status == MemoryTask.Status.WAITING
    for callback in callbacks:
        callback()

    assert vector(second) == expected(ANSWER)
    assert vector(second) != expected(ASKED, ANSWER)
    assert widest_views([Memory.objects.get(pk=second.pk)]) == [ANSWER]


def test_purging_and_deleting_by_filter_also_recompute_the_next_turn(bob, run_async, bag_model):
    with run_async():
        first = add_turn(bob, ASKED, 0)
        second = add_turn(bob, ANSWER, 1)
        third = add_turn(bob, FOLLOW, 2)
    assert vector(third) == expected(ASKED, ANSWER, FOLLOW)
    with run_async():
        services.memory_purge_now(actor=actor(bob), memory=first, reason="erase")
    # Both turns that embedded the purged one, the next and the one after it.
    assert vector(second) == expected(ANSWER)
    assert vector(third) == expected(ANSWER, FOLLOW)
    with run_async():
        services.memory_delete_by_filter(
            actor=actor(bob), conversation_id="chat-1", kinds=["fact"], reason="erase"
        )
    # Everything deleted: no vector holds any of it.
    assert not MemoryEmbedding.objects.filter(memory__in=[first, second, third]).exists()


def test_editing_a_turn_re_embeds_the_next_one_with_the_new_text(bob, run_async, bag_model):
    with run_async():
        first = add_turn(bob, ASKED, 0)
        second = add_turn(bob, ANSWER, 1)
    corrected = "Alice: When is the budget review?"
    with run_async():
        services.memory_update(
            actor=actor(bob), memory=first, expected_version=first.version, content=corrected
        )
    assert vector(first) == expected(corrected)
    assert vector(second) == expected(corrected, ANSWER)


def test_moving_a_turn_recomputes_its_old_and_new_followers(bob, run_async, bag_model):
    with run_async():
        first = add_turn(bob, ASKED, 0)
        second = add_turn(bob, ANSWER, 1)
        later = add_turn(bob, FOLLOW, 6)
    with run_async():
        services.memory_update(
            actor=actor(bob),
            memory=first,
            expected_version=first.version,
            attributes={"turn": 5, "speaker": "Alice"},
        )
    assert vector(second) == expected(ANSWER)
    assert vector(later) == expected(ASKED, FOLLOW)


def test_a_turn_written_late_is_added_to_the_next_turns_vector(bob, run_async, bag_model):
    with run_async():
        second = add_turn(bob, ANSWER, 1)
    assert vector(second) == expected(ANSWER)
    with run_async():
        add_turn(bob, ASKED, 0)
    assert vector(second) == expected(ASKED, ANSWER)


def test_context_never_comes_from_another_persons_scope_subject_or_conversation(
    alice, bob, run_async, bag_model
):
    with run_async():
        add_turn(alice, ASKED, 0)  # Alice's own scope, same conversation id and position
        add_turn(bob, "Bob: Something else entirely.", 0, conversation="chat-2")
        answer = add_turn(bob, ANSWER, 1)
    assert vector(answer) == expected(ANSWER)

    # Same scope and conversation but another subject: not this person's turn.
    other = Memory.objects.get(conversation_id="chat-2")
    Memory.objects.filter(pk=other.pk).update(conversation_id="chat-1", subject_id=alice.pk)
    answer.refresh_from_db()
    assert widest_views([answer]) == [ANSWER]
    # The same subject: it is.
    Memory.objects.filter(pk=other.pk).update(subject_id=answer.subject_id)
    assert widest_views([answer]) == ["Bob: Something else entirely.\n" + ANSWER]
    # Waiting for review (a model may not be sent it): not context either.
    Memory.objects.filter(pk=other.pk).update(verification=Verification.UNVERIFIED)
    assert widest_views([answer]) == [ANSWER]


def test_the_context_is_the_stored_text_with_secrets_redacted(bob, run_async, bag_model):
    secret = "ghp_Xh5Jmtf7EbsDe0G9Cryn687neLfjVHq8xiM0"
    with run_async():
        first = add_turn(bob, f"Alice: the deploy token is {secret}", 0)
        second = add_turn(bob, "Bob: thanks, deploying now", 1)
    first.refresh_from_db()
    assert secret not in first.content
    assert not any(secret in text for text in bag_model)
    assert vector(second) == expected(first.content, "Bob: thanks, deploying now")


def test_a_long_previous_turn_is_clipped(bob, run_async, bag_model):
    long_turn = "Alice: " + " ".join(f"word{i}" for i in range(400))
    with run_async():
        add_turn(bob, long_turn, 0)
        second = add_turn(bob, ANSWER, 1)
    (text,) = widest_views([second])
    assert text.endswith("\n" + ANSWER)
    assert len(text) <= turns.MAX_CONTEXT_CHARS + len(ANSWER) + 4


def test_reembed_under_another_model_computes_the_same_contextual_vectors(
    bob, run_async, bag_model
):
    with run_async():
        add_turn(bob, ASKED, 0)
        second = add_turn(bob, ANSWER, 1)
        add_turn(bob, FOLLOW, 2)
    other = embeddings.register_model("openai/fake-embed-16-b", "openai", "fake-embed-16", 16)
    result = reembed.reembed(other.pk, bob.organization)
    assert result["remaining"] == 0 and result["activated"]
    for memory in Memory.objects.filter(organization=bob.organization):
        assert vector(memory, other.pk) == vector(memory, MODEL)
    assert vector(second, other.pk) == expected(ASKED, ANSWER)


def test_turns_are_not_near_duplicate_merged(bob, run_async, bag_model):
    with run_async():
        add_turn(bob, ASKED, 0)
        again = add_turn(bob, ASKED.replace("?", " again?"), 1)
    outcome = services.memory_dedup(memory=again)
    assert outcome == {
        "decision": "skipped",
        "reason": "conversation turns are kept one per position",
    }
    again.refresh_from_db()
    assert again.status == Memory.Status.ACTIVE


def test_a_turn_waiting_for_review_becomes_context_once_accepted(
    alice, bob, chart, run_async, bag_model
):
    department = chart["sales"].pk
    with run_async():
        # Bob does not govern shared memory: his turn waits for review, no model is sent it.
        first = add_turn(bob, ASKED, 0, scope="department", scope_id=department)
        second = add_turn(alice, ANSWER, 1, scope="department", scope_id=department)
    assert first.verification == Verification.UNVERIFIED
    assert second.verification == Verification.VERIFIED
    assert vector(second) == expected(ANSWER)
    with run_async():
        services.memory_verify(
            actor=actor(alice), memory=first, decision="accept", expected_version=first.version
        )
    assert vector(second) == expected(ASKED, ANSWER)


def test_a_turn_number_that_is_not_an_integer_is_not_a_turn(bob, run_async, bag_model):
    digest = hashlib.sha256(b"x").hexdigest()
    memory = Memory(
        organization=bob.organization,
        scope="user",
        scope_id=bob.pk,
        scope_key=f"user:{bob.pk}",
        content=ANSWER,
        attributes={"turn": "1"},
        conversation_id="chat-1",
        content_hash=digest,
        created_at=timezone.now(),
    )
    assert turns.turn_position(memory) is None
    memory.attributes = {"turn": True}
    assert turns.turn_position(memory) is None
    memory.attributes = {"turn": 1, "extracted_by": "rules"}
    assert turns.turn_position(memory) is None
    memory.attributes = {"turn": 1}
    memory.kind = "summary"
    assert turns.turn_position(memory) is None


def _embedded_with_one_view(monkeypatch, bob, run_async):
    """Three turns embedded as before the views (one view: the turn after the previous one)."""
    monkeypatch.setattr(turns, "VIEWS", (1,))
    monkeypatch.setattr(turns, "CONTEXT_BEFORE", 1)
    with run_async():
        first = add_turn(bob, ASKED, 0)
        second = add_turn(bob, ANSWER, 1)
        third = add_turn(bob, FOLLOW, 2)
    assert vector(third) == pytest.approx(bag_of_words(f"{ANSWER}\n{FOLLOW}"), abs=1e-6)
    monkeypatch.setattr(turns, "VIEWS", (0, 1, 2))
    monkeypatch.setattr(turns, "CONTEXT_BEFORE", 2)
    return first, second, third


def test_an_upgrade_recomputes_stored_turn_vectors_in_place(bob, run_async, bag_model, monkeypatch):
    first, second, third = _embedded_with_one_view(monkeypatch, bob, run_async)
    fact = services.memory_add(
        actor=actor(bob), scope="user", kind="fact", content="Bob likes tea", source_kind="import"
    )
    rows_before = MemoryEmbedding.objects.count()
    out = io.StringIO()
    call_command("memory_reembed", "--model", MODEL, "--turns", stdout=out, verbosity=0)
    assert "3 turn vectors recomputed, 0 skipped" in out.getvalue()
    assert vector(third) == expected(ASKED, ANSWER, FOLLOW)
    assert vector(second) == expected(ASKED, ANSWER)
    assert vector(first) == expected(ASKED)
    # Replaced in place: no row added or lost; other memories untouched.
    assert MemoryEmbedding.objects.count() == rows_before
    assert not MemoryTask.objects.filter(memory=fact, status=MemoryTask.Status.FAILED).exists()


def test_the_upgrade_resumes_one_organization_after_the_last_id_it_printed(
    bob, run_async, bag_model, monkeypatch
):
    first, _, third = _embedded_with_one_view(monkeypatch, bob, run_async)
    slug = bob.organization.slug
    resume = ["--model", MODEL, "--after-id", str(first.pk)]
    # Ids interleave across organizations: an id from one would skip another's turns.
    for refused in (
        [*resume, "--turns"],
        [*resume, "--turns", "--organization", slug, "--organization", "other"],
        [*resume, "--organization", slug],  # without --turns
    ):
        with pytest.raises(CommandError, match="one --organization"):
            call_command("memory_reembed", *refused)
    assert vector(third) != expected(ASKED, ANSWER, FOLLOW)  # nothing was recomputed
    out = io.StringIO()
    call_command(
        "memory_reembed", *resume, "--turns", "--organization", slug, stdout=out, verbosity=0
    )
    assert f"{slug}: 2 turn vectors recomputed, 0 skipped" in out.getvalue()
    assert vector(third) == expected(ASKED, ANSWER, FOLLOW)


def test_a_turn_changed_while_its_vector_is_recomputed_keeps_no_removed_words(
    bob, run_async, bag_model, monkeypatch
):
    first, second, third = _embedded_with_one_view(monkeypatch, bob, run_async)
    computed = embeddings.embed_views
    deleted = []

    def embed_then_delete(provider, views):
        vectors = computed(provider, views)
        if not deleted:  # the first batch's vectors are computed: now the first turn goes
            deleted.append(first.pk)
            with run_async():
                services.memory_delete(actor=actor(bob), memory=first, reason="said by mistake")
        return vectors

    monkeypatch.setattr(embeddings, "embed_views", embed_then_delete)
    result = reembed.refresh_turn_vectors(MODEL, bob.organization)
    # The deleted turn and the two that embedded it.
    assert deleted and result["skipped"] == 3 and result["refreshed"] == 0
    # What the deletion's re-embedding wrote stays: none of the deleted turn's words.
    assert vector(second) == expected(ANSWER)
    assert vector(third) == expected(ANSWER, FOLLOW)


def test_a_turn_edited_while_its_vector_is_recomputed_keeps_its_new_words_only(
    bob, run_async, bag_model, monkeypatch
):
    _, second, third = _embedded_with_one_view(monkeypatch, bob, run_async)
    computed = embeddings.embed_views
    corrected = "Bob: Friday at ten, in room two."

    def embed_then_edit(provider, views):
        vectors = computed(provider, views)
        if Memory.objects.get(pk=second.pk).content != corrected:
            with run_async():
                services.memory_update(
                    actor=actor(bob),
                    memory=second,
                    expected_version=second.version,
                    content=corrected,
                )
        return vectors

    monkeypatch.setattr(embeddings, "embed_views", embed_then_edit)
    result = reembed.refresh_turn_vectors(MODEL, bob.organization)
    # The edited turn and the one that embeds it are left to the edit's re-embedding.
    assert result["skipped"] == 2 and result["refreshed"] == 1
    assert vector(second) == expected(ASKED, corrected)
    assert vector(third) == expected(ASKED, corrected, FOLLOW)


# --- a change crossing the first write of a vector (the enrich task's) --------------------


def test_a_neighbour_deleted_while_a_turns_vector_is_computed_leaves_none_of_its_words(
    bob, run_async, bag_model, django_capture_on_commit_callbacks, monkeypatch
):
    with run_async():
        first = add_turn(bob, ASKED, 0)
    with django_capture_on_commit_callbacks(execute=False):  # its enrich has not run yet
        second = add_turn(bob, ANSWER, 1)
    computed = embeddings.embed_views
    queued = []

    def embed_then_delete(provider, views):
        vectors = computed(provider, views)  # with the first turn as context
        if not queued:  # the model is still answering when the person deletes the first turn
            with django_capture_on_commit_callbacks(execute=False) as callbacks:
                services.memory_delete(actor=actor(bob), memory=first, reason="said by mistake")
            queued.extend(callbacks)
        return vectors

    monkeypatch.setattr(embeddings, "embed_views", embed_then_delete)
    model = embeddings.active_model(bob.organization_id)
    assert embeddings.embed_memories([Memory.objects.get(pk=second.pk)], model) == 0
    assert vector(second) is None
    monkeypatch.setattr(embeddings, "embed_views", computed)
    with run_async():  # the deletion's re-embedding of the second turn
        for callback in queued:
            callback()
    assert vector(second) == expected(ANSWER)


def test_a_memory_edited_while_its_vector_is_computed_keeps_only_its_new_words(
    bob, run_async, bag_model, django_capture_on_commit_callbacks, monkeypatch
):
    with django_capture_on_commit_callbacks(execute=False):
        memory = add_turn(bob, ASKED, 0)
    corrected = "Alice: When is the budget review?"
    computed = embeddings.embed_views
    queued = []

    def embed_then_edit(provider, views):
        vectors = computed(provider, views)
        if not queued:
            current = Memory.objects.get(pk=memory.pk)
            with django_capture_on_commit_callbacks(execute=False) as callbacks:
                services.memory_update(
                    actor=actor(bob),
                    memory=current,
                    expected_version=current.version,
                    content=corrected,
                )
            queued.extend(callbacks)
        return vectors

    monkeypatch.setattr(embeddings, "embed_views", embed_then_edit)
    model = embeddings.active_model(bob.organization_id)
    assert embeddings.embed_memories([Memory.objects.get(pk=memory.pk)], model) == 0
    monkeypatch.setattr(embeddings, "embed_views", computed)
    with run_async():
        for callback in queued:
            callback()
    assert vector(memory) == expected(corrected)


def _waiting_on_advisory_lock(pid: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT wait_event FROM pg_stat_activity WHERE pid = %s", [pid])
        row = cursor.fetchone()
    return row is not None and row[0] == "advisory"


@pytest.mark.django_db(transaction=True)
def test_a_vector_written_while_a_deletion_commits_waits_for_it_and_keeps_none_of_its_words(
    bob, bag_model
):
    first = add_turn(bob, ASKED, 0)
    second = add_turn(bob, ANSWER, 1)
    model = embeddings.active_model(bob.organization_id)
    MemoryEmbedding.objects.filter(memory=second).delete()  # its first vector is still to come
    deleted, proceed, writer_pid, written = (
        threading.Event(),
        threading.Event(),
        [],
        [],
    )

    def deletion():  # the person's request: deleted, its transaction not committed yet
        try:
            with transaction.atomic():
                services.memory_delete(actor=actor(bob), memory=first, reason="said by mistake")
                deleted.set()
                proceed.wait(30)
        finally:
            connection.close()

    def writer():  # the enrich task: computes with the first turn (its deletion is unseen)
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                writer_pid.append(cursor.fetchone()[0])
            written.append(embeddings.embed_memories([Memory.objects.get(pk=second.pk)], model))
        finally:
            connection.close()

    threads = [threading.Thread(target=deletion)]
    threads[0].start()
    try:
        assert deleted.wait(30)
        threads.append(threading.Thread(target=writer))
        threads[1].start()
        # The writer waits for the conversation's lock, which the deletion holds.
        wait_until(
            lambda: writer_pid and _waiting_on_advisory_lock(writer_pid[0]),
            30,
            "the writer waits for the deletion",
        )
        assert vector(second) is None
    finally:
        proceed.set()
        for thread in threads:
            thread.join(30)
    assert written == [0]  # it found the first turn gone: nothing written
    after = vector(second)  # none yet, or the deletion's queued re-embed has run
    assert after is None or after == expected(ANSWER)
    embeddings.embed_memories([Memory.objects.get(pk=second.pk)], model)  # the queued re-embed
    assert vector(second) == expected(ANSWER)


@pytest.mark.django_db(transaction=True)
def test_a_memory_being_changed_is_not_waited_for_but_left_to_the_tasks_retry(bob, bag_model):
    memory = add_turn(bob, ASKED, 0)
    MemoryEmbedding.objects.filter(memory=memory).delete()
    model = embeddings.active_model(bob.organization_id)
    locked, release = threading.Event(), threading.Event()

    def change():  # an edit holding the row, not committed yet
        try:
            with transaction.atomic():
                Memory.objects.select_for_update().get(pk=memory.pk)
                locked.set()
                release.wait(30)
        finally:
            connection.close()

    thread = threading.Thread(target=change)
    thread.start()
    try:
        assert locked.wait(30)
        with pytest.raises(embeddings.EmbeddingBusy) as busy:
            embeddings.embed_memories([Memory.objects.get(pk=memory.pk)], model)
        assert busy.value.memory_ids == [memory.pk]
        assert vector(memory) is None
    finally:
        release.set()
        thread.join(30)
    assert embeddings.embed_memories([Memory.objects.get(pk=memory.pk)], model) == 1  # the retry
    assert vector(memory) == expected(ASKED)
