"""Token usage read in each provider's own documented fields, and priced as the provider does:
every shipped endpoint preset against the loopback servers answering in that provider's usage
format (prompt-cache hits at the cached-input price, cache writes at the cache-write price)."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.test import Client
from django.urls import reverse

from cadre.agents import providers
from cadre.agents.models import Step
from cadre.llm.base import ProviderConfig, Usage, provider_for
from cadre.llm.metering import uncharged
from cadre.llm.openai_compatible import OpenAICompatibleProvider
from cadre.llm.presets import provider_presets
from cadre.tenancy.actors import member_actor
from tests.agents.fake_models import FakeModelServer
from tests.agents.test_memory_context import _agent, _run


@pytest.fixture(autouse=True)
def _adapter_calls_name_no_account():
    """These tests call the adapters themselves, outside any account."""
    with uncharged():
        yield


# Whose documented usage fields each preset's endpoint answers in (see fake_models).
USAGE_FORMAT = {
    "openai": "openai",
    "azure_openai": "openai",
    "deepseek": "deepseek",
    "dashscope": "openai",  # compatible mode: prompt_tokens_details.cached_tokens
    "moonshot": "moonshot",
    "zhipu": "openai",
    "vllm": "openai",
    "ollama": "plain",
    "lm_studio": "plain",
    "openai_compatible": "openai",
    "anthropic": "anthropic",
}
PRICES = {"input": "2", "cached_input": "0.2", "cache_write": "2.5", "output": "8"}
# Long enough for the servers' 1,024-token cache minimum.
SYSTEM = "\n".join(
    f"Rule {n}: a refund of category {n} needs the order number, the customer's tier and the "
    "payment channel before any answer; escalate disputes above the limit."
    for n in range(1, 61)
)


def _hits(usage_format: str, reported: dict) -> tuple[int, int]:
    """(cache reads, cache writes) as the server reported them, in its provider's fields."""
    if usage_format == "anthropic":
        return reported["cache_read_input_tokens"], reported["cache_creation_input_tokens"]
    if usage_format == "deepseek":
        return reported["prompt_cache_hit_tokens"], 0
    if usage_format == "moonshot":
        return reported["cached_tokens"], 0
    if usage_format == "plain":
        return 0, 0
    return reported["prompt_tokens_details"]["cached_tokens"], 0


def _prompt_tokens(usage_format: str, reported: dict) -> int:
    if usage_format == "anthropic":
        return (
            reported["input_tokens"]
            + reported["cache_read_input_tokens"]
            + reported["cache_creation_input_tokens"]
        )
    return reported["prompt_tokens"]


def _price(fresh: int, read: int, written: int, output: int) -> Decimal:
    total = (
        Decimal(PRICES["input"]) * fresh
        + Decimal(PRICES["cached_input"]) * read
        + Decimal(PRICES["cache_write"]) * written
        + Decimal(PRICES["output"]) * output
    )
    return (total / Decimal(1_000_000)).quantize(Decimal("0.000001"))


def test_every_shipped_preset_has_a_documented_usage_format():
    shipped = {key for key, preset in provider_presets().items() if preset.kind != "offline"}
    assert shipped == set(USAGE_FORMAT)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("preset_key", sorted(USAGE_FORMAT))
def test_cache_hits_are_read_in_the_providers_own_fields_and_priced(preset_key, stream):
    preset = provider_presets()[preset_key]
    usage_format = USAGE_FORMAT[preset_key]
    with FakeModelServer(
        [{"text": "Checked."}, {"text": "Checked again."}],
        caching=True,
        usage_format="openai" if usage_format == "anthropic" else usage_format,
    ) as server:
        provider = provider_for(
            {"model": preset.model or "m"},
            ProviderConfig(
                kind=preset.kind,
                base_url=server.root_url if preset.kind == "anthropic" else server.base_url,
                prices=PRICES,
            ),
        )
        results = [
            provider.chat(
                [
                    {"role": "system", "content": SYSTEM, "cache_break": True},
                    {"role": "user", "content": f"Question {n}: where is order {1000 + n}?"},
                ],
                [],
                stream=stream,
            )
            for n in range(2)
        ]

    for result, reported in zip(results, server.usages, strict=True):
        read, written = _hits(usage_format, reported)
        prompt = _prompt_tokens(usage_format, reported)
        output = reported.get("completion_tokens", reported.get("output_tokens"))
        assert result.usage == Usage(
            prompt, output, cached_input_tokens=read, cache_write_tokens=written
        )
        assert result.usage.cost(PRICES, result.model) == _price(
            prompt - read - written, read, written, output
        )
    # the second call's prompt shares the first's long prefix: served from the cache
    read, _ = _hits(usage_format, server.usages[1])
    assert (read >= 1024) is (usage_format != "plain")


@pytest.mark.django_db
def test_deepseek_cache_hits_reach_the_step_and_its_cost(owner, bob):
    with FakeModelServer(
        [{"text": f"Answer {n}."} for n in range(3)], caching=True, usage_format="deepseek"
    ) as server:
        agent = _agent(
            owner,
            bob,
            server,
            code="cache-deepseek",
            agent_md="You are the refunds desk's assistant.",
            sop=SYSTEM,
            prices=PRICES,
        )
        first = _run(bob, agent, "Where is the refund for order 1001?")
        for text in ("And order 1002?", "And order 1003?"):
            _run(bob, agent, text, session=first.session)

    steps = list(Step.objects.filter(run__session=first.session, kind="model_call").order_by("pk"))
    hits = [usage["prompt_cache_hit_tokens"] for usage in server.usages]
    assert hits[0] == 0 and hits[2] >= 1024
    assert [step.tokens_cached for step in steps] == hits
    usage = server.usages[2]
    assert steps[2].cost == _price(
        usage["prompt_cache_miss_tokens"], hits[2], 0, usage["completion_tokens"]
    )


@pytest.mark.parametrize(
    ("reported", "expected"),
    [
        # DashScope's explicit cache: the tokens written are billed apart (125% of input)
        (
            {
                "prompt_tokens": 3019,
                "completion_tokens": 104,
                "total_tokens": 3123,
                "prompt_tokens_details": {
                    "cached_tokens": 0,
                    "cache_creation": {"ephemeral_5m_input_tokens": 3015},
                    "cache_creation_input_tokens": 3015,
                    "cache_type": "ephemeral",
                },
            },
            Usage(3019, 104, cached_input_tokens=0, cache_write_tokens=3015),
        ),
        # Kimi K2's automatic cache: OpenAI's field
        (
            {
                "prompt_tokens": 2048,
                "completion_tokens": 10,
                "total_tokens": 2058,
                "prompt_tokens_details": {"cached_tokens": 1536},
            },
            Usage(2048, 10, cached_input_tokens=1536),
        ),
        # DeepSeek sending both its own fields and OpenAI's: counted once
        (
            {
                "prompt_tokens": 2000,
                "completion_tokens": 5,
                "total_tokens": 2005,
                "prompt_cache_hit_tokens": 1792,
                "prompt_cache_miss_tokens": 208,
                "prompt_tokens_details": {"cached_tokens": 1792},
            },
            Usage(2000, 5, cached_input_tokens=1792),
        ),
    ],
    ids=["dashscope-explicit", "kimi-k2", "deepseek-both"],
)
def test_usage_fields_of_other_documented_shapes(reported, expected):
    with FakeModelServer([{"text": "Done.", "usage": reported}]) as server:
        result = OpenAICompatibleProvider(model="m", base_url=server.base_url).chat(
            [{"role": "user", "content": "Hello"}]
        )
    assert result.usage == expected


@pytest.mark.django_db
def test_a_cache_write_price_is_stored_from_the_api_and_the_console(alice, client_for):
    config = providers.provider_config_create(
        actor=member_actor(alice), name="Claude", kind="anthropic"
    )
    prices = {"input": "3", "output": "15", "cached_input": "0.3", "cache_write": "3.75"}
    response = client_for(alice).put(
        f"/api/v1/model-providers/{config.pk}/prices/", prices, format="json"
    )
    assert response.status_code == 200, response.content
    config.refresh_from_db()
    assert config.prices == prices

    browser = Client()
    browser.force_login(alice.user)
    fields = {f"prices-{key}": value for key, value in prices.items()}
    edit = browser.get(reverse("console:provider_edit", args=[config.pk])).content.decode()
    assert 'name="prices-cache_write"' in edit
    response = browser.post(
        reverse("console:provider_prices", args=[config.pk]),
        {**fields, "prices-cache_write": "6"},
    )
    assert response.status_code == 302
    config.refresh_from_db()
    assert config.prices == {**prices, "cache_write": "6"}
