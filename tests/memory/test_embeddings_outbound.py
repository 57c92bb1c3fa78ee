"""The OpenAI-compatible embeddings client goes through the outbound guard: an endpoint at, or
resolving to, a metadata or (not allowed) internal address gets nothing — no text to embed, no
API key."""

from __future__ import annotations

import pytest

from cadre.memory.embeddings import EmbeddingError, OpenAICompatibleProvider
from cadre.outbound import OutboundRefused
from connectors.tests import guard
from connectors.tests.guard import reached

dns = guard.dns
connections = guard.connections
METADATA = "169.254.169.254"


@pytest.mark.parametrize(
    "base_url",
    ["http://169.254.169.254/v1", "https://embed.example.test/v1", "http://[fd00:ec2::254]/v1"],
)
def test_an_embedding_endpoint_at_metadata_is_sent_nothing(dns, connections, base_url):
    dns["embed.example.test"] = METADATA
    provider = OpenAICompatibleProvider(
        base_url=base_url, name="text-embedding-3-small", api_key="sk-secret", max_attempts=1
    )
    with pytest.raises((OutboundRefused, EmbeddingError)):
        provider.embed(["a private memory"])
    assert reached(connections, METADATA, "embed.example.test", "fd00:ec2::254") == []


def test_a_loopback_endpoint_needs_the_model_providers_allow_list(connections, settings):
    settings.CADRE_MODEL_PROVIDER_ALLOWED_HOSTS = []
    provider = OpenAICompatibleProvider(
        base_url="http://127.0.0.1:9/v1", name="m", api_key="sk-secret", max_attempts=1
    )
    with pytest.raises((OutboundRefused, EmbeddingError)):
        provider.embed(["a private memory"])
    assert connections == []


def test_a_refused_endpoint_is_an_embedding_error_so_search_falls_back(dns, connections):
    # Callers (hybrid search, the embedding jobs) fall back to lexical search on EmbeddingError;
    # the guard's own OutboundRefused (a 400) would escape them and fail the search instead.
    dns["embed.example.test"] = METADATA
    provider = OpenAICompatibleProvider(
        base_url="https://embed.example.test/v1", name="m", api_key="sk-secret", max_attempts=3
    )
    with pytest.raises(EmbeddingError, match=r"embed\.example\.test") as refused:
        provider.embed(["a private memory"])
    assert not isinstance(refused.value, OutboundRefused)
    assert reached(connections, METADATA, "embed.example.test") == []
