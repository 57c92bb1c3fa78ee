"""The confirmations console: the live queue, one confirmation's full context, approve /
reject as an allowed decider (decided_via=console) resuming the paused run exactly once, and
the history with its filters."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils import timezone

from cadre.agents.models import AgentMessage, Run
from cadre.agents.runtime.lifecycle import execution as engine
from cadre.agents.runtime.lifecycle import services as runtime
from cadre.governance import confirmations
from cadre.governance.models import AuditEvent, Confirmation, ConfirmationVote
from cadre.governance.risk import classify
from cadre.tenancy.actors import member_actor
from tests.agents import conftest as _agents
from tests.factories import MemberFactory

pytestmark = pytest.mark.django_db

# The agents suite's fixtures: a published template deployed to alice's and bob's position.
owner, sales, template = _agents.owner, _agents.sales, _agents.template
published, deployment, bob_agent = _agents.published, _agents.deployment, _agents.bob_agent


def _confirm(requester, *, arguments=None, key="console:1", **kw) -> Confirmation:
    arguments = arguments or {"recipients": ["13812345678", "x@acme.test"], "text": "hi"}
    return confirmations.confirmation_create(
        organization=requester.organization,
        tool="im_send",
        arguments=arguments,
        assessment=classify(tool="im_send", arguments=arguments, declared="high"),
        idempotency_key=key,
        requester=requester,
        **kw,
    )


def _paused_run(bob, bob_agent, org_a) -> tuple[Run, Confirmation]:
    """A real run that reached a high-risk send and waits on its governance confirmation."""
    names = [
        MemberFactory(organization=org_a, display_name=f"Rep {i}").display_name for i in range(6)
    ]
    run = runtime.run_start(
        actor=member_actor(bob), agent=bob_agent, text=f"send price list to {', '.join(names)}"
    )
    assert engine.run_execute(run.pk) == Run.Status.WAITING
    return run, Confirmation.objects.get(run_id=run.pk)


def _decide(client, confirmation, decision="approve", reason=""):
    return client.post(
        reverse("console:confirmation_decide", args=[confirmation.pk]),
        {"decision": decision, "reason": reason},
    )


def test_approving_in_the_console_resumes_the_run_and_the_send_happens_once(
    bob, bob_agent, org_a, browser
):
    run, confirmation = _paused_run(bob, bob_agent, org_a)
    assert bob.pk in confirmation.decider_ids and not AgentMessage.objects.exists()
    client = browser(bob)
    response = _decide(client, confirmation, reason="fine for this list")
    assert response.status_code == 302
    assert response["Location"] == reverse("console:confirmation", args=[confirmation.pk])
    confirmation.refresh_from_db()
    assert confirmation.status == "approved" and confirmation.decided_via == "console"
    assert confirmation.decided_by_id == bob.pk
    assert confirmation.decision_reason == "fine for this list"
    assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    assert engine.run_execute(run.pk) == Run.Status.COMPLETED  # a redelivery changes nothing
    assert AgentMessage.objects.count() == 1
    # A second click (another tab) is refused and sends nothing more.
    again = _decide(client, confirmation)
    assert again.status_code == 409
    assert "already approved" in again.content.decode()
    assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    assert AgentMessage.objects.count() == 1
    assert AuditEvent.objects.filter(action="confirmation.approve").count() == 1


def test_rejecting_in_the_console_resumes_the_run_without_the_send(bob, bob_agent, org_a, browser):
    run, confirmation = _paused_run(bob, bob_agent, org_a)
    assert _decide(browser(bob), confirmation, "reject", "too broad").status_code == 302
    assert engine.run_execute(run.pk) == Run.Status.COMPLETED
    assert not AgentMessage.objects.exists()
    run.refresh_from_db()
    assert "too broad" in run.output["text"]


def test_someone_who_may_not_decide_is_refused(alice, bob, make_member, charlie, browser):
    confirmation = _confirm(bob)  # high risk, no manager: bob alone decides
    assert confirmation.decider_ids == [bob.pk]
    # alice (owner) sees every confirmation but is not one of its deciders
    detail = browser(alice).get(reverse("console:confirmation", args=[confirmation.pk]))
    assert detail.status_code == 200
    assert "You are not one of the people who may decide" in detail.content.decode()
    refused = _decide(browser(alice), confirmation)
    assert refused.status_code == 403
    assert "not one of the people who may decide" in refused.content.decode()
    # a colleague does not even see it; another organization's owner neither
    colleague = make_member(roles=["employee"])
    for outsider in (colleague, charlie):
        client = browser(outsider)
        assert client.get(reverse("console:confirmation", args=[confirmation.pk])).status_code == (
            404
        )
        assert _decide(client, confirmation).status_code == 404
    confirmation.refresh_from_db()
    assert confirmation.status == "pending" and not ConfirmationVote.objects.exists()


def test_a_bad_decision_value_is_a_400(bob, browser):
    confirmation = _confirm(bob)
    assert _decide(browser(bob), confirmation, decision="maybe").status_code == 400
    confirmation.refresh_from_db()
    assert confirmation.status == "pending"


def test_the_detail_says_what_will_happen_and_who_decides(alice, bob, browser):
    bob.manager = alice
    bob.save(update_fields=["manager"])
    confirmation = _confirm(bob)
    page = browser(alice).get(reverse("console:confirmation", args=[confirmation.pk]))
    text = page.content.decode()
    assert "im_send" in text and "Bob&#x27;s agent wants to run im_send" in text
    assert "13812345678" not in text  # arguments are shown masked
    assert "Sends to 2 people." in text  # blast radius, as a sentence
    assert "Alice" in text and "Bob" in text  # requester and who may decide
    assert (
        confirmation.expires_at.astimezone(timezone.get_current_timezone()).strftime("%Y-%m-%d")
        in text
    )
    assert 'value="approve"' in text and 'value="reject"' in text  # alice may decide


def test_the_queue_lists_what_waits_and_offers_the_live_script(alice, bob, browser):
    bob.manager = alice
    bob.save(update_fields=["manager"])
    waiting = _confirm(bob, key="q:1")
    decided = _confirm(bob, key="q:2")
    confirmations.confirmation_decide(
        confirmation=decided, actor=member_actor(bob), decision="reject", via="api"
    )
    client = browser(alice)
    page = client.get(reverse("console:confirmations")).content.decode()
    queue = page[page.index('id="confirmation-queue"') : page.index("Recently decided")]
    assert f'data-confirmation="{waiting.pk}"' in queue
    assert f'data-confirmation="{decided.pk}"' not in queue
    assert "console/confirmations.js" in page and 'data-socket-path="/ws/confirmations/"' in page
    fragment = client.get(reverse("console:confirmations"), {"fragment": "queue"})
    body = fragment.content.decode()
    assert body.startswith('<div id="confirmation-queue">') and "<html" not in body
    assert f'data-confirmation="{waiting.pk}"' in body


def test_a_requester_without_the_decide_permission_reaches_their_own(bob, make_member, browser):
    confirmation = _confirm(bob)
    page = browser(bob).get(reverse("console:confirmations"))
    assert page.status_code == 200
    assert f'data-confirmation="{confirmation.pk}"' in page.content.decode()
    assert (
        browser(make_member(roles=["employee"])).get(reverse("console:confirmations")).status_code
        == 403
    )


def test_history_filters_by_state_and_decider(alice, bob, make_member, browser):
    bob.manager = alice
    bob.save(update_fields=["manager"])
    approved = _confirm(bob, key="h:1")
    rejected = _confirm(bob, key="h:2")
    pending = _confirm(bob, key="h:3")
    confirmations.confirmation_decide(
        confirmation=approved, actor=member_actor(alice), decision="approve", via="console"
    )
    confirmations.confirmation_decide(
        confirmation=rejected, actor=member_actor(bob), decision="reject", via="api"
    )
    client = browser(make_member(roles=["auditor"]))
    url = reverse("console:confirmation_history")

    def listed(**params) -> set[int]:
        page = client.get(url, params).content.decode()
        return {
            c.pk
            for c in (approved, rejected, pending)
            if reverse("console:confirmation", args=[c.pk]) in page
        }

    assert listed() == {approved.pk, rejected.pk, pending.pk}
    assert listed(status="rejected") == {rejected.pk}
    assert listed(decider=alice.pk) == {approved.pk}
    assert listed(status="approved", decider=bob.pk) == set()


def test_the_queue_costs_the_same_queries_however_long_it_is(alice, bob, browser):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    bob.manager = alice
    bob.save(update_fields=["manager"])
    client = browser(alice)
    url = reverse("console:confirmations")
    _confirm(bob, key="n:0")
    client.get(url, {"fragment": "queue"})  # warm the session and permission caches
    with CaptureQueriesContext(connection) as one:
        client.get(url, {"fragment": "queue"})
    for index in range(1, 6):
        _confirm(bob, key=f"n:{index}")
    with CaptureQueriesContext(connection) as six:
        page = client.get(url, {"fragment": "queue"}).content.decode()
    assert page.count("data-confirmation=") == 6
    assert len(six.captured_queries) == len(one.captured_queries)
