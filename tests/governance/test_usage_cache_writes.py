"""Prompt tokens written to the provider's cache are metered: a run's Anthropic calls, against the
loopback server answering in Anthropic's documented usage format (`cache_creation_input_tokens`,
`cache_read_input_tokens`), leave usage records with the cache writes, and the usage API, its
CSV export and the console's Usage page show them next to the cached tokens."""

from __future__ import annotations

import csv
import io
from decimal import Decimal

import pytest
from django.test import Client
from django.urls import reverse

from cadre.agents.models import Step
from cadre.governance.models import UsageRecord
from cadre.tenancy.actors import member_actor
from tests.agents.fake_models import FakeModelServer
from tests.agents.test_memory_context import _agent, _run

pytestmark = pytest.mark.django_db

# Long enough for the server's 1,024-token cache minimum: the first call writes it.
SOP = "\n".join(
    f"{n}. For a refund request of category {n}, check the order, the customer's tier and the "
    f"payment channel before answering; escalate category {n} disputes to a manager."
    for n in range(1, 41)
)
PRICES = {"input": "1", "output": "2", "cached_input": "0.1", "cache_write": "1.25"}


@pytest.fixture
def records(alice, bob) -> tuple[list[UsageRecord], list[dict]]:
    """The run model calls' usage records, oldest first, and the usages the server reported."""
    with FakeModelServer([{"text": f"Answer {n}."} for n in range(2)], caching=True) as server:
        agent = _agent(
            member_actor(alice),
            bob,
            server,
            code="cache-writes",
            kind="anthropic",
            agent_md="You are the refunds desk's assistant.",
            sop=SOP,
            prices=PRICES,
        )
        first = _run(bob, agent, "Where is the refund for order 1001?")
        _run(bob, agent, "And order 1002?", session=first.session)
    steps = Step.objects.filter(run__session=first.session, kind="model_call").order_by("pk")
    found = [
        UsageRecord.objects.get(run_id=step.run_id, status=UsageRecord.Status.SETTLED)
        for step in steps
    ]
    return found, server.usages


def test_cache_writes_are_recorded_as_anthropic_reports_them(records):
    found, reported = records
    assert [r.cache_write_tokens for r in found] == [
        u["cache_creation_input_tokens"] for u in reported
    ]
    assert [r.cached_input_tokens for r in found] == [
        u["cache_read_input_tokens"] for u in reported
    ]
    assert found[0].cache_write_tokens >= 1024  # the first call wrote the prompt's prefix
    assert found[1].cached_input_tokens >= 1024  # the second read it back
    for record, usage in zip(found, reported, strict=True):
        assert record.input_tokens == (
            usage["input_tokens"]
            + usage["cache_read_input_tokens"]
            + usage["cache_creation_input_tokens"]
        )
        # The record is priced as the step is: writes at the cache-write price.
        expected = (
            usage["input_tokens"]
            + Decimal("0.1") * usage["cache_read_input_tokens"]
            + Decimal("1.25") * usage["cache_creation_input_tokens"]
            + 2 * usage["output_tokens"]
        ) / Decimal(1_000_000)
        assert record.cost == expected.quantize(Decimal("0.000001"))


def test_the_usage_api_and_exports_show_cache_writes(records, alice, client_for):
    found, _ = records
    written = sum(r.cache_write_tokens for r in found)
    api = client_for(alice)

    listed = {row["id"]: row for row in api.get("/api/v1/usage/").json()["results"]}
    for record in found:
        assert listed[record.pk]["cache_write_tokens"] == record.cache_write_tokens

    (row,) = api.get("/api/v1/usage/summary/", {"by": "template"}).json()
    assert row["cache_write_tokens"] == written
    assert row["cached_input_tokens"] == sum(r.cached_input_tokens for r in found)

    for response in (
        api.get("/api/v1/usage/export/"),
        _console(alice).get(reverse("console:usage_export")),
    ):
        assert response.status_code == 200
        rows = {
            int(line["id"]): line for line in csv.DictReader(io.StringIO(response.content.decode()))
        }
        for record in found:
            assert int(rows[record.pk]["cache_write_tokens"]) == record.cache_write_tokens

    page = _console(alice).get(reverse("console:usage"), {"by": "template"}).content.decode()
    assert f"{written} written to cache" in page


def _console(member) -> Client:
    browser = Client()
    browser.force_login(member.user)
    return browser
