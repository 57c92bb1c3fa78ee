"""Memory in the console: scoped lists, provenance and history, correct and delete."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from cadre.memory import services
from cadre.memory.models import ContextRecord, ContextRecordItem, Memory, MemoryVersion
from cadre.tenancy.actors import member_actor

pytestmark = pytest.mark.django_db


def _client(member) -> Client:
    client = Client()
    client.force_login(member.user)
    return client


def _remember(member, content: str, scope: str = "user", scope_id=None, **fields) -> Memory:
    return services.memory_add(
        actor=member_actor(member),
        scope=scope,
        scope_id=member.pk if scope == "user" and scope_id is None else scope_id,
        kind=fields.pop("kind", "preference"),
        content=content,
        source_kind=fields.pop("source_kind", "user_statement"),
        **fields,
    )


def test_list_shows_own_and_shared_memory_but_never_a_colleagues(alice, bob):
    own = _remember(bob, "I prefer reports as PDF attachments")
    shared = _remember(alice, "Fiscal year starts in April", scope="organization", kind="fact")
    private = _remember(alice, "Alice's private note about her review")
    page = _client(bob).get(reverse("console:memory")).content.decode()
    assert own.content in page
    assert shared.content in page
    assert private.content not in page


def test_filters_narrow_the_list(alice):
    _remember(alice, "Prefers morning meetings")
    _remember(alice, "Customer ACME uses SAP", scope="organization", kind="fact")
    page = _client(alice).get(reverse("console:memory"), {"kind": "fact"}).content.decode()
    assert "Customer ACME uses SAP" in page
    assert "Prefers morning meetings" not in page
    bad = _client(alice).get(
        reverse("console:memory"), {"since": "2026-05-02", "until": "2026-05-01"}
    )
    assert bad.status_code == 200
    assert "The start date is after the end date." in bad.content.decode()


def test_detail_shows_provenance_history_and_the_model_calls_that_used_it(alice):
    memory = _remember(alice, "Weekly report goes to Li Wei", source_ref={"message_id": "m-7"})
    record = ContextRecord.objects.create(
        organization=alice.organization, run_id="41", step_id="2", query="who gets the report"
    )
    ContextRecordItem.objects.create(
        context=record, memory=memory, memory_version=1, rank=1, score=0.9
    )
    page = _client(alice).get(reverse("console:memory_detail", args=[memory.pk])).content.decode()
    assert "User statement" in page
    assert "m-7" in page
    assert "Addition" in page
    assert "who gets the report" in page


def test_correcting_keeps_the_old_text_in_history(alice):
    memory = _remember(alice, "Weekly report goes to Zhang San")
    client = _client(alice)
    url = reverse("console:memory_correct", args=[memory.pk])
    response = client.post(
        url,
        {
            "content": "Weekly report goes to Li Wei",
            "reason": "changed owner",
            "expected_version": memory.version,
        },
    )
    assert response.status_code == 302
    memory.refresh_from_db()
    assert memory.content == "Weekly report goes to Li Wei"
    correction = MemoryVersion.objects.get(memory=memory, change="correction")
    assert correction.old_content == "Weekly report goes to Zhang San"
    # A stale form (someone else corrected it meanwhile) is refused and changes nothing.
    stale = client.post(url, {"content": "Goes to Wang Wu", "expected_version": 1})
    assert stale.status_code == 200
    memory.refresh_from_db()
    assert memory.content == "Weekly report goes to Li Wei"


def test_delete_needs_confirmation_and_hides_the_memory(alice):
    memory = _remember(alice, "Temporary note to forget")
    client = _client(alice)
    url = reverse("console:memory_delete", args=[memory.pk])
    assert client.get(url).status_code == 200
    assert Memory.objects.get(pk=memory.pk).status == Memory.Status.ACTIVE
    assert client.post(url, {"reason": "no longer true"}).status_code == 302
    assert "Temporary note to forget" not in client.get(reverse("console:memory")).content.decode()
    assert client.get(reverse("console:memory_detail", args=[memory.pk])).status_code == 404


def test_colleagues_and_outsiders_get_404_and_readers_cannot_change_shared_memory(
    alice, bob, charlie
):
    private = _remember(alice, "Alice's own preference")
    shared = _remember(alice, "Org-wide fact", scope="organization", kind="fact")
    assert _client(bob).get(reverse("console:memory_detail", args=[private.pk])).status_code == 404
    assert (
        _client(charlie).get(reverse("console:memory_detail", args=[shared.pk])).status_code == 404
    )
    # bob may read the organization's memory but not correct or delete what alice wrote.
    assert _client(bob).get(reverse("console:memory_detail", args=[shared.pk])).status_code == 200
    assert _client(bob).post(reverse("console:memory_delete", args=[shared.pk])).status_code == 403
    assert Memory.objects.get(pk=shared.pk).status == Memory.Status.ACTIVE


def test_anonymous_is_sent_to_sign_in():
    response = Client().get(reverse("console:memory"))
    assert response.status_code == 302
    assert reverse("console:login") in response["Location"]


@pytest.mark.parametrize("page", ["timeline", "map", "heatmap", "quality"])
def test_viewer_pages_load_echarts_from_static_with_the_nonce(bob, page):
    response = _client(bob).get(f"/memory/{page}/")
    assert response.status_code == 200
    html = response.content.decode()
    nonce = response.wsgi_request.csp_nonce
    assert f'<script nonce="{nonce}" src="/static/vendor/echarts/dist/echarts.min.js"' in html
    assert f'data-api="/api/v1/memory-viewer/{page}/"' in html
    assert "POST /api/v1/memories/" in html  # the empty state says how memory arrives
    # Only the most specific navigation entry is current.
    assert html.count('aria-current="page"') == 1
    assert f'href="/memory/{page}/" class="nav-link active"' in html


def test_detail_shows_the_trail_with_merges(alice):
    kept = _remember(alice, "Alice flies economy on short trips")
    absorbed = _remember(alice, "On short trips Alice flies economy")
    services.memory_merge(
        actor=member_actor(alice), survivor=kept, absorbed=absorbed, reason="same", judge="rules"
    )
    html = _client(alice).get(reverse("console:memory_detail", args=[kept.pk])).content.decode()
    assert 'data-testid="trail"' in html
    assert '<dd data-testid="merge-count">1</dd>' in html
    link = f'href="/memory/{absorbed.pk}/">#{absorbed.pk}</a>'
    assert f"{link} On short trips Alice flies economy" in html


def test_detail_shows_where_policy_masked_the_memory_on_its_way_to_a_model(alice):
    memory = _remember(alice, "Alice's phone is 13812345678")
    record = ContextRecord.objects.create(
        organization=alice.organization, run_id="52", step_id="1", query="phone"
    )
    ContextRecordItem.objects.create(
        context=record,
        memory=memory,
        memory_version=1,
        rank=1,
        score=0.8,
        reason="masked: CN_PHONE",
    )
    page = _client(alice).get(reverse("console:memory_detail", args=[memory.pk])).content.decode()
    masked = page.split('data-testid="trail-masked">', 1)[1].split("</dd>", 1)[0]
    assert "run <code>52</code> — masked: CN_PHONE" in masked
    # Without a masking decision the row says so.
    other = _remember(alice, "Alice takes the early train")
    page = _client(alice).get(reverse("console:memory_detail", args=[other.pk])).content.decode()
    assert page.split('data-testid="trail-masked">', 1)[1].startswith("—</dd>")
