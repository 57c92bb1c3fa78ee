# ruff: noqa: F811 - the fixtures imported from tests.agents.conftest are parameters here
"""Memory an agent learns about a person is theirs to see: the subject, the agent's owner and
admins with the right permission find it (console and API), correct and delete it, whatever
scope it landed in; a colleague without rights and an outsider get 404; the scope filter
names every readable scope, agent scopes included."""

from __future__ import annotations

import pytest

from cadre.agents.runtime.records.grants import agent_actor
from cadre.errors import NotFound, NotPermitted
from cadre.memory import selectors, services
from cadre.memory.models import Memory
from tests.agents.conftest import (  # noqa: F401 - fixtures
    bob_agent,
    deployment,
    owner,
    published,
    sales,
    template,
)
from tests.memory.conftest import actor


@pytest.fixture
def cast(make_member, charlie, alice, bob):
    """alice: owner (memory.personal/manage/view); bob: employee with an agent; dave: a
    colleague; bianca: business admin (memory.view only); charlie: another organization."""
    return {
        "alice": alice,
        "bob": bob,
        "dave": make_member(display_name="Dave", email="dave@acme.test"),
        "bianca": make_member(
            roles=("business_admin",), display_name="Bianca", email="bianca@acme.test"
        ),
        "charlie": charlie,
    }


def agent_memory(agent, content="Quarterly pipeline reviews use the East template", **fields):
    fields.setdefault("kind", "fact")
    return services.memory_add(
        actor=agent_actor(agent),
        scope="agent",
        content=content,
        source_kind="user_statement",
        **fields,
    )


def test_agent_memory_is_its_owners_to_read_correct_and_delete(cast, bob_agent):
    bob, dave = cast["bob"], cast["dave"]
    memory = agent_memory(bob_agent)
    assert memory.scope_key == f"agent:{bob_agent.pk}" and memory.subject_id == bob.pk

    assert memory.scope_key in selectors.readable_scope_keys(actor(bob))
    assert selectors.memory_list(actor(bob)).filter(pk=memory.pk).exists()
    assert selectors.memory_get(actor(bob), memory.pk) == memory
    assert selectors.can_modify(actor(bob), memory)
    corrected = services.memory_update(
        actor=actor(bob),
        memory=memory,
        expected_version=memory.version,
        reason="wrong template",
        content="Quarterly pipeline reviews use the West template",
    )
    assert corrected.version == 2

    for other in (dave, cast["charlie"]):
        with pytest.raises(NotFound):
            selectors.memory_get(actor(other), memory.pk)
        assert not selectors.memory_list(actor(other)).filter(pk=memory.pk).exists()
    with pytest.raises(NotFound):
        services.memory_delete(actor=actor(dave), memory=corrected)
    assert Memory.objects.get(pk=memory.pk).status == Memory.Status.ACTIVE

    services.memory_delete(actor=actor(bob), memory=corrected)
    assert Memory.objects.get(pk=memory.pk).status == Memory.Status.DELETED


def test_an_agent_never_reads_a_sibling_agents_memory(cast, deployment, bob_agent):
    alice_agent = deployment.agents.get(member=cast["alice"])
    memory = agent_memory(alice_agent)
    assert memory.scope_key not in selectors.readable_scope_keys(agent_actor(bob_agent))
    assert not selectors.memory_queryset(agent_actor(bob_agent)).filter(pk=memory.pk).exists()
    # Bob's own agent reads neither its sibling's memory nor gains its owner's admin reach.
    bobs = agent_memory(bob_agent, "Bob's agent files notes under /crm")
    assert selectors.memory_queryset(agent_actor(bob_agent)).filter(pk=bobs.pk).exists()


def test_the_subject_sees_what_they_told_someone_elses_agent(cast, bob_agent):
    dave = cast["dave"]
    memory = agent_memory(bob_agent, "Dave wants minutes within a day", subject=dave)

    assert selectors.memory_get(actor(dave), memory.pk) == memory
    assert selectors.can_modify(actor(dave), memory)
    assert selectors.memory_list(actor(dave), scope_keys=[memory.scope_key]).get() == memory
    assert selectors.memory_get(actor(cast["bob"]), memory.pk) == memory  # the agent's owner
    assert (memory.scope_key, f"Agent: {bob_agent.name}") in selectors.scope_choices(actor(dave))
    # Being the subject of one memory opens nothing else in that scope.
    other = agent_memory(bob_agent, "Bob keeps his pipeline in the CRM")
    assert not selectors.memory_queryset(actor(dave)).filter(pk=other.pk).exists()


def test_admins_read_agent_memory_and_need_memory_manage_to_change_it(cast, bob_agent):
    memory = agent_memory(bob_agent)
    bianca, alice = cast["bianca"], cast["alice"]

    assert selectors.memory_get(actor(bianca), memory.pk) == memory  # memory.view
    assert not selectors.can_modify(actor(bianca), memory)
    with pytest.raises(NotPermitted):
        services.memory_delete(actor=actor(bianca), memory=memory)
    assert Memory.objects.get(pk=memory.pk).status == Memory.Status.ACTIVE

    assert selectors.can_modify(actor(alice), memory)  # memory.manage
    services.memory_delete(actor=actor(alice), memory=memory)
    assert Memory.objects.get(pk=memory.pk).status == Memory.Status.DELETED


def test_personal_memory_reaches_admins_only_with_memory_personal(cast):
    bob = cast["bob"]
    mine = services.memory_add(
        actor=actor(bob),
        scope="user",
        kind="preference",
        content="I prefer reports in bullet points",
        source_kind="user_statement",
    )
    assert mine.subject_id == bob.pk
    with pytest.raises(NotFound):
        selectors.memory_get(actor(cast["bianca"]), mine.pk)  # memory.view is not enough
    assert selectors.memory_get(actor(cast["alice"]), mine.pk) == mine
    assert selectors.can_modify(actor(cast["alice"]), mine)
    assert (mine.scope_key, "Member: Bob") in selectors.scope_choices(actor(cast["alice"]))


def test_scope_choices_name_every_readable_scope(cast, bob_agent, sales):
    bob = cast["bob"]
    choices = selectors.scope_choices(actor(bob))
    assert choices == [
        (f"user:{bob.pk}", "You"),
        (f"agent:{bob_agent.pk}", f"Agent: {bob_agent.name}"),
        (f"position:{sales.pk}", "Position: Sales"),
        ("organization", "Organization"),
    ]
    assert [key for key, _ in choices] == selectors.readable_scope_keys(actor(bob))


def test_extraction_puts_personal_statements_in_the_persons_scope(cast, bob_agent):
    bob = cast["bob"]
    written = services.memory_add_from_messages(
        actor=agent_actor(bob_agent),
        messages=[
            {
                "role": "user",
                "content": "From now on, always write reports in bullet points, and my "
                "manager is Li Wei.",
            }
        ],
        scope="agent",
        personal_scope=("user", bob.pk),
        subject=bob,
    )
    assert [(m.scope_key, m.kind, m.source_kind) for m in written] == [
        (f"user:{bob.pk}", "requirement", "user_statement")
    ]
    assert "Li Wei" in written[0].content and written[0].subject_id == bob.pk


# --- the REST API ------------------------------------------------------------------------


def test_api_lists_agent_memory_for_its_owner_with_a_readable_scope(cast, bob_agent, client_for):
    memory = agent_memory(bob_agent)
    api = client_for(cast["bob"])
    rows = api.get("/api/v1/memories/").json()["results"]
    row = next(item for item in rows if item["id"] == memory.pk)
    assert row["scope_key"] == f"agent:{bob_agent.pk}"
    assert row["scope_label"] == f"Agent: {bob_agent.name}"
    assert row["subject"] == cast["bob"].pk

    scopes = api.get("/api/v1/memories/scopes/").json()
    assert {"key": f"agent:{bob_agent.pk}", "label": f"Agent: {bob_agent.name}"} in scopes
    assert scopes[0] == {"key": f"user:{cast['bob'].pk}", "label": "You"}
    filtered = api.get("/api/v1/memories/", {"scope": f"agent:{bob_agent.pk}"}).json()
    assert [item["id"] for item in filtered["results"]] == [memory.pk]

    detail = api.get(f"/api/v1/memories/{memory.pk}/")
    assert detail.status_code == 200 and detail.json()["scope_label"].startswith("Agent: ")


def test_api_owner_and_admin_correct_and_delete_agent_memory(cast, bob_agent, client_for):
    memory = agent_memory(bob_agent)
    bob = client_for(cast["bob"])
    patched = bob.patch(
        f"/api/v1/memories/{memory.pk}/",
        {"version": 1, "content": "Quarterly reviews use the West template"},
        format="json",
    )
    assert patched.status_code == 200, patched.json()
    assert patched.json()["version"] == 2

    bianca = client_for(cast["bianca"])
    assert bianca.get(f"/api/v1/memories/{memory.pk}/").status_code == 200
    refused = bianca.delete(f"/api/v1/memories/{memory.pk}/")
    assert refused.status_code == 403 and refused.json()["error"]["code"]
    assert Memory.objects.get(pk=memory.pk).status == Memory.Status.ACTIVE

    alice = client_for(cast["alice"])
    fixed = alice.patch(
        f"/api/v1/memories/{memory.pk}/",
        {"version": 2, "content": "Quarterly reviews use the North template"},
        format="json",
    )
    assert fixed.status_code == 200
    assert alice.delete(f"/api/v1/memories/{memory.pk}/").status_code == 200  # with its report
    assert Memory.objects.get(pk=memory.pk).status == Memory.Status.DELETED


def test_api_colleague_and_outsider_get_404_and_change_nothing(cast, bob_agent, client_for):
    memory = agent_memory(bob_agent)
    for name in ("dave", "charlie"):
        api = client_for(cast[name])
        assert api.get(f"/api/v1/memories/{memory.pk}/").status_code == 404
        ids = [row["id"] for row in api.get("/api/v1/memories/").json()["results"]]
        assert memory.pk not in ids
        listed = api.get("/api/v1/memories/", {"scope": memory.scope_key}).json()["results"]
        assert listed == []
        keys = [scope["key"] for scope in api.get("/api/v1/memories/scopes/").json()]
        assert memory.scope_key not in keys
        patched = api.patch(
            f"/api/v1/memories/{memory.pk}/", {"version": 1, "content": "x"}, format="json"
        )
        assert patched.status_code == 404
        assert api.delete(f"/api/v1/memories/{memory.pk}/").status_code == 404
    memory.refresh_from_db()
    assert memory.status == Memory.Status.ACTIVE and memory.version == 1
    assert memory.content.startswith("Quarterly pipeline reviews")


def test_an_agent_scope_is_named_after_the_agent_and_its_owner():
    from cadre.memory.agent_scopes import AgentScope

    assert AgentScope(1, "Sales assistant", 2, "Alice").label == "Agent: Sales assistant (Alice)"
    assert AgentScope(1, "Sales assistant · Alice", 2, "Alice").label == (
        "Agent: Sales assistant · Alice"
    )
