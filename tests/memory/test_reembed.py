"""Re-embedding under a new model: resumable, progress shown, and search switches to the new
model only once every memory has a vector under it. The new model is an OpenAI-compatible
embeddings endpoint served on loopback."""

from __future__ import annotations

import hashlib
import io
import json
import math
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.core.management import CommandError, call_command

from cadre.governance.models import AuditEvent
from cadre.memory import embeddings, selectors, services
from cadre.memory.models import EmbeddingModel, MemoryEmbedding, OrganizationEmbeddingModel
from tests.memory.conftest import actor

DIMENSION = 16


def bag_of_words(text: str) -> list[float]:
    vector = [0.0] * DIMENSION
    for word in re.findall(r"\w+", text.lower()):
        vector[int(hashlib.sha256(word.encode()).hexdigest(), 16) % DIMENSION] += 1.0
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


@pytest.fixture
def embedding_server(monkeypatch):
    """POST /v1/embeddings as OpenAI documents it: {model, input: [...]} -> {data: [...]}."""
    inputs: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            inputs.extend(body["input"])
            payload = json.dumps(
                {
                    "object": "list",
                    "model": body["model"],
                    "data": [
                        {"object": "embedding", "index": i, "embedding": bag_of_words(text)}
                        for i, text in enumerate(body["input"])
                    ],
                    "usage": {"prompt_tokens": 0, "total_tokens": 0},
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    monkeypatch.setenv("CADRE_EMBEDDING_BASE_URL", f"http://127.0.0.1:{httpd.server_address[1]}/v1")
    embeddings.forget_providers()
    yield inputs
    embeddings.forget_providers()
    httpd.shutdown()
    httpd.server_close()


def test_reembed_is_resumable_and_switches_only_when_complete(bob, run_async, embedding_server):
    with run_async():
        memories = [
            services.memory_add(
                actor=actor(bob),
                scope="user",
                kind="fact",
                content=text,
                source_kind="user_statement",
            )
            for text in (
                "The warehouse is in Ningbo",
                "Invoices go to finance@acme.test",
                "The CFO is Liu Yang",
            )
        ]
    local = embeddings.active_model(bob.organization)
    assert MemoryEmbedding.objects.filter(model=local).count() == 3
    target = "openai/fake-embed-16"

    out, err = io.StringIO(), io.StringIO()
    call_command(
        "memory_reembed",
        "--model",
        target,
        "--provider",
        "openai",
        "--name",
        "fake-embed-16",
        "--dimension",
        str(DIMENSION),
        "--limit",
        "2",
        stdout=out,
        stderr=err,
    )
    assert "2 embedded, 1 remaining" in out.getvalue()
    assert "embedding under openai/fake-embed-16" in err.getvalue()  # the tqdm bar
    new = EmbeddingModel.objects.get(pk=target)
    assert OrganizationEmbeddingModel.objects.get(model=new).status == "building"
    assert embeddings.active_model(bob.organization).pk == local.pk  # still the complete one
    assert selectors.memory_search(actor=actor(bob), query="where is the warehouse").hits

    # Written during the re-embed: embedded under the building model too.
    with run_async():
        late = services.memory_add(
            actor=actor(bob),
            scope="user",
            kind="fact",
            content="The backup site is in Wuhan",
            source_kind="user_statement",
        )
    assert MemoryEmbedding.objects.filter(memory=late, model=new).exists()

    out = io.StringIO()
    call_command("memory_reembed", "--model", target, stdout=out, stderr=io.StringIO())
    assert "1 embedded, 0 remaining; model openai/fake-embed-16 is active" in out.getvalue()
    uses = OrganizationEmbeddingModel.objects.filter(organization=bob.organization)
    assert dict(uses.values_list("model_id", "status")) == {target: "active", local.pk: "retired"}
    switched = AuditEvent.objects.get(action="memory.embedding_activate")
    assert (switched.organization_id, switched.actor_type) == (bob.organization_id, "system")
    assert MemoryEmbedding.objects.filter(model=new).count() == 4
    assert sorted(embedding_server) == sorted(
        [m.content for m in memories] + [late.content]
    )  # each memory sent exactly once: the resumed run did not redo the first two

    embedding_server.clear()
    hits = selectors.memory_search(actor=actor(bob), query="where is the warehouse").hits
    assert hits[0].memory.content == "The warehouse is in Ningbo"
    assert embedding_server == ["where is the warehouse"]  # the query went to the new model


def test_reembed_of_an_unknown_model_is_a_clear_error(db):
    with pytest.raises(CommandError, match="Unknown embedding model"):
        call_command("memory_reembed", "--model", "openai/nope", stdout=io.StringIO())


def test_the_models_page_starts_a_reembed_and_shows_its_coverage(
    alice, bob, run_async, embedding_server, monkeypatch, client
):
    from django.urls import reverse

    from cadre.memory.models import MemoryTask
    from cadre.memory.reembed import embedding_status

    with run_async():
        for text in ("The warehouse is in Ningbo", "The CFO is Liu Yang"):
            services.memory_add(
                actor=actor(bob),
                scope="user",
                kind="fact",
                content=text,
                source_kind="user_statement",
            )
    local = embeddings.active_model(bob.organization)
    monkeypatch.setenv("CADRE_EMBEDDING_PROVIDER", "openai")
    monkeypatch.setenv("CADRE_EMBEDDING_MODEL", "fake-embed-16")
    monkeypatch.setenv("CADRE_EMBEDDING_DIMENSION", str(DIMENSION))
    before = embedding_status(bob.organization)
    assert (before.active, before.configured_id, before.target) == (
        local,
        "openai/fake-embed-16",
        None,
    )
    assert (before.embedded, before.total) == (0, 2)
    client.force_login(alice.user)
    card = client.get(reverse("console:embeddings")).content.decode()
    assert "0 of 2 memories embedded (0 %)" in card and "openai/fake-embed-16" in card

    with run_async():
        assert client.post(reverse("console:embeddings_reembed")).status_code == 302
    task = MemoryTask.objects.get(kind=MemoryTask.Kind.REEMBED)
    assert task.status == MemoryTask.Status.COMPLETED, task.error
    after = embedding_status(bob.organization)
    assert after.active.pk == "openai/fake-embed-16" and after.active.dimension == DIMENSION
    assert (after.embedded, after.total, after.coverage) == (2, 2, 1.0)
    card = client.get(reverse("console:models")).content.decode()
    assert "2 of 2 memories embedded (100 %)" in card and 'hx-trigger="every 2s"' not in card
