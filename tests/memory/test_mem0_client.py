# ruff: noqa: F811 - the live server fixture imported below is a parameter here
"""The real mem0ai MemoryClient against a live Cadre (uvicorn on loopback, /mem0/): ping, add
with and without inference, search, get_all, get, update, history, feedback, delete and
delete_all, all through memory's services; another organization's key sees nothing and a
revoked key is refused."""

from __future__ import annotations

import pytest

mem0 = pytest.importorskip("mem0")

from mem0 import MemoryClient  # noqa: E402
from mem0.exceptions import MemoryError as Mem0Error  # noqa: E402

from cadre.governance.audit_models import AuditEvent  # noqa: E402
from cadre.memory import services  # noqa: E402
from cadre.memory.models import Memory  # noqa: E402
from cadre.tenancy import services as tenancy_services  # noqa: E402
from cadre.tenancy.actors import member_actor  # noqa: E402
from tests.console.test_browser_chat import live_server_url  # noqa: E402, F401 - fixture

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

SCOPES = ["memory:read", "memory:write"]


def _key(member, scopes=SCOPES):
    key, secret = tenancy_services.api_key_create(
        actor=member_actor(member), name="mem0 client", scopes=scopes
    )
    return key, secret


@pytest.fixture
def alice_client(alice, live_server_url):
    _, secret = _key(alice)
    return MemoryClient(api_key=secret, host=f"{live_server_url}/mem0")


def test_ping_names_the_organization_the_key_and_its_owner(alice_client, alice):
    assert alice_client.org_id == "acme"
    assert alice_client.project_id.startswith("key-")
    assert alice_client.user_email == alice.email


def test_the_mem0_client_round_trip(alice_client, alice):
    # infer=False: stored as sent, with the client named in the provenance
    added = alice_client.add(
        [{"role": "user", "content": "Alice's quarterly KPI deck lives in the Finance share"}],
        user_id=alice.email,
        metadata={"topic": "kpi"},
        infer=False,
    )
    assert [result["event"] for result in added["results"]] == ["ADD"]
    memory_id = added["results"][0]["id"]
    stored = Memory.objects.get(pk=memory_id)
    assert stored.scope_key == f"user:{alice.pk}"
    assert stored.source_kind == "import" and stored.source_ref["client"] == "mem0"
    assert AuditEvent.objects.filter(action="memory.add", target_id=str(stored.pk)).exists()

    # infer=True: Cadre's extraction reads the conversation (rules with the offline model)
    inferred = alice_client.add(
        [
            {"role": "user", "content": "以后周报用英文写"},
            {"role": "assistant", "content": "好的"},
        ],
        user_id=alice.email,
        run_id="chat-7",
    )
    assert [r["memory"] for r in inferred["results"]] == ["以后周报用英文写"]
    extracted = Memory.objects.get(pk=inferred["results"][0]["id"])
    assert extracted.attributes["extracted_by"] == "rules"
    assert extracted.conversation_id == "chat-7" and extracted.source_ref["client"] == "mem0"

    # the same statement again is not stored twice (Cadre's dedup)
    again = alice_client.add("以后周报用英文写", user_id=alice.email, run_id="chat-7", infer=False)
    assert again["results"][0]["event"] == "NOOP"
    assert again["results"][0]["id"] == str(extracted.pk)

    found = alice_client.search("KPI deck", filters={"user_id": alice.email}, top_k=5)
    assert found["results"][0]["id"] == memory_id
    assert found["results"][0]["metadata"] == {"topic": "kpi"}
    assert found["results"][0]["score"] > 0

    listed = alice_client.get_all(filters={"AND": [{"user_id": alice.email}]}, page=1, page_size=1)
    assert listed["count"] == 2 and len(listed["results"]) == 1 and listed["next"]

    got = alice_client.get(memory_id)
    assert got["memory"].startswith("Alice's quarterly KPI deck")
    assert got["user_id"] == alice.email

    alice_client.update(memory_id, text="Alice's KPI deck moved to the Strategy share")
    assert alice_client.get(memory_id)["memory"] == "Alice's KPI deck moved to the Strategy share"
    history = alice_client.history(memory_id)
    assert [entry["event"] for entry in history] == ["ADD", "UPDATE"]
    assert history[1]["old_memory"].startswith("Alice's quarterly KPI deck")
    assert history[1]["new_memory"] == "Alice's KPI deck moved to the Strategy share"

    answer = alice_client.feedback(memory_id, feedback="NEGATIVE", feedback_reason="stale")
    assert answer["feedback"] == "NEGATIVE"
    stored.refresh_from_db()
    assert stored.attributes["client_feedback"]["feedback"] == "NEGATIVE"

    assert alice_client.delete(memory_id)["message"]
    with pytest.raises(Mem0Error) as missing:
        alice_client.get(memory_id)
    assert missing.value.debug_info["status_code"] == 404
    stored.refresh_from_db()
    assert stored.status == Memory.Status.DELETED

    alice_client.delete_all(user_id=alice.email)
    assert alice_client.get_all(filters={"user_id": alice.email})["count"] == 0
    assert not Memory.objects.filter(scope_key=f"user:{alice.pk}", status="active").exists()


def test_another_organization_sees_nothing(alice_client, alice, charlie, live_server_url):
    memory_id = alice_client.add(
        "Alice's door code is on the wiki", user_id=alice.email, infer=False
    )["results"][0]["id"]
    _, secret = _key(charlie)
    outsider = MemoryClient(api_key=secret, host=f"{live_server_url}/mem0")
    with pytest.raises(Mem0Error) as refused:
        outsider.get(memory_id)
    assert refused.value.debug_info["status_code"] == 404
    assert outsider.search("door code")["results"] == []
    assert outsider.get_all()["count"] == 0
    # alice's e-mail is no member of Globex: a clear error, nothing stored
    with pytest.raises(Mem0Error) as unknown:
        outsider.add("Alice likes tea", user_id=alice.email, infer=False)
    assert unknown.value.debug_info["status_code"] == 400
    assert "Unknown user_id" in str(unknown.value)
    with pytest.raises(Mem0Error):
        outsider.delete(memory_id)
    assert Memory.objects.get(pk=memory_id).status == Memory.Status.ACTIVE
    assert Memory.objects.count() == 1


def test_a_colleague_cannot_read_or_write_bobs_memory(alice_client, bob, alice):
    services.memory_add(
        actor=member_actor(bob),
        scope="user",
        kind="fact",
        content="Bob's salary review is in May",
        source_kind="user_statement",
    )
    # alice owns the organization, but no key carries memory.personal: bob's memory stays his
    assert alice_client.search("salary review", filters={"user_id": bob.email})["results"] == []
    assert alice_client.get_all(filters={"user_id": bob.email})["count"] == 0
    with pytest.raises(Mem0Error) as refused:
        alice_client.add("Bob wants a raise", user_id=bob.email, infer=False)
    assert refused.value.debug_info["status_code"] == 404
    assert Memory.objects.count() == 1


def test_a_revoked_key_is_refused(alice, live_server_url):
    key, secret = _key(alice)
    client = MemoryClient(api_key=secret, host=f"{live_server_url}/mem0")
    tenancy_services.api_key_revoke(actor=member_actor(alice), key=key)
    with pytest.raises(Mem0Error) as refused:
        client.add("I like tea", user_id=alice.email, infer=False)
    assert refused.value.debug_info["status_code"] == 401
    assert "revoked" in str(refused.value)
    with pytest.raises(ValueError, match="revoked"):
        MemoryClient(api_key=secret, host=f"{live_server_url}/mem0")
    assert not Memory.objects.exists()
