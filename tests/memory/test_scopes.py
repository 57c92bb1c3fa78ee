"""Who reads what: personal memory stays personal, department memory stays in the department
(sub-departments inherit their parents'), request parameters only narrow, organizations never
mix, and API keys need the memory scopes."""

from __future__ import annotations

import pytest

from cadre.errors import NotFound, NotPermitted
from cadre.memory import selectors, services
from cadre.memory.models import Memory
from cadre.tenancy.actors import Actor
from tests.memory.conftest import actor
from tests.refusals import nothing_changes


def add(member, content, **fields):
    fields.setdefault("scope", "user")
    fields.setdefault("kind", "fact")
    fields.setdefault("source_kind", "user_statement")
    return services.memory_add(actor=actor(member), content=content, **fields)


def accept(chart, memory):
    """An employee's shared memory waits for review (see test_shared_review.py); the owner
    accepts it here, so these tests look at who reads what once it is the scope's memory."""
    return services.memory_verify(
        actor=actor(chart["alice"]),
        memory=memory,
        decision="accept",
        expected_version=memory.version,
    )


def found(member_or_actor, query, **options):
    caller = member_or_actor if isinstance(member_or_actor, Actor) else actor(member_or_actor)
    return [
        hit.memory.pk for hit in selectors.memory_search(actor=caller, query=query, **options).hits
    ]


def test_readable_scopes_are_computed_from_identity(chart):
    bob, erin = chart["bob"], chart["erin"]
    assert selectors.readable_scope_keys(actor(bob)) == [
        f"user:{bob.pk}",
        f"department:{chart['sales'].pk}",
        f"position:{chart['position'].pk}",
        "organization",
    ]
    # Erin is in Sales/East: she inherits Sales' memory, nearest department first.
    assert selectors.readable_scope_keys(actor(erin)) == [
        f"user:{erin.pk}",
        f"department:{chart['east'].pk}",
        f"department:{chart['sales'].pk}",
        "organization",
    ]


def test_one_requests_reach_is_computed_once_per_actor(chart):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    bob, erin = actor(chart["bob"]), actor(chart["erin"])
    expected = selectors.readable_scope_keys(bob)
    with selectors.scope_keys_memo():
        with CaptureQueriesContext(connection) as first:
            assert selectors.readable_scope_keys(bob) == expected
        with CaptureQueriesContext(connection) as again:
            keys = selectors.readable_scope_keys(bob)
            assert keys == expected
        assert len(first) > 0 and len(again) == 0
        keys.append("organization:other")  # a caller's copy: the memo is not changed
        assert selectors.readable_scope_keys(bob) == expected
        assert selectors.readable_scope_keys(erin) != expected  # another actor, its own
    # Outside the block every call computes again (grants may have changed).
    with CaptureQueriesContext(connection) as after:
        selectors.readable_scope_keys(bob)
    assert len(after) > 0


def test_scope_lists_hold_each_scope_once_and_are_read_as_distinct_keys(chart, alice):
    from datetime import timedelta

    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from cadre.tenancy.actors import system_actor

    bob = chart["bob"]
    first, second = add(bob, "Bob likes window seats"), add(bob, "Bob drinks oolong")
    Memory.objects.filter(pk=first.pk).update(created_at=timezone.now() - timedelta(days=3))
    assert first.scope_key == second.scope_key
    keys = selectors.readable_scope_keys(system_actor(bob.organization))
    assert sorted(keys) == sorted(set(keys)) and first.scope_key in keys
    with CaptureQueriesContext(connection) as queries:
        choices = selectors.scope_choices(actor(alice))
    assert [key for key, _ in choices].count(first.scope_key) == 1
    distinct = [q["sql"] for q in queries if "SELECT DISTINCT" in q["sql"]]
    # One row per scope key from the database, not one per memory (the model's ordering).
    assert distinct and all('"created_at"' not in sql for sql in distinct)


def test_an_employee_cannot_read_a_colleagues_personal_memory(chart):
    bob, dave = chart["bob"], chart["dave"]
    secret = add(bob, "My bonus target is 1.2 million yuan")

    assert found(dave, "bonus target") == []
    with pytest.raises(NotFound):
        selectors.memory_get(actor(dave), secret.pk)
    assert not selectors.memory_list(actor(dave)).filter(pk=secret.pk).exists()
    with pytest.raises(NotFound):
        selectors.memory_history(actor(dave), secret.pk)
    # memory.view (an auditor) does not reach personal memory; memory.personal (the owner)
    # reads it to answer a request, but never gets it in searches (which feed agents).
    with pytest.raises(NotFound):
        selectors.memory_get(actor(chart["auditor"]), secret.pk)
    assert found(chart["alice"], "bonus target") == []
    assert selectors.memory_get(actor(chart["alice"]), secret.pk) == secret
    assert found(bob, "bonus target") == [secret.pk]


def test_department_memory_is_visible_to_that_department_only(chart):
    bob, erin, dave = chart["bob"], chart["erin"], chart["dave"]
    sales_rule = add(
        bob,
        "Discounts above 15 percent need the sales director",
        scope="department",
        scope_id=chart["sales"].pk,
        kind="requirement",
    )
    east_rule = add(
        erin,
        "East region discounts are approved by Wang Fang",
        scope="department",
        scope_id=chart["east"].pk,
        kind="requirement",
    )
    sales_rule, east_rule = accept(chart, sales_rule), accept(chart, east_rule)

    assert found(bob, "discounts approved") == [sales_rule.pk]  # not the sub-department's
    assert set(found(erin, "discounts approved")) == {sales_rule.pk, east_rule.pk}
    assert found(dave, "discounts approved") == []
    with pytest.raises(NotFound):
        selectors.memory_get(actor(dave), sales_rule.pk)


def test_auditor_with_memory_view_reads_shared_but_not_personal_memory(chart):
    shared = add(
        chart["bob"],
        "Sales kickoff is every Monday at nine",
        scope="department",
        scope_id=chart["sales"].pk,
    )
    personal = add(chart["bob"], "Sales kickoff makes me nervous, remind me the day before")
    shared = accept(chart, shared)
    assert found(chart["auditor"], "sales kickoff monday") == [shared.pk]
    with pytest.raises(NotFound):
        selectors.memory_get(actor(chart["auditor"]), personal.pk)


def test_request_parameters_can_only_narrow_the_scopes(chart):
    bob, dave = chart["bob"], chart["dave"]
    secret = add(bob, "The Zhongshan deal closes on Friday")
    support = add(
        dave,
        "Support hotline moves to the Zhongshan office",
        scope="department",
        scope_id=chart["support"].pk,
    )
    support = accept(chart, support)

    # Dave asks for Bob's personal scope and Support's: only his own readable scope survives.
    result = selectors.memory_search(
        actor=actor(dave),
        query="Zhongshan",
        scope_keys=[f"user:{bob.pk}", f"department:{chart['support'].pk}"],
    )
    assert [hit.memory.pk for hit in result.hits] == [support.pk]
    assert result.scope_keys == [f"department:{chart['support'].pk}"]
    # Asking only for a scope he cannot read gives nothing, not everything.
    assert found(dave, "Zhongshan", scope_keys=[f"user:{bob.pk}"]) == []
    assert found(bob, "Zhongshan", scope_keys=[f"user:{bob.pk}"]) == [secret.pk]


def test_other_organizations_memory_is_invisible(chart, charlie):
    org_memory = add(chart["alice"], "Acme fiscal year starts in April", scope="organization")
    assert found(charlie, "fiscal year April") == []
    with pytest.raises(NotFound):
        selectors.memory_get(actor(charlie), org_memory.pk)
    assert found(chart["dave"], "fiscal year April") == [org_memory.pk]


def test_shared_memory_needs_memory_manage_to_change_unless_you_wrote_it(chart):
    bob, erin = chart["bob"], chart["erin"]
    rule = add(
        bob, "Weekly pipeline review on Thursdays", scope="department", scope_id=chart["sales"].pk
    )
    rule = accept(chart, rule)  # version 2
    # Erin reads it (inherited) but did not write it and has no memory.manage.
    with pytest.raises(NotPermitted):
        services.memory_update(
            actor=actor(erin),
            memory=rule,
            expected_version=2,
            content="Weekly pipeline review on Fridays",
        )
    updated = services.memory_update(
        actor=actor(bob),
        memory=rule,
        expected_version=2,
        content="Weekly pipeline review on Fridays",
    )
    assert updated.version == 3
    assert updated.verification == "unverified"  # the author's new text waits for review
    services.memory_delete(actor=actor(chart["alice"]), memory=updated)  # an owner manages


@pytest.mark.django_db
def test_api_key_sees_only_its_organization_and_needs_memory_scopes(chart, charlie, key_client):
    add(chart["alice"], "Acme ships from the Ningbo warehouse", scope="organization")
    add(charlie, "Globex ships from the Ningbo port office", scope="organization")

    acme_key = key_client(chart["alice"], ["memory:read"])
    response = acme_key.post("/api/v1/memories/search/", {"query": "Ningbo"}, format="json")
    assert response.status_code == 200
    assert [hit["memory"]["content"] for hit in response.json()["hits"]] == [
        "Acme ships from the Ningbo warehouse"
    ]

    globex_key = key_client(charlie, ["memory:read"])
    contents = [
        hit["memory"]["content"]
        for hit in globex_key.post(
            "/api/v1/memories/search/", {"query": "Ningbo"}, format="json"
        ).json()["hits"]
    ]
    assert contents == ["Globex ships from the Ningbo port office"]

    no_memory_scope = key_client(chart["alice"], ["org:read"])
    response = no_memory_scope.post("/api/v1/memories/search/", {"query": "Ningbo"}, format="json")
    assert response.status_code == 403

    read_only = key_client(chart["alice"], ["memory:read"])
    with nothing_changes(Memory):
        response = read_only.post(
            "/api/v1/memories/", {"content": "x", "scope": "organization"}, format="json"
        )
    assert response.status_code == 403


def test_an_agent_reads_its_own_memory_and_its_members_but_no_other_agents(chart, org_a):
    from types import SimpleNamespace

    bob = chart["bob"]

    def agent(pk):
        return Actor(
            kind="agent",
            organization=org_a,
            agent=SimpleNamespace(pk=pk),
            member=bob,
            label=f"agent {pk}",
        )

    own = services.memory_add(
        actor=agent(5),
        scope="agent",
        kind="fact",
        content="The ERP export times out after 500 rows",
        source_kind="tool_result",
    )
    services.memory_add(
        actor=agent(6),
        scope="agent",
        kind="fact",
        content="The ERP export needs the finance role",
        source_kind="tool_result",
    )
    bobs = add(bob, "Bob wants ERP exports as CSV", kind="preference")

    assert own.scope_key == "agent:5" and own.author_type == "agent"
    assert "agent:5" in selectors.readable_scope_keys(agent(5))
    assert set(found(bob, "ERP export")) == {bobs.pk}  # agent memory is the agent's
    assert set(found(agent(5), "ERP export")) == {own.pk, bobs.pk}
    with pytest.raises(NotPermitted):
        services.memory_add(
            actor=agent(5),
            scope="agent",
            scope_id=6,
            kind="fact",
            content="x",
            source_kind="tool_result",
        )
