"""The local embedding provider with a named model for a test, providers and the cache fresh
before and after (the skills' prefetched vectors are cached per model)."""

from __future__ import annotations

from contextlib import contextmanager

from django.core.cache import cache

from cadre.memory import embeddings


@contextmanager
def local_embedding_model(monkeypatch, name: str):
    monkeypatch.setenv("CADRE_EMBEDDING_PROVIDER", "local")
    monkeypatch.setenv("CADRE_EMBEDDING_MODEL", name)
    monkeypatch.delenv("CADRE_EMBEDDING_DIMENSION", raising=False)
    monkeypatch.delenv("CADRE_EMBEDDING_SIMILARITY_FLOOR", raising=False)
    embeddings.forget_providers()
    cache.clear()
    try:
        yield
    finally:
        cache.clear()
        embeddings.forget_providers()
