"""Budgets and usage accounting: exact enforcement under concurrent calls (real PostgreSQL,
threads), the 80 % / 100 % alerts once per period, sums equal to the per-call records, and the
memory layer's own model calls metered and refused like an agent's."""

from __future__ import annotations

import threading
from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import connections
from django.db.models import Sum
from django.utils import timezone

from cadre.governance import budgets
from cadre.governance.models import Alert, AuditEvent, Budget, UsageRecord
from cadre.llm import BudgetExceeded, ModelProvider, ProviderError, Usage
from cadre.llm.metering import Account, charged_to
from cadre.llm.openai_compatible import OpenAICompatibleProvider
from cadre.tenancy.actors import member_actor
from tests.agents.fake_models import FakeModelServer
from tests.factories import DepartmentFactory, MemberFactory, OrganizationFactory


def _threads(count: int, target) -> list:
    """Run `target(index)` in `count` threads released together; returns what each returned
    (or raised), each thread with its own database connection."""
    barrier = threading.Barrier(count)
    results: list = [None] * count

    def run(index: int) -> None:
        try:
            barrier.wait(timeout=60)
            results[index] = target(index)
        except BaseException as error:  # collected: the test asserts on it
            results[index] = error
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    return results


def _budget(owner, **fields):
    values = {
        "scope": Budget.Scope.ORGANIZATION,
        "period": Budget.Period.MONTHLY,
        "metric": Budget.Metric.TOKENS,
        "limit": 500,
    }
    return budgets.budget_create(actor=member_actor(owner), **{**values, **fields})


@pytest.mark.django_db(transaction=True)
def test_concurrent_calls_take_exactly_the_headroom_and_no_more():
    organization = OrganizationFactory(slug="busy")
    owner = MemberFactory(organization=organization, roles=["owner"])
    budget = _budget(owner, limit=500)
    account = Account(organization_id=organization.pk, member_id=owner.pk, purpose="run")

    def call(index: int):
        record = budgets.usage_reserve(account=account, tokens=100, cost=Decimal(0), model="m")
        budgets.usage_settle(record=record, usage=Usage(60, 40))
        return record.pk

    results = _threads(12, call)
    admitted = [r for r in results if isinstance(r, int)]
    refused = [r for r in results if isinstance(r, BudgetExceeded)]
    assert len(admitted) == 5 and len(refused) == 7, results
    budget.refresh_from_db()
    # Exactly at the limit, nothing left reserved, and the counter is the records' sum.
    assert (budget.used_tokens, budget.reserved_tokens) == (500, 0)
    totals = UsageRecord.objects.filter(status="settled").aggregate(
        i=Sum("input_tokens"), o=Sum("output_tokens")
    )
    assert totals["i"] + totals["o"] == 500
    # A refused call wrote nothing.
    assert UsageRecord.objects.count() == 5
    assert "budget of the organization would be exceeded" in refused[0].message
    assert refused[0].details["metric"] == "tokens" and refused[0].code == "budget_exceeded"


@pytest.mark.django_db(transaction=True)
def test_concurrent_model_calls_over_http_never_pass_a_hard_budget():
    """Through the real client and a loopback model server: the refused calls never reach
    the server, and the budget is never passed (each call's estimate covers its usage)."""
    organization = OrganizationFactory(slug="http")
    owner = MemberFactory(organization=organization, roles=["owner"])
    budget = _budget(owner, limit=100)
    account = budgets.account_for_member(owner)
    # 8 words (11 tokens) + 4 of overhead = 15 reserved for the input, 7 for the output cap.
    messages = [{"role": "user", "content": "one two three four five six seven eight"}]
    with FakeModelServer([{"text": "ok"} for _ in range(10)]) as server:
        provider = OpenAICompatibleProvider(
            model="m", base_url=server.base_url, parameters={"max_tokens": 7}
        )

        def call(index: int):
            with charged_to(account):
                return provider.chat(messages).usage.total_tokens

        results = _threads(10, call)
    admitted = [r for r in results if isinstance(r, int)]
    refused = [r for r in results if isinstance(r, BudgetExceeded)]
    assert admitted and refused and len(admitted) + len(refused) == 10, results
    # Every call the server saw was admitted and settled; none of the refused ones reached it.
    assert len(server.requests) == len(admitted) == UsageRecord.objects.count()
    budget.refresh_from_db()
    assert budget.used_tokens == 18 * len(admitted) <= budget.limit
    assert budget.reserved_tokens == 0


@pytest.mark.django_db
def test_soft_budget_alerts_at_80_and_100_percent_once_per_period(alice):
    budget = _budget(alice, limit=1000, enforcement=Budget.Enforcement.SOFT)
    account = budgets.account_for_member(alice)

    def spend(tokens: int, now=None):
        record = budgets.usage_reserve(account=account, tokens=tokens, cost=Decimal(0), now=now)
        budgets.usage_settle(record=record, usage=Usage(tokens, 0))

    spend(500)
    assert not Alert.objects.exists()
    spend(350)  # 85 %
    spend(100)  # 95 %: no second 80 % alert
    assert list(Alert.objects.values_list("details__level", flat=True)) == [80]
    spend(100)  # 105 %: a soft budget never refuses
    spend(100)
    levels = sorted(Alert.objects.values_list("details__level", flat=True))
    assert levels == [80, 100]
    assert AuditEvent.objects.filter(action="alert.open").count() == 2
    critical = Alert.objects.get(details__level=100)
    assert critical.severity == "critical" and "budget of the organization" in critical.title
    budget.refresh_from_db()
    assert budget.used_tokens == 1150 and budget.alerted_percent == 100
    # Next month: the counters start again from what that month's records say, and alert again.
    later = timezone.now() + timedelta(days=32)
    spend(900, now=later)
    budget.refresh_from_db()
    assert budget.used_tokens == 900 and budget.period_start > budget.created_at
    assert Alert.objects.filter(details__level=80).count() == 2


@pytest.mark.django_db
def test_department_budget_covers_the_departments_below_and_counts_earlier_usage(org_a, alice):
    sales = DepartmentFactory(organization=org_a, name="Sales")
    east = DepartmentFactory(organization=org_a, name="East", parent=sales)
    seller = MemberFactory(organization=org_a, department=east, display_name="Eve")
    account = budgets.account_for_member(seller)
    earlier = budgets.usage_reserve(account=account, tokens=50, cost=Decimal(0))
    budgets.usage_settle(record=earlier, usage=Usage(30, 10))
    budget = _budget(
        alice, scope=Budget.Scope.DEPARTMENT, department=sales, limit=100, metric="tokens"
    )
    assert budget.used_tokens == 40  # what was used this month before the budget was set
    budgets.usage_reserve(account=account, tokens=60, cost=Decimal(0))
    with pytest.raises(BudgetExceeded, match="department Sales"):
        budgets.usage_reserve(account=account, tokens=1, cost=Decimal(0))
    # Someone outside Sales is not held by it.
    budgets.usage_reserve(account=budgets.account_for_member(alice), tokens=90, cost=Decimal(0))


@pytest.mark.django_db
def test_cost_budget_prices_calls_per_model_with_cached_input(alice):
    _budget(alice, metric=Budget.Metric.COST, limit="0.01")
    prices = {"input": "2", "output": "8", "models": {"big": {"input": "10", "cached_input": "1"}}}
    usage = Usage(input_tokens=1000, output_tokens=100, cached_input_tokens=400)
    # big: 600 x 10 + 400 x 1 + 100 x 8 (the provider's output price) per million.
    assert usage.cost(prices, "big") == Decimal("0.007200")
    assert usage.cost(prices, "small") == Decimal("0.002800")

    class Provider:
        label, model = "p", "big"

    Provider.prices = prices
    handle = budgets.METER.reserve(
        budgets.account_for_member(alice),
        provider=Provider,
        messages=[{"role": "user", "content": "hello"}],
        params={"max_tokens": 100},
    )

    class Result:
        model = "big-2025-01-01"

    Result.usage = usage
    budgets.METER.settle(handle, Result)
    record = UsageRecord.objects.get()
    assert record.cost == Decimal("0.007200") and record.cached_input_tokens == 400
    assert record.model == "big-2025-01-01"
    # The reservation was priced too: the budget refuses once the estimate would not fit.
    assert record.reserved_cost > 0
    with pytest.raises(BudgetExceeded, match="cost budget"):
        budgets.usage_reserve(
            account=budgets.account_for_member(alice), tokens=0, cost=Decimal("0.003")
        )


class Unreachable(ModelProvider):
    kind = "unreachable"

    def stream(self, messages, tools, **params):
        raise ProviderError("could not reach host")


@pytest.mark.django_db
def test_a_failed_call_releases_its_reservation(alice):
    budget = _budget(alice, limit=100)
    provider = Unreachable(model="m")
    with charged_to(budgets.account_for_member(alice)), pytest.raises(ProviderError):
        provider.chat([{"role": "user", "content": "hi"}], max_tokens=10)
    budget.refresh_from_db()
    assert budget.reserved_tokens == 0 and budget.used_tokens == 0
    assert UsageRecord.objects.get().status == UsageRecord.Status.RELEASED


@pytest.mark.django_db
def test_stale_reservations_are_released(alice):
    budget = _budget(alice, limit=100)
    old = timezone.now() - timedelta(hours=2)
    budgets.usage_reserve(
        account=budgets.account_for_member(alice), tokens=90, cost=Decimal(0), now=old
    )
    budget.refresh_from_db()
    assert budget.reserved_tokens == 90
    assert budgets.usage_release_stale() == 1
    budget.refresh_from_db()
    assert budget.reserved_tokens == 0


@pytest.mark.django_db
def test_memory_extraction_is_metered_and_refused_like_a_run(alice, monkeypatch):
    from cadre.memory.extraction import extractor
    from cadre.memory.services import memory_add_from_messages

    reply = '{"memories": [{"kind": "preference", "content": "Alice likes tea", "confidence": 1}]}'
    with FakeModelServer([{"text": reply}, {"text": reply}]) as server:
        monkeypatch.setenv("CADRE_MEMORY_PROVIDER_KIND", "openai_compatible")
        monkeypatch.setenv("CADRE_MEMORY_PROVIDER_BASE_URL", server.base_url)
        monkeypatch.setenv("CADRE_MEMORY_PROVIDER_MODEL", "mem")
        actor = member_actor(alice)
        messages = [{"role": "user", "content": "I like tea"}]
        memory_add_from_messages(actor=actor, messages=messages, extractor=extractor())
        record = UsageRecord.objects.get()
        assert (record.purpose, record.member_id, record.model) == (
            "memory.extraction",
            alice.pk,
            "mem",
        )
        assert record.input_tokens == 11 and record.status == "settled"
        # Spent: the next extraction is refused before the call and falls back to rules.
        _budget(alice, scope=Budget.Scope.MEMBER, member=alice, limit=20)
        memory_add_from_messages(actor=actor, messages=messages, extractor=extractor())
    assert len(server.requests) == 1
    assert UsageRecord.objects.count() == 1


@pytest.mark.django_db
def test_memory_dedup_judge_is_charged_to_the_organization_and_limited(alice, monkeypatch):
    from cadre.memory import dedup
    from cadre.memory.models import SourceKind
    from cadre.memory.services import memory_add

    actor = member_actor(alice)
    older, newer = (
        memory_add(
            actor=actor,
            scope="user",
            kind="fact",
            content=content,
            source_kind=SourceKind.USER_STATEMENT,
        )
        for content in ("Alice's manager is Li Wei", "Alice reports to Li Wei")
    )
    answer = '{"decision": "new", "target_id": null, "reason": "different"}'
    with FakeModelServer([{"text": answer}, {"text": answer}]) as server:
        monkeypatch.setenv("CADRE_MEMORY_PROVIDER_KIND", "openai_compatible")
        monkeypatch.setenv("CADRE_MEMORY_PROVIDER_BASE_URL", server.base_url)
        monkeypatch.setenv("CADRE_MEMORY_PROVIDER_MODEL", "judge")
        candidates = [dedup.Candidate(older, 0.93)]
        assert dedup.judge().judge(newer, candidates).judge == "model:judge"
        record = UsageRecord.objects.get()
        assert (record.purpose, record.organization_id, record.member_id) == (
            "memory.dedup",
            alice.organization_id,
            None,
        )
        _budget(alice, limit=record.total_tokens + 1)  # the organization's: spent
        decision = dedup.judge().judge(newer, candidates)
    assert decision.judge == "rules (model failed)" and "budget" in decision.reason
    assert len(server.requests) == 1 and UsageRecord.objects.count() == 1
