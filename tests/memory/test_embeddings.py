"""Embedding providers and models: the local model, an OpenAI-compatible endpoint (a loopback
fake `/v1/embeddings` server), per-model HNSW indexes, idempotent embedding, atomic switch."""

from __future__ import annotations

import hashlib
import json
import math
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import connection

from cadre.memory import embeddings, selectors
from cadre.memory.models import (
    EmbeddingModel,
    Memory,
    MemoryEmbedding,
    OrganizationEmbeddingModel,
)
from cadre.memory.text import lexical_document

FAKE_DIMENSION = 8


def gate_reader(org):  # a named system reader: internal reads go through the gate
    return selectors.system_reader(org, job="tests", reason="search the test's memories")


def fake_vector(text: str) -> list[float]:
    """A deterministic, deliberately unnormalized vector: hashed bag of words."""
    vector = [0.0] * FAKE_DIMENSION
    for word in text.lower().split():
        digest = hashlib.sha256(word.encode()).digest()
        vector[digest[0] % FAKE_DIMENSION] += 1.0 + digest[1] / 255
    vector[0] += 0.5
    return [3.0 * x for x in vector]


class FakeEmbeddingsServer:
    """A loopback OpenAI-compatible server: POST /v1/embeddings. `failures` is a list of
    (status, headers) answered before the next successful responses."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.failures: list[tuple[int, dict]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(
                    {"path": self.path, "auth": self.headers.get("Authorization"), "body": body}
                )
                if self.path != "/v1/embeddings":
                    return self._reply(404, {"error": {"message": "not found"}})
                if server.failures:
                    status, headers = server.failures.pop(0)
                    return self._reply(status, {"error": {"message": "try later"}}, headers)
                inputs = body["input"]
                data = [
                    {"object": "embedding", "index": i, "embedding": fake_vector(text)}
                    for i, text in enumerate(inputs)
                ]
                data.reverse()  # clients must order by "index", not by position
                return self._reply(200, {"object": "list", "data": data, "model": body["model"]})

            def _reply(self, status, payload, headers=None):
                raw = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(raw)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> FakeEmbeddingsServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def fake_server():
    with FakeEmbeddingsServer() as server:
        yield server


@pytest.fixture
def openai_env(fake_server, monkeypatch, tmp_path):
    """Configure Cadre for the fake endpoint (key read from a _FILE secret)."""
    key_file = tmp_path / "embedding-key"
    key_file.write_text("sk-test-123\n")
    monkeypatch.setenv("CADRE_EMBEDDING_PROVIDER", "openai")
    monkeypatch.setenv("CADRE_EMBEDDING_BASE_URL", fake_server.base_url)
    monkeypatch.setenv("CADRE_EMBEDDING_MODEL", "fake-a")
    monkeypatch.setenv("CADRE_EMBEDDING_DIMENSION", str(FAKE_DIMENSION))
    monkeypatch.setenv("CADRE_EMBEDDING_API_KEY_FILE", str(key_file))
    embeddings.forget_providers()
    yield fake_server
    embeddings.forget_providers()


def remember(org, content: str, scope_key: str = "agent:1", **fields) -> Memory:
    return Memory.objects.create(
        organization=org,
        scope="agent",
        scope_id=1,
        scope_key=scope_key,
        content=content,
        search_text=lexical_document(content),
        content_hash=hashlib.sha256(content.encode()).hexdigest(),
        **fields,
    )


# --- providers ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["multilingual-e5-small", "all-MiniLM-L6-v2"])
def test_local_provider_embeds_normalized_384_d_vectors(name):
    provider = embeddings.LocalProvider(name)
    vectors = provider.embed(["the cat sat on the mat", "a kitten rested on the rug", "tax law"])
    assert provider.dimension == 384
    assert all(len(vector) == 384 for vector in vectors)
    assert all(abs(math.sqrt(sum(x * x for x in v)) - 1) < 1e-4 for v in vectors)

    def cosine(a, b):
        return sum(x * y for x, y in zip(a, b, strict=True))

    assert cosine(vectors[0], vectors[1]) > cosine(vectors[0], vectors[2])
    assert provider.embed([]) == []


def test_openai_provider_batches_orders_by_index_and_authenticates(fake_server):
    provider = embeddings.OpenAICompatibleProvider(
        base_url=fake_server.base_url, name="fake-a", api_key="sk-x", batch_size=2
    )
    texts = ["alpha beta", "gamma", "delta epsilon", "zeta", "eta"]
    vectors = provider.embed(texts)
    assert len(fake_server.requests) == 3
    assert all(r["auth"] == "Bearer sk-x" for r in fake_server.requests)
    assert fake_server.requests[0]["body"] == {"model": "fake-a", "input": texts[:2]}
    for text, vector in zip(texts, vectors, strict=True):
        expected = fake_vector(text)
        norm = math.sqrt(sum(x * x for x in expected))
        assert vector == pytest.approx([x / norm for x in expected])
    assert provider.dimension == FAKE_DIMENSION  # probed with one request
    assert len(fake_server.requests) == 4


def test_openai_provider_retries_429_and_5xx(fake_server):
    fake_server.failures = [(429, {"Retry-After": "0"}), (503, {}), (502, {})]
    provider = embeddings.OpenAICompatibleProvider(
        base_url=fake_server.base_url, name="fake-a", dimension=FAKE_DIMENSION, backoff=0
    )
    assert len(provider.embed(["hello"])) == 1
    assert len(fake_server.requests) == 4


def test_openai_provider_gives_up_with_a_clear_error(fake_server):
    fake_server.failures = [(400, {})]
    provider = embeddings.OpenAICompatibleProvider(
        base_url=fake_server.base_url, name="fake-a", dimension=FAKE_DIMENSION, backoff=0
    )
    with pytest.raises(embeddings.EmbeddingError, match="HTTP 400"):
        provider.embed(["hello"])
    assert len(fake_server.requests) == 1  # a client error is not retried

    fake_server.failures = [(500, {})] * 4
    with pytest.raises(embeddings.EmbeddingError, match="HTTP 500"):
        provider.embed(["hello"])
    assert len(fake_server.requests) == 1 + 4


def test_openai_provider_rejects_vectors_of_the_wrong_size(fake_server):
    provider = embeddings.OpenAICompatibleProvider(
        base_url=fake_server.base_url, name="fake-a", dimension=16, backoff=0
    )
    with pytest.raises(embeddings.EmbeddingError, match="expected 16"):
        provider.embed(["hello"])


def test_configuration_from_environment(openai_env, monkeypatch):
    config = embeddings.configured()
    assert config.provider == "openai"
    assert config.model_id == "openai/fake-a"
    assert config.api_key == "sk-test-123"
    assert config.dimension == FAKE_DIMENSION
    monkeypatch.setenv("CADRE_EMBEDDING_PROVIDER", "cohere")
    with pytest.raises(ImproperlyConfigured, match="CADRE_EMBEDDING_PROVIDER"):
        embeddings.configured()
    monkeypatch.setenv("CADRE_EMBEDDING_PROVIDER", "local")
    with pytest.raises(ImproperlyConfigured, match="ships all-MiniLM-L6-v2, multilingual-e5"):
        embeddings.configured()  # "fake-a" is not a model the local provider has
    monkeypatch.delenv("CADRE_EMBEDDING_MODEL")
    monkeypatch.setenv("CADRE_EMBEDDING_DIMENSION", "768")
    with pytest.raises(ImproperlyConfigured, match="CADRE_EMBEDDING_DIMENSION"):
        embeddings.configured()
    monkeypatch.delenv("CADRE_EMBEDDING_DIMENSION")
    assert embeddings.configured().model_id == "local/multilingual-e5-small"
    for bad in ("1", "-0.1", "nan", "1e309", "high"):
        monkeypatch.setenv("CADRE_EMBEDDING_SIMILARITY_FLOOR", bad)
        with pytest.raises(ImproperlyConfigured, match="CADRE_EMBEDDING_SIMILARITY_FLOOR"):
            embeddings.configured()


def test_openai_provider_prefixes_queries_and_documents(fake_server):
    provider = embeddings.OpenAICompatibleProvider(
        base_url=fake_server.base_url,
        name="fake-a",
        dimension=FAKE_DIMENSION,
        query_prefix="query: ",
        document_prefix="passage: ",
    )
    provider.embed(["where is my desk"], query=True)
    provider.embed(["my desk is on floor 12"])
    sent = [request["body"]["input"] for request in fake_server.requests]
    assert sent == [["query: where is my desk"], ["passage: my desk is on floor 12"]]


def test_the_default_local_model_reads_chinese():
    """multilingual-e5-small: each Chinese question finds its own fact among one person's
    Chinese facts (all-MiniLM-L6-v2 sees little but shared characters in Chinese)."""
    provider = embeddings.LocalProvider()
    assert provider.name == "multilingual-e5-small" and provider.dimension == 384
    facts = [
        "我的工位在 12 楼靠窗的位置",
        "我的工号是 SZ20931",
        "我对花生过敏",
        "每周一把周报发给李伟",
    ]
    questions = ["我在几楼上班？", "我的员工编号是多少", "我不能吃什么", "周报要发给谁"]
    vectors = provider.embed(facts)
    asked = provider.embed(questions, query=True)
    assert all(abs(math.sqrt(sum(x * x for x in v)) - 1) < 1e-3 for v in [*vectors, *asked])

    def cosine(a, b):
        return sum(x * y for x, y in zip(a, b, strict=True))

    best = [max(range(len(facts)), key=lambda i: cosine(q, vectors[i])) for q in asked]
    assert best == [0, 1, 2, 3]
    # Questions and facts are embedded differently (E5's "query: " / "passage: ").
    assert provider.embed([questions[0]])[0] != pytest.approx(asked[0], abs=1e-3)


def test_similarity_thresholds_follow_each_models_scale(openai_env, monkeypatch):
    e5 = EmbeddingModel(
        id="local/multilingual-e5-small",
        provider="local",
        name="multilingual-e5-small",
        dimension=384,
    )
    minilm = EmbeddingModel(
        id="local/all-MiniLM-L6-v2", provider="local", name="all-MiniLM-L6-v2", dimension=384
    )
    endpoint = EmbeddingModel(id="openai/fake-a", provider="openai", name="fake-a", dimension=8)
    assert embeddings.similarity_threshold(minilm, 0.75) == pytest.approx(0.75)
    assert embeddings.similarity_threshold(e5, 0.75) == pytest.approx(0.95)
    assert embeddings.calibrated_similarity(e5, 0.95) == pytest.approx(0.75)
    assert embeddings.similarity_threshold(endpoint, 0.5) == pytest.approx(0.5)
    monkeypatch.setenv("CADRE_EMBEDDING_SIMILARITY_FLOOR", "0.6")
    assert embeddings.similarity_threshold(endpoint, 0.5) == pytest.approx(0.8)
    other = EmbeddingModel(id="openai/other", provider="openai", name="other", dimension=8)
    assert embeddings.similarity_threshold(other, 0.5) == pytest.approx(0.5)  # not configured


# --- models, indexes, activation -----------------------------------------------------------


def _index_definition(name: str) -> str | None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", [name])
        row = cursor.fetchone()
    return row[0] if row else None


@pytest.mark.django_db
def test_register_model_creates_a_partial_hnsw_index_per_model():
    small = embeddings.register_model("test/small", "openai", "small", 8)
    large = embeddings.register_model("test/large", "openai", "large", 3072)
    assert not small.uses.exists()  # the instance knows it; no organization uses it yet
    definition = _index_definition(embeddings.index_name(small))
    assert "USING hnsw" in definition
    assert "vector(8)" in definition and "vector_ip_ops" in definition
    assert "WHERE ((model_id)::text = 'test/small'::text)" in definition
    assert "halfvec(3072)" in _index_definition(embeddings.index_name(large))
    # Registering again is a no-op; a different shape under the same id is refused.
    assert embeddings.register_model("test/small", "openai", "small", 8) == small
    with pytest.raises(ValueError, match="registered as"):
        embeddings.register_model("test/small", "openai", "small", 16)


@pytest.mark.django_db(transaction=True)
def test_an_upgrade_replaces_a_models_cosine_index_with_an_inner_product_one():
    """Before turn vectors were means of views, the vector side ranked by cosine distance over
    a cosine index: the next ensure_index (an upgrade's `migrate`) builds the inner-product
    index and drops the old one."""
    model = embeddings.register_model("test/upgrade", "openai", "upgrade", 8)
    table = MemoryEmbedding._meta.db_table
    legacy = embeddings.legacy_index_name(model)
    try:
        with connection.cursor() as cursor:
            cursor.execute(f"DROP INDEX {embeddings.index_name(model)}")
            cursor.execute(
                f"CREATE INDEX {legacy} ON {table} USING hnsw ((embedding::vector(8)) "
                "vector_cosine_ops) WHERE model_id = 'test/upgrade'"
            )
        assert _index_definition(embeddings.index_name(model)) is None
        assert embeddings.ensure_index(model) == embeddings.index_name(model)
        assert "vector_ip_ops" in _index_definition(embeddings.index_name(model))
        assert _index_definition(legacy) is None
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"DROP INDEX IF EXISTS {legacy}")
            cursor.execute(f"DROP INDEX IF EXISTS {embeddings.index_name(model)}")


@pytest.mark.django_db
def test_active_model_registers_and_activates_the_configured_default(openai_env, org_a):
    assert not EmbeddingModel.objects.exists()
    model = embeddings.active_model(org_a)
    assert model.id == "openai/fake-a"
    use = OrganizationEmbeddingModel.objects.get(organization=org_a, model=model)
    assert use.status == OrganizationEmbeddingModel.Status.ACTIVE and use.activated_at is not None
    assert _index_definition(embeddings.index_name(model)) is not None
    assert embeddings.active_model(org_a) == model


@pytest.mark.django_db
def test_embed_memories_is_idempotent_and_skips_deleted(openai_env, org_a):
    kept = [remember(org_a, f"note {i}") for i in range(3)]
    remember(org_a, "gone", status=Memory.Status.DELETED)
    assert embeddings.embed_memories(Memory.objects.all()) == 3
    requests = len(openai_env.requests)
    assert embeddings.embed_memories(Memory.objects.all()) == 0
    assert len(openai_env.requests) == requests  # nothing re-sent
    stored = MemoryEmbedding.objects.get(memory=kept[0])
    assert len(stored.embedding) == FAKE_DIMENSION


@pytest.mark.django_db
def test_activate_refuses_an_incomplete_model_then_switches_atomically(openai_env, org_a):
    old = embeddings.active_model(org_a)
    memories = [remember(org_a, f"fact number {i}") for i in range(4)]
    embeddings.embed_memories(memories)
    new = embeddings.register_model("openai/fake-b", "openai", "fake-b", FAKE_DIMENSION)
    embeddings.mark_building(new, org_a)
    embeddings.embed_memories(memories[:2], new)
    assert list(embeddings.missing_embeddings(new, org_a)) == memories[2:]

    def statuses():
        uses = OrganizationEmbeddingModel.objects.filter(organization=org_a)
        return dict(uses.values_list("model_id", "status"))

    with pytest.raises(embeddings.EmbeddingModelIncomplete, match="2 memories"):
        embeddings.activate(new, org_a)
    assert statuses() == {old.pk: "active", new.pk: "building"}

    assert embeddings.embed_memories(embeddings.missing_embeddings(new, org_a), new) == 2
    embeddings.activate(new, org_a)
    assert statuses() == {old.pk: "retired", new.pk: "active"}
    assert embeddings.active_model(org_a) == new
    # Search now runs through the new model's index (the old vectors are ignored).
    hits = selectors.memory_search(
        actor=gate_reader(org_a), scope_keys=["agent:1"], query="fact number 3"
    )
    assert hits and "vector_rank" in hits[0].components


@pytest.mark.django_db
def test_search_falls_back_to_lexical_when_the_endpoint_is_down(openai_env, org_a):
    remember(org_a, "The VPN gateway is vpn.acme.test")
    embeddings.embed_memories(Memory.objects.all())
    embeddings.forget_providers()
    openai_env.failures = [(503, {})] * 10
    provider = embeddings.provider_for(embeddings.active_model())
    provider.backoff = 0
    hits = selectors.memory_search(
        actor=gate_reader(org_a), scope_keys=["agent:1"], query="vpn gateway"
    )
    assert [hit.memory.content for hit in hits] == ["The VPN gateway is vpn.acme.test"]
    assert "vector_rank" not in hits[0].components
