"""Prompt-cache warming after a topic-shift prefetch (cadre/agents/runtime/lifecycle/warm.py),
through real runs against the loopback model servers with prompt caching: when the next turn's
stable prefix changes (here the Hub applies a skill's patch release between two turns), a template
with `warm_prompt_cache` sends that prefix ahead — byte for byte what the next turn begins with —
and the next turn reads it from the provider's cache; the warm-up is charged and audited under its
own purpose, and is no step or reply of the run. Without the setting, or with the offline provider,
nothing is sent."""

from __future__ import annotations

import json
import re

import pytest

from cadre.agents import services as agent_services
from cadre.agents.models import Step
from cadre.agents.runtime.lifecycle import prefetch, warm
from cadre.governance.models import AuditEvent, UsageRecord
from cadre.tenancy.actors import member_actor
from hub.tests.agent_setup import completed_run, deploy, template_with_skills
from hub.tests.embedding_model import local_embedding_model
from hub.tests.factories import publish
from hub.tests.skill_samples import skill_files
from hub.tests.test_skills_prefetch import HOOKS, PDF, PDF_AGAIN, UNRELATED
from hub.tests.test_skills_semantic import SKILLS
from tests.agents.fake_models import OPENAI_CACHE_BLOCK, FakeModelServer, _canonical, _tokens

pytestmark = pytest.mark.django_db

SOP = "\n".join(
    f"{n}. For a document request of category {n}, check the file type, the requester's "
    f"department and the retention rule before answering; escalate category {n} to a manager."
    for n in range(1, 41)
)
PRICES = {"input": "1", "output": "2", "cached_input": "0.1", "cache_write": "1.25"}


@pytest.fixture(autouse=True)
def local_model(monkeypatch):
    # The model the skills hook's SEMANTIC_THRESHOLD was measured on (see test_skills_semantic).
    with local_embedding_model(monkeypatch, "all-MiniLM-L6-v2"):
        yield


def _publish_skills(alice, version="1.0.0"):
    for name, (description, body) in SKILLS.items():
        publish(
            alice,
            name=name,
            version=version,
            files=skill_files(name, description=description, body=f"# {name}\n\n{body}\n"),
        )


def _agent(alice, bob, server=None, *, kind="openai_compatible", warming=True):
    if server is None:
        settings = {"provider": "offline", "model": "offline-1"}
    else:
        config = agent_services.provider_config_create(
            actor=member_actor(alice),
            name=f"fake {kind} {warming}",
            kind=kind,
            base_url=server.base_url if kind == "openai_compatible" else server.root_url,
            api_key="sk-test",
            default_model="m",
            prices=PRICES,
        )
        settings = {"provider": kind, "provider_config": config.pk, "model": "m"}
    if warming:
        settings["warm_prompt_cache"] = True
    template = template_with_skills(
        alice,
        [{"package": f"@acme/{name}", "range": "^1"} for name in SKILLS],
        hooks=HOOKS,
        sop=SOP,
        model_settings=settings,
        memory_policy={"read_scopes": ["user"], "write_scopes": ["user"]},
    )
    _, by_member = deploy(alice, template, bob)
    return by_member[bob.pk]


def _two_turns_then_a_patch(alice, bob, agent):
    """Two turns (the second a topic shift), then the Hub applies pdf-tools 1.0.1 to the agent
    (auto policy) before the prefetch runs: the next turn's skills differ from this turn's."""
    first = completed_run(bob, agent, UNRELATED)
    shifted = completed_run(bob, agent, PDF, first.session)
    description, body = SKILLS["pdf-tools"]
    publish(
        alice,
        name="pdf-tools",
        version="1.0.1",
        files=skill_files("pdf-tools", description=description, body=f"# pdf-tools\n\n{body}\n"),
    )
    return shifted


def test_a_warm_up_sends_the_next_turns_prefix_and_that_turn_reads_it_from_the_cache(alice, bob):
    _publish_skills(alice)
    with FakeModelServer([{"text": f"Answer {n}."} for n in range(4)], caching=True) as server:
        agent = _agent(alice, bob, server)
        shifted = _two_turns_then_a_patch(alice, bob, agent)
        assert len(server.requests) == 2
        assert prefetch.prefetch_next_turn(shifted.pk) == "prefetched"
        assert len(server.requests) == 3, "one warm-up request"
        nxt = completed_run(bob, agent, PDF_AGAIN, shifted.session)

    warmup, real = server.requests[2]["body"], server.requests[3]["body"]
    assert warmup["max_tokens"] == 1 and not warmup.get("stream")
    assert "max_tokens" not in real
    assert warmup["prompt_cache_key"] == real["prompt_cache_key"]
    assert warmup.get("tools") == real.get("tools")
    prefix = warmup["messages"]
    assert json.dumps(real["messages"][: len(prefix)]) == json.dumps(prefix)
    assert len(real["messages"]) > len(prefix)  # then this turn's context and input
    assert "@acme/pdf-tools@1.0.1" in prefix[0]["content"]  # the patched skill, predicted
    assert "Use pypdf to merge files." in prefix[0]["content"]  # its body, relevant
    assert prefix[-1] == {"role": "assistant", "content": shifted.output["text"]}

    # The real turn reads the warmed prefix: every 128-token block of it.
    warm_usage, real_usage = server.usages[2], server.usages[3]
    cached = real_usage["prompt_tokens_details"]["cached_tokens"]
    blocks = (warm_usage["prompt_tokens"] - 1) // OPENAI_CACHE_BLOCK * OPENAI_CACHE_BLOCK
    assert blocks <= cached <= warm_usage["prompt_tokens"] and cached >= 1024
    step = nxt.steps.get(kind=Step.Kind.MODEL_CALL)
    assert step.tokens_cached == cached

    # Charged like any model call, under its own purpose, to the run that prefetched; audited;
    # no step of that run and no reply.
    record = UsageRecord.objects.get(purpose=warm.WARM_PURPOSE)
    assert record.run_id == shifted.pk and record.member_id == bob.pk
    assert record.template_id == agent.version.template_id
    assert record.status == UsageRecord.Status.SETTLED
    assert record.input_tokens == warm_usage["prompt_tokens"] and record.output_tokens >= 1
    assert record.cost > 0
    event = AuditEvent.objects.get(action="run.prompt_cache_warm")
    assert event.target_id == str(shifted.pk)
    assert shifted.steps.filter(kind=Step.Kind.MODEL_CALL).count() == 1
    shifted.refresh_from_db()
    assert shifted.output["text"] == "Answer 1."


def test_without_the_setting_no_warm_up_is_sent(alice, bob):
    _publish_skills(alice)
    with FakeModelServer([{"text": f"Answer {n}."} for n in range(3)], caching=True) as server:
        agent = _agent(alice, bob, server, warming=False)
        shifted = _two_turns_then_a_patch(alice, bob, agent)
        assert prefetch.prefetch_next_turn(shifted.pk) == "prefetched"
        assert len(server.requests) == 2
        prefix = warm.next_turn_prefix(shifted, warm.predict_next_turn(shifted))
        completed_run(bob, agent, PDF_AGAIN, shifted.session)
        assert len(server.requests) == 3
    assert not UsageRecord.objects.filter(purpose=warm.WARM_PURPOSE).exists()
    # Unwarmed, the turn reads only what precedes the patched skill (AGENT.md and the SOP).
    real = server.requests[2]["body"]
    prefix_tokens = _tokens(
        "".join(
            _canonical(part) for part in [real.get("tools") or [], *real["messages"][: len(prefix)]]
        )
    )
    cached = server.usages[2]["prompt_tokens_details"]["cached_tokens"]
    assert 0 < cached < prefix_tokens // OPENAI_CACHE_BLOCK * OPENAI_CACHE_BLOCK


def test_an_unchanged_prefix_is_not_sent_again(alice, bob):
    _publish_skills(alice)
    with FakeModelServer([{"text": f"Answer {n}."} for n in range(2)], caching=True) as server:
        agent = _agent(alice, bob, server)
        first = completed_run(bob, agent, UNRELATED)
        shifted = completed_run(bob, agent, PDF, first.session)
        # The topic shift's own request already carried the bodies the next turn predicts.
        assert warm.after_prefetch(shifted)["warm"] == "unchanged"
        assert len(server.requests) == 2


def test_anthropic_gets_the_breakpoints_the_next_turn_reads(alice, bob):
    _publish_skills(alice)
    with FakeModelServer([{"text": f"Answer {n}."} for n in range(4)], caching=True) as server:
        agent = _agent(alice, bob, server, kind="anthropic")
        shifted = _two_turns_then_a_patch(alice, bob, agent)
        assert prefetch.prefetch_next_turn(shifted.pk) == "prefetched"
        nxt = completed_run(bob, agent, PDF_AGAIN, shifted.session)

    assert len(server.requests) == 4
    warmup, real = server.requests[2]["body"], server.requests[3]["body"]
    assert warmup["max_tokens"] == 1
    assert warmup["system"] == real["system"]
    assert [block.get("cache_control") for block in warmup["system"]] == [{"type": "ephemeral"}]
    prefix = warmup["messages"]
    assert json.dumps(real["messages"][: len(prefix)]) == json.dumps(prefix)
    marked = [b for m in prefix for b in m["content"] if "cache_control" in b]
    assert [b["text"] for b in marked] == [shifted.output["text"]]
    warm_usage, real_usage = server.usages[2], server.usages[3]
    assert warm_usage["cache_creation_input_tokens"] >= 1024
    warmed = sum(warm_usage[key] for key in warm_usage if key.endswith("input_tokens"))
    assert real_usage["cache_read_input_tokens"] == warmed
    step = nxt.steps.get(kind=Step.Kind.MODEL_CALL)
    assert step.tokens_cached == warmed and step.tokens_cache_write == 0


def test_the_offline_provider_is_never_warmed(alice, bob):
    _publish_skills(alice)
    agent = _agent(alice, bob)
    first = completed_run(bob, agent, UNRELATED)
    shifted = completed_run(bob, agent, PDF, first.session)
    assert warm.after_prefetch(shifted) == {"predicted": ["skills"], "warm": "no_cache"}
    assert not UsageRecord.objects.filter(purpose=warm.WARM_PURPOSE).exists()


def test_the_setting_must_be_a_boolean():
    from cadre.errors import InvalidInput

    with pytest.raises(InvalidInput, match=re.escape("warm_prompt_cache")):
        agent_services.validate_content({"model_settings": {"warm_prompt_cache": "yes"}})
