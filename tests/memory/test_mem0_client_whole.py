# ruff: noqa: F811 - the live server fixture imported below is a parameter here
"""Every public method of the real mem0ai MemoryClient and AsyncMemoryClient against a live
Cadre (/mem0/) beyond the round trip of test_mem0_client.py: users(), delete_users(), reset(),
batch_update/batch_delete, memory exports, get_summary, the profile calls, the project and its
members, webhooks and chat(). Each is served through memory's selectors and services or
refused as docs/integrations.md says (501 `not_supported`, 404 for what cannot exist), and a
refusal changes nothing."""

from __future__ import annotations

import asyncio
import json

import pytest

mem0 = pytest.importorskip("mem0")

from mem0 import AsyncMemoryClient, MemoryClient  # noqa: E402
from mem0.exceptions import MemoryError as Mem0Error  # noqa: E402

from cadre.governance.audit_models import AuditEvent  # noqa: E402
from cadre.memory import services  # noqa: E402
from cadre.memory.models import Memory  # noqa: E402
from cadre.tenancy import services as tenancy_services  # noqa: E402
from cadre.tenancy.actors import Actor, member_actor  # noqa: E402
from tests.live_server import live_server_url  # noqa: E402, F401 - fixture
from tests.refusals import nothing_changes  # noqa: E402

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

SCOPES = ["memory:read", "memory:write"]
SCHEMA = json.dumps({"type": "object", "properties": {"facts": {"type": "array"}}})


def _client(member, url, cls=MemoryClient):
    _, secret = tenancy_services.api_key_create(
        actor=member_actor(member), name="mem0 client", scopes=SCOPES
    )
    return cls(api_key=secret, host=f"{url}/mem0")


@pytest.fixture
def alice_client(alice, live_server_url):
    return _client(alice, live_server_url)


def _add(client, text, user_id, **kwargs):
    return client.add(text, user_id=user_id, infer=False, **kwargs)["results"][0]["id"]


def _status(error) -> int:
    return error.value.debug_info["status_code"]


def _bobs_memory(bob):
    return services.memory_add(
        actor=member_actor(bob),
        scope="user",
        kind="fact",
        content="Bob's salary review is in May",
        source_kind="user_statement",
    )


def _shared_memory(alice):
    return services.memory_add(
        actor=member_actor(alice),
        scope="organization",
        kind="fact",
        content="The office closes at 8 pm",
        source_kind="user_statement",
    )


def test_users_lists_the_keys_entities_and_delete_users_removes_one(alice_client, alice, bob):
    in_run = _add(alice_client, "Alice's flight lands at 9", alice.email, run_id="chat-1")
    in_app = _add(alice_client, "Alice uses the CRM daily", alice.email, app_id="crm")
    bobs, shared = _bobs_memory(bob), _shared_memory(alice)

    entities = alice_client.users()["results"]
    by_type = {(entity["type"], entity["name"]): entity for entity in entities}
    assert set(by_type) == {("user", alice.email), ("run", "chat-1"), ("app", "crm")}
    assert by_type[("user", alice.email)]["total_memories"] == 2
    assert by_type[("run", "chat-1")]["total_memories"] == 1
    assert "Bob" not in json.dumps(entities)  # neither bob nor the shared memory is an entity

    # another member's user entity is not this key's: 404, nothing deleted
    with nothing_changes(bobs, Memory), pytest.raises(Mem0Error) as refused:
        alice_client.delete_users(user_id=bob.email)
    assert _status(refused) == 404

    assert alice_client.delete_users(run_id="chat-1")["message"] == "Entity deleted successfully."
    assert Memory.objects.get(pk=in_run).status == Memory.Status.DELETED
    assert Memory.objects.get(pk=in_app).status == Memory.Status.ACTIVE
    assert AuditEvent.objects.filter(action="memory.delete_by_filter").count() == 1
    alice_client.delete_users(app_id="crm")
    assert Memory.objects.get(pk=in_app).status == Memory.Status.DELETED
    assert AuditEvent.objects.filter(action="memory.delete", target_id=str(in_app)).exists()
    assert alice_client.users()["results"] == []
    bobs.refresh_from_db()
    shared.refresh_from_db()
    assert bobs.status == shared.status == Memory.Status.ACTIVE


def _alices_agent(alice):
    """An agent serving alice: a published template deployed to her position."""
    from cadre.agents import services as agents
    from tests.factories import PositionFactory

    owner = member_actor(alice)
    sales = PositionFactory(organization=alice.organization, name="Sales", code="sales")
    alice.positions.add(sales)
    template = agents.template_create(
        actor=owner,
        name="Sales assistant",
        code="sales-assistant",
        agent_md="# Persona\nYou help.",
        model_settings={"provider": "offline", "model": "offline-1"},
    )
    version = template.versions.get()
    agents.version_submit(actor=owner, version=version)
    agents.version_publish(actor=owner, version=version, reason="ready")
    deployment = agents.deployment_create(
        actor=owner, name="Sales agents", template=template, positions=[sales]
    )
    return deployment.agents.get(member=alice)


def test_delete_users_by_user_and_agent(alice_client, alice):
    mine = _add(alice_client, "Alice reviews budgets on Monday", alice.email)
    agent = _alices_agent(alice)
    # the agent writes its own memory (a person's key may read and delete it, not add to it)
    agents_memory = services.memory_add(
        actor=Actor(
            kind="agent", organization=alice.organization, agent=agent, member=alice, label="a"
        ),
        scope="agent",
        kind="fact",
        content="Quotes need a PO number",
        source_kind="tool_result",
    ).pk
    kinds = {(entity["type"], entity["name"]) for entity in alice_client.users()["results"]}
    assert kinds == {("user", alice.email), ("agent", str(agent.pk))}
    alice_client.delete_users(user_id=alice.email)
    assert Memory.objects.get(pk=mine).status == Memory.Status.DELETED
    assert Memory.objects.get(pk=agents_memory).status == Memory.Status.ACTIVE
    alice_client.delete_users(agent_id=str(agent.pk))
    assert Memory.objects.get(pk=agents_memory).status == Memory.Status.DELETED
    # an agent this key cannot read is no entity of it
    with pytest.raises(Mem0Error) as refused:
        alice_client.delete_users(agent_id="999999")
    assert _status(refused) == 404


def test_reset_deletes_the_keys_own_memory_never_the_organizations(alice_client, alice, bob):
    mine = [
        _add(alice_client, "Alice parks on level 2", alice.email),
        _add(alice_client, "Alice's standup is at 10", alice.email, run_id="chat-9"),
    ]
    bobs, shared = _bobs_memory(bob), _shared_memory(alice)
    answer = alice_client.reset()
    assert answer["message"].startswith("Client reset successful")
    assert set(Memory.objects.filter(pk__in=mine).values_list("status", flat=True)) == {
        Memory.Status.DELETED
    }
    bobs.refresh_from_db()
    shared.refresh_from_db()
    assert bobs.status == Memory.Status.ACTIVE and shared.status == Memory.Status.ACTIVE
    # nothing of the key's left: the client itself says so, and sends no delete
    with pytest.raises(ValueError, match="No entities to delete"):
        alice_client.reset()


def test_batch_update_and_delete_are_all_or_nothing(alice_client, alice, bob):
    first = _add(alice_client, "Alice's desk is 4B", alice.email)
    second = _add(alice_client, "Alice's locker is 12", alice.email)
    answer = alice_client.batch_update(
        [
            {"memory_id": first, "text": "Alice's desk is 5C"},
            {"memory_id": second, "metadata": {"floor": 3}},
        ]
    )
    assert answer["message"] == "Successfully updated 2 memories"
    assert Memory.objects.get(pk=first).content == "Alice's desk is 5C"
    assert alice_client.get(second)["metadata"] == {"floor": 3}
    assert [entry["event"] for entry in alice_client.history(first)] == ["ADD", "UPDATE"]

    # one item the key may not read: 404, and the other item is not changed either
    bobs = _bobs_memory(bob)
    before = Memory.objects.get(pk=first)
    with nothing_changes(before, bobs, Memory), pytest.raises(Mem0Error) as refused:
        alice_client.batch_update(
            [
                {"memory_id": first, "text": "Alice's desk is 9Z"},
                {"memory_id": str(bobs.pk), "text": "Bob's review moved"},
            ]
        )
    assert _status(refused) == 404
    with nothing_changes(before, Memory), pytest.raises(Mem0Error) as refused:
        alice_client.batch_delete([{"memory_id": first}, {"memory_id": str(bobs.pk)}])
    assert _status(refused) == 404

    # more than Mem0's 1,000, or one memory twice: 400, nothing deleted
    with nothing_changes(before, Memory), pytest.raises(Mem0Error) as refused:
        alice_client.batch_delete([{"memory_id": first}] * 1001)
    assert _status(refused) == 400 and "at most 1000" in str(refused.value)
    with nothing_changes(before, Memory), pytest.raises(Mem0Error) as refused:
        alice_client.batch_delete([{"memory_id": first}, {"memory_id": first}])
    assert _status(refused) == 400

    answer = alice_client.batch_delete([{"memory_id": first}, {"memory_id": second}])
    assert answer["message"] == "Successfully deleted 2 memories"
    assert set(Memory.objects.filter(pk__in=[first, second]).values_list("status", flat=True)) == {
        Memory.Status.DELETED
    }
    assert AuditEvent.objects.filter(action="memory.delete").count() == 2


def test_memory_exports(alice_client, alice, bob, live_server_url):
    kept = _add(alice_client, "Alice prefers aisle seats", alice.email)
    gone = _add(alice_client, "Alice's old phone number", alice.email)
    _bobs_memory(bob)
    created = alice_client.create_memory_export(schema=SCHEMA, user_id=alice.email)
    assert created["status"] == "completed" and created["count"] == 2
    alice_client.delete(gone)
    exported = alice_client.get_memory_export(memory_export_id=created["id"])
    # built when read: what was deleted meanwhile is not exported
    assert [memory["id"] for memory in exported["memories"]] == [kept]
    assert exported["memories"][0]["memory"] == "Alice prefers aisle seats"
    by_filter = alice_client.get_memory_export(filters={"user_id": alice.email})
    assert [memory["id"] for memory in by_filter["memories"]] == [kept]

    # another key's export id, a forged one and a bad schema: refused
    other = _client(alice, live_server_url)
    with pytest.raises(Mem0Error) as refused:
        other.get_memory_export(memory_export_id=created["id"])
    assert _status(refused) == 404
    with pytest.raises(Mem0Error) as refused:
        alice_client.get_memory_export(memory_export_id=created["id"][:-2] + "xx")
    assert _status(refused) == 404
    with pytest.raises(Mem0Error) as refused:
        alice_client.create_memory_export(schema="{not json", user_id=alice.email)
    assert _status(refused) == 400
    # bob's personal memory is not in alice's export, even asked for by name
    with pytest.raises(Mem0Error):
        alice_client.create_memory_export(schema=SCHEMA, user_id="nobody@acme.test")
    assert "Bob" not in json.dumps(alice_client.get_memory_export())


def test_summary_and_profiles(alice_client, alice, bob):
    _add(alice_client, "Alice likes green tea", alice.email)
    with nothing_changes(Memory), pytest.raises(Mem0Error) as refused:
        alice_client.get_summary(filters={"user_id": alice.email})
    assert _status(refused) == 501 and "does not offer memory summaries" in str(refused.value)

    profile = alice_client.get_profile(alice.email)
    assert profile["status"] == "not_enabled" and profile["profile"] is None
    with pytest.raises(Mem0Error) as refused:
        alice_client.get_profile(bob.email)
    assert _status(refused) == 404
    with pytest.raises(Mem0Error) as refused:
        alice_client.generate_profile(alice.email)
    assert _status(refused) == 501
    with pytest.raises(Mem0Error) as refused:
        alice_client.sample_profiles(limit=2)
    assert _status(refused) == 501
    settings = alice_client.get_profile_settings()
    assert settings["enabled"] is False
    assert alice_client.update_profile_settings(enabled=False)["enabled"] is False
    for change in ({"enabled": True}, {"schema": {"type": "object"}}):
        with pytest.raises(Mem0Error) as refused:
            alice_client.update_profile_settings(**change)
        assert _status(refused) == 501
    with pytest.raises(Mem0Error) as refused:
        alice_client.get_profile_job("job-1")
    assert _status(refused) == 404


def test_project_members_and_webhooks(alice_client, alice, charlie, live_server_url):
    project = alice_client.get_project()
    assert project["id"] == alice_client.project_id and project["org_id"] == "acme"
    assert alice_client.project.get(fields=["name"]) == {"name": "mem0 client"}
    assert alice_client.project.get_members() == {
        "members": [{"email": alice.email, "role": "OWNER"}]
    }
    refusals = [
        lambda: alice_client.update_project(custom_instructions="Be brief"),
        lambda: alice_client.project.update(custom_categories=["travel"]),
        lambda: alice_client.project.create("Another"),
        lambda: alice_client.project.delete(),
        lambda: alice_client.project.add_member("bob@acme.test"),
        lambda: alice_client.project.update_member("bob@acme.test", "OWNER"),
        lambda: alice_client.project.remove_member("bob@acme.test"),
        lambda: alice_client.create_webhook(
            "http://127.0.0.1:9/hook", "hook", alice_client.project_id, ["memory_add"]
        ),
    ]
    for refusal in refusals:
        with pytest.raises(Mem0Error) as refused:
            refusal()
        assert _status(refused) == 501 and "Cadre" in str(refused.value)
    assert alice_client.get_webhooks(alice_client.project_id) == []
    for missing in (
        lambda: alice_client.update_webhook(1, name="x"),
        lambda: alice_client.delete_webhook(1),
        lambda: alice_client.get_webhooks("key-someone-else"),
    ):
        with pytest.raises(Mem0Error) as refused:
            missing()
        assert _status(refused) == 404
    with pytest.raises(NotImplementedError):
        alice_client.chat()
    # another organization's key names alice's organization and project: nothing
    outsider = _client(charlie, live_server_url)
    answer = outsider.client.get(
        f"/api/v1/orgs/organizations/acme/projects/{alice_client.project_id}/"
    )
    assert answer.status_code == 404


def test_the_async_client_does_everything_the_sync_one_does(alice, bob, live_server_url):
    bobs = _bobs_memory(bob)

    client = _client(alice, live_server_url, AsyncMemoryClient)  # the key: made outside the loop

    async def scenario():
        try:
            added = await client.add("Alice takes the 8:10 train", user_id=alice.email, infer=False)
            memory_id = added["results"][0]["id"]
            await client.add("Alice's team is Finance", user_id=alice.email, infer=False)
            assert (await client.get(memory_id))["memory"] == "Alice takes the 8:10 train"
            listed = await client.get_all(filters={"user_id": alice.email})
            assert listed["count"] == 2
            found = await client.search("train", filters={"user_id": alice.email})
            assert found["results"][0]["id"] == memory_id
            await client.update(memory_id, text="Alice takes the 8:40 train")
            assert [e["event"] for e in await client.history(memory_id)] == ["ADD", "UPDATE"]
            assert (await client.feedback(memory_id, feedback="POSITIVE"))["feedback"]
            users = (await client.users())["results"]
            assert [(u["type"], u["name"]) for u in users] == [("user", alice.email)]
            await client.batch_update([{"memory_id": memory_id, "text": "Alice cycles"}])
            export = await client.create_memory_export(SCHEMA, user_id=alice.email)
            got = await client.get_memory_export(memory_export_id=export["id"])
            assert {m["memory"] for m in got["memories"]} == {
                "Alice cycles",
                "Alice's team is Finance",
            }
            refusals = [
                client.get_summary(),
                client.generate_profile(alice.email),
                client.sample_profiles(),
                client.update_profile_settings(enabled=True),
                client.update_project(custom_instructions="x"),
                client.project.update(custom_instructions="x"),
                client.project.create("x"),
                client.project.delete(),
                client.project.add_member("bob@acme.test"),
                client.project.update_member("bob@acme.test", "READER"),
                client.project.remove_member("bob@acme.test"),
                client.create_webhook("http://127.0.0.1:9/", "h", client.project_id, ["x"]),
            ]
            for call in refusals:
                with pytest.raises(Mem0Error) as refused:
                    await call
                assert _status(refused) == 501
            for call in (
                client.get_profile_job("job-1"),
                client.update_webhook(1, name="x"),
                client.delete_webhook(1),
                client.get_profile(bob.email),
                client.delete_users(user_id=bob.email),
            ):
                with pytest.raises(Mem0Error) as refused:
                    await call
                assert _status(refused) == 404
            assert (await client.get_profile(alice.email))["status"] == "not_enabled"
            assert (await client.get_profile_settings())["enabled"] is False
            assert (await client.get_project())["id"] == client.project_id
            assert (await client.project.get())["org_id"] == "acme"
            assert (await client.project.get_members())["members"][0]["role"] == "OWNER"
            assert await client.get_webhooks(client.project_id) == []
            with pytest.raises(NotImplementedError):
                await client.chat()
            await client.batch_delete([{"memory_id": memory_id}])
            await client.delete_users(run_id="no-such-run")  # an empty run: nothing to delete
            extra = await client.add("Alice's spare key", user_id=alice.email, infer=False)
            await client.delete(extra["results"][0]["id"])
            await client.delete_all(user_id=alice.email)
            assert (await client.get_all(filters={"user_id": alice.email}))["count"] == 0
            await client.add("Alice is back", user_id=alice.email, infer=False)
            assert (await client.reset())["message"].startswith("Client reset successful")
        finally:
            await client.async_client.aclose()

    asyncio.run(scenario())
    assert not Memory.objects.filter(scope_key=f"user:{alice.pk}", status="active").exists()
    bobs.refresh_from_db()
    assert bobs.status == Memory.Status.ACTIVE
