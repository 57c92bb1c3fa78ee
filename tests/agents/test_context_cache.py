"""Cache-aware context assembly, walked through real runs against the loopback model servers
with prompt caching: the prefix stays byte-identical across turns, Anthropic gets its
breakpoints at the stable boundaries, and cached tokens reach the step and its cost."""

from __future__ import annotations

import itertools
import json
from decimal import Decimal

import pytest

from cadre.agents.models import Step
from cadre.agents.runtime.steps.context import ContextPieces, fit
from cadre.agents.selectors import usage_summary
from cadre.agents.services import validate_content
from cadre.errors import InvalidInput
from cadre.llm.anthropic import MAX_CACHE_BREAKPOINTS, to_anthropic
from tests.agents.fake_models import FakeModelServer
from tests.agents.test_memory_context import _agent, _memory, _run

pytestmark = pytest.mark.django_db

SOP = "\n".join(
    f"{n}. For a refund request of category {n}, check the order, the customer's tier and the "
    f"payment channel before answering; escalate category {n} disputes to a manager."
    for n in range(1, 41)
)
HOOKS = {"assemble_context": [{"name": "memory_retrieval"}, {"name": "standing_memories"}]}
INPUTS = [
    "Where is the refund for order 1001?",
    "And what about the invoice for the March budget review?",
    "Can you summarise what we discussed?",
]
PRICES = {"input": "1", "output": "2", "cached_input": "0.1", "cache_write": "1.25"}


def _session(owner, bob, server, **options):
    _memory(bob, "I prefer short answers in English.", kind="preference")
    _memory(bob, "The March budget review invoice was sent to finance on the 3rd.")
    agent = _agent(
        owner,
        bob,
        server,
        code=options.pop("code"),
        agent_md="You are the refunds desk's assistant.",
        sop=SOP,
        hooks=HOOKS,
        prices=PRICES,
        **options,
    )
    first = _run(bob, agent, INPUTS[0])
    for text in INPUTS[1:]:
        _run(bob, agent, text, session=first.session)
    return list(Step.objects.filter(run__session=first.session, kind="model_call").order_by("pk"))


def _cacheable(messages: list[dict]) -> list[dict]:
    """The part of a request meant to be the next request's prefix: all but the input and the
    per-request context after the last turn."""
    body = messages[:-1]
    while body and body[-1]["role"] == "system" and len(body) > 2:
        body = body[:-1]
    return body


def test_openai_prefix_is_byte_identical_across_turns_and_cached_tokens_are_recorded(owner, bob):
    with FakeModelServer([{"text": f"Answer {n}."} for n in range(3)], caching=True) as server:
        steps = _session(owner, bob, server, code="cache-openai")

    bodies = [request["body"] for request in server.requests]
    assert len(bodies) == 3
    for earlier, later in itertools.pairwise(bodies):
        prefix = _cacheable(earlier["messages"])
        assert json.dumps(later["messages"][: len(prefix)]) == json.dumps(prefix)
        # the turn just answered follows the earlier prefix, then this request's context
        assert later["messages"][len(prefix)]["content"] == earlier["messages"][-1]["content"]
    # standing memories sit in the stable prefix; the retrieved one after the turns
    assert "I prefer short answers" in bodies[0]["messages"][1]["content"]
    last = bodies[1]["messages"]
    assert "invoice was sent to finance" in last[-2]["content"] and last[-2]["role"] == "system"
    assert "invoice was sent" not in "".join(m["content"] for m in last[:2])
    keys = {body["prompt_cache_key"] for body in bodies}
    assert len(keys) == 1 and keys.pop().startswith("cadre-t")

    assert [step.tokens_in for step in steps] == [u["prompt_tokens"] for u in server.usages]
    reported = [u["prompt_tokens_details"]["cached_tokens"] for u in server.usages]
    assert [step.tokens_cached for step in steps] == reported
    assert reported[0] == 0 and reported[2] >= 1024
    usage = server.usages[2]
    fresh = usage["prompt_tokens"] - reported[2]
    expected = (Decimal(fresh) + Decimal("0.1") * reported[2] + 2 * usage["completion_tokens"]) / (
        Decimal(1_000_000)
    )
    assert steps[2].cost == expected.quantize(Decimal("0.000001"))
    # the usage dashboard's cache hit rate per template
    (row,) = usage_summary(owner, by="template")
    assert row["tokens_cached"] == sum(reported) and row["tokens_in"] == sum(
        u["prompt_tokens"] for u in server.usages
    )
    assert row["cache_hit_rate"] == round(sum(reported) / row["tokens_in"], 4) > 0


def test_anthropic_gets_breakpoints_at_the_stable_boundaries(owner, bob):
    with FakeModelServer([{"text": f"Answer {n}."} for n in range(3)], caching=True) as server:
        steps = _session(owner, bob, server, code="cache-anthropic", kind="anthropic")

    body = server.requests[2]["body"]
    system = body["system"]
    assert [block.get("cache_control") for block in system] == [{"type": "ephemeral"}] * 2
    assert "Standard operating procedure" in system[0]["text"]
    assert "I prefer short answers" in system[1]["text"]
    marked = [
        (message["role"], block["text"])
        for message in body["messages"]
        for block in message["content"]
        if "cache_control" in block
    ]
    assert marked == [("assistant", "Answer 1.")]  # the last turn before this request
    # per-request context is a user block before the input, not part of the system prompt
    final = body["messages"][-1]
    assert final["role"] == "user" and final["content"][-1]["text"] == INPUTS[2]
    assert "invoice" not in json.dumps(system)

    for step, usage in zip(steps, server.usages, strict=True):
        assert step.tokens_cached == usage["cache_read_input_tokens"]
        assert step.tokens_cache_write == usage["cache_creation_input_tokens"]
        assert step.tokens_in == (
            usage["input_tokens"]
            + usage["cache_read_input_tokens"]
            + usage["cache_creation_input_tokens"]
        )
    assert steps[0].tokens_cached == 0 and steps[0].tokens_cache_write >= 1024
    assert steps[2].tokens_cached >= steps[0].tokens_cache_write
    usage = server.usages[2]
    expected = (
        usage["input_tokens"]
        + Decimal("0.1") * usage["cache_read_input_tokens"]
        + Decimal("1.25") * usage["cache_creation_input_tokens"]
        + 2 * usage["output_tokens"]
    ) / Decimal(1_000_000)
    assert steps[2].cost == expected.quantize(Decimal("0.000001"))


def _pieces(text: str, memory: str) -> ContextPieces:
    return ContextPieces(
        agent_md="You help.",
        sop=SOP,
        skills=[
            {"name": "b-skill", "description": "B", "body": "Do B."},
            {"name": "a-skill", "description": "A", "body": "Do A."},
        ],
        standing=[{"id": 9, "content": "Likes tea."}, {"id": 3, "content": "Works late."}],
        memories=[{"id": 5, "content": memory}, {"id": 9, "content": "Likes tea."}],
        turns=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
        input_text=text,
    )


def test_only_the_tail_changes_with_the_input_and_the_legacy_order_stays_available():
    one, report = fit(_pieces("first?", "Memory one."), 8000)
    two, _ = fit(_pieces("second?", "Memory two."), 8000)
    assert one[:-2] == two[:-2] and one[-2:] != two[-2:]
    assert [m.get("cache_break", False) for m in one] == [True, True, False, True, False, False]
    assert one[0]["content"].index("Skill: a-skill") < one[0]["content"].index("Skill: b-skill")
    assert one[1]["content"].index("#3]") < one[1]["content"].index("#9]")
    assert "Likes tea" not in one[-2]["content"]  # a standing memory is not sent twice
    assert report["sent"]["standing"] == [3, 9] and report["sent"]["memories"] == [5]

    legacy, _ = fit(_pieces("first?", "Memory one."), 8000, order="legacy")
    assert [m["role"] for m in legacy] == ["system", "user", "assistant", "user"]
    assert legacy[0]["content"].index("Memory one.") < legacy[0]["content"].index("Skill:")
    with pytest.raises(InvalidInput):
        validate_content({"model_settings": {"context_order": "newest-first"}})


def test_anthropic_keeps_at_most_its_breakpoint_limit():
    messages = [{"role": "system", "content": "stable", "cache_break": True}]
    for n in range(6):
        messages += [
            {"role": "user", "content": f"q{n}"},
            {"role": "assistant", "content": f"a{n}", "cache_break": True},
        ]
    system, converted = to_anthropic([*messages, {"role": "user", "content": "now"}])
    marked = [b["text"] for m in converted for b in m["content"] if "cache_control" in b]
    assert len(marked) == MAX_CACHE_BREAKPOINTS == 4
    assert marked == ["a2", "a3", "a4", "a5"] and "cache_control" not in system[0]
    plain, _ = to_anthropic([{"role": "system", "content": "s"}, {"role": "user", "content": "u"}])
    assert plain == "s"  # without breaks the system prompt stays one string
