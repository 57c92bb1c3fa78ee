"""The pseudonym vault: consistent placeholders per conversation, separation between
conversations and organizations, encryption at rest, concurrent numbering, re-identification."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, transaction

from cadre.governance.masking.engine import get_engine
from cadre.governance.masking.services import mask_for_conversation
from cadre.governance.masking.vault import ConversationVault, reidentify
from cadre.governance.models import PseudonymMapping
from tests.factories import OrganizationFactory


@pytest.mark.django_db
def test_same_value_gets_same_placeholder_within_a_conversation(org_a):
    first = mask_for_conversation(
        organization=org_a,
        conversation_key="conv-1",
        text="客户手机13812345678，邮箱li.na@example.com",
    )
    second = mask_for_conversation(
        organization=org_a,
        conversation_key="conv-1",
        text="再确认一下 li.na@example.com 和 138 1234 5678，新号码13900001111",
    )
    assert first.text == "客户手机<PHONE_1>，邮箱<EMAIL_1>"
    assert second.text == "再确认一下 <EMAIL_1> 和 <PHONE_1>，新号码<PHONE_2>"
    assert PseudonymMapping.objects.filter(organization=org_a).count() == 3


@pytest.mark.django_db
def test_conversations_are_numbered_and_resolved_separately(org_a):
    mask_for_conversation(organization=org_a, conversation_key="conv-1", text="a@example.com")
    other = mask_for_conversation(
        organization=org_a, conversation_key="conv-2", text="b@example.com a@example.com"
    )
    assert other.text == "<EMAIL_1> <EMAIL_2>"
    assert reidentify("<EMAIL_1>", organization=org_a, conversation_key="conv-1") == (
        "a@example.com"
    )
    assert reidentify("<EMAIL_1>", organization=org_a, conversation_key="conv-2") == (
        "b@example.com"
    )
    assert reidentify("<EMAIL_1>", organization=org_a, conversation_key="conv-3") == "<EMAIL_1>"


@pytest.mark.django_db
def test_another_organization_cannot_resolve_a_conversation_with_the_same_key(org_a, org_b):
    mask_for_conversation(organization=org_a, conversation_key="shared", text="13812345678")
    assert reidentify("<PHONE_1>", organization=org_b, conversation_key="shared") == "<PHONE_1>"


@pytest.mark.django_db
def test_reidentify_round_trip_and_unknown_placeholders_stay(org_a):
    original = "请联系王经理 13812345678 或 wang@example.com，卡号4111 1111 1111 1111"
    masked = mask_for_conversation(organization=org_a, conversation_key="c", text=original)
    assert "13812345678" not in masked.text and "wang@example.com" not in masked.text
    reply = f"好的，我会给{masked.text.split()[1]}打电话，<PHONE_7>不认识"
    restored = reidentify(reply, organization=org_a, conversation_key="c")
    assert restored == "好的，我会给13812345678打电话，<PHONE_7>不认识"
    assert reidentify(masked.text, organization=org_a, conversation_key="c") == original


@pytest.mark.django_db
def test_mapping_value_is_encrypted_at_rest(org_a):
    mask_for_conversation(
        organization=org_a, conversation_key="c", text="邮箱secret.person@example.com"
    )
    row = PseudonymMapping.objects.get(organization=org_a)
    assert row.value == "secret.person@example.com"
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT value, value_hash FROM governance_pseudonymmapping WHERE id = %s", [row.pk]
        )
        raw_value, raw_hash = cursor.fetchone()
    assert "secret.person" not in raw_value
    assert "secret.person" not in raw_hash and len(raw_hash) == 64


@pytest.mark.django_db
def test_secrets_are_never_stored_in_the_vault(org_a):
    result = mask_for_conversation(
        organization=org_a, conversation_key="c", text="key AKIAIOSFODNN7EXAMPLE"
    )
    assert result.text == "key [SECRET]"
    assert not PseudonymMapping.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_concurrent_workers_never_share_a_placeholder_between_values():
    organization = OrganizationFactory(name="Concurrent", slug="concurrent")
    workers = 6
    barrier = threading.Barrier(workers)
    results: dict[int, list[str]] = {}
    errors: list[BaseException] = []

    def work(index: int):
        try:
            barrier.wait(timeout=30)
            with transaction.atomic():
                vault = ConversationVault(organization, "hot")
                values = [f"user{index}@example.com", "shared@example.com"]
                results[index] = vault.placeholders_for([("EMAIL", v) for v in values])
        except BaseException as exc:  # surfaced below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors
    own = [results[i][0] for i in range(workers)]
    shared = {results[i][1] for i in range(workers)}
    assert len(set(own)) == workers  # every value its own placeholder
    assert len(shared) == 1 and shared.isdisjoint(own)  # the shared value: one placeholder
    rows = PseudonymMapping.objects.filter(organization=organization, conversation_key="hot")
    assert sorted(rows.values_list("number", flat=True)) == list(range(1, workers + 2))
    assert {row.placeholder: row.value for row in rows}[shared.pop()] == "shared@example.com"


def test_engine_builds_once_per_process():
    assert get_engine() is get_engine()
