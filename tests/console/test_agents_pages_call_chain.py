# ruff: noqa: F811 - the fixtures imported from tests.agents are parameters here
"""A run's call chain in the console: the page (input → policy → model and tool calls →
confirmation → reply, then the delegated run under one trace id), who may open it, and the
links to it from the transcript, the audit log and the confirmation page."""

from __future__ import annotations

import pytest
from django.urls import reverse
from opentelemetry import trace

from cadre.agents.models import Run
from cadre.governance import audit
from cadre.governance.models import AuditEvent, Confirmation
from cadre.tenancy.actors import member_actor
from tests.agents import conftest as _agents
from tests.agents.test_call_chain import delegated, drain  # noqa: F401 - fixture
from tests.console.test_governance_pages_confirmations import _paused_run

pytestmark = pytest.mark.django_db

owner, sales, template = _agents.owner, _agents.sales, _agents.template
published, deployment, bob_agent = _agents.published, _agents.deployment, _agents.bob_agent


def _page(client, run) -> str:
    response = client.get(reverse("console:run_call_chain", args=[run.pk]))
    assert response.status_code == 200
    return response.content.decode()


def test_the_page_shows_the_chain_in_order_and_the_delegated_run(alice, browser, delegated):
    page = _page(browser(alice), delegated)
    child = Run.objects.get(parent=delegated)
    assert delegated.trace_id in page
    first, second = page.index(f'id="run-{delegated.pk}"'), page.index(f'id="run-{child.pk}"')
    assert first < second
    own = page[first:second]
    kinds = [own.index(f'data-kind="{kind}"') for kind in ("inbound", "model_call", "reply")]
    assert kinds == sorted(kinds)
    assert 'data-kind="tool_call"' in own
    assert "what is the standard discount?" in page[second:]
    assert f'delegated by <a href="#run-{delegated.pk}">' in page
    assert reverse("console:session", args=[delegated.session_id]) in own


def test_member_sees_their_run_and_others_get_404(bob, charlie, make_member, browser, delegated):
    page = _page(browser(bob), delegated)
    assert "1 more you may not see" in page
    url = reverse("console:run_call_chain", args=[delegated.pk])
    assert browser(make_member(roles=["employee"])).get(url).status_code == 404
    assert browser(charlie).get(url).status_code == 404


def test_the_transcript_and_the_audit_log_link_to_the_call_chain(alice, browser, delegated):
    client = browser(alice)
    url = reverse("console:run_call_chain", args=[delegated.pk])
    session = client.get(reverse("console:session", args=[delegated.session_id])).content
    assert url in session.decode()
    # The hop is about the child run: its link opens that run's chain.
    hop = AuditEvent.objects.get(action="agent.delegate")
    child = Run.objects.get(parent=delegated)
    assert (hop.target_type, hop.target_id) == ("run", str(child.pk))
    child_url = reverse("console:run_call_chain", args=[child.pk])
    listing = client.get(reverse("console:audit"), {"action": "agent.delegate"}).content.decode()
    assert child_url in listing
    assert child_url in client.get(reverse("console:audit_event", args=[hop.pk])).content.decode()
    # An event that carries only the run's trace id (a tool's write inside the run) opens the
    # trace's first run.
    span = trace.SpanContext(
        trace_id=int(delegated.trace_id, 16),
        span_id=1,
        is_remote=False,
        trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED),
    )
    with trace.use_span(trace.NonRecordingSpan(span)):
        event = audit.record(actor=member_actor(alice), action="task.create", target=("task", "7"))
    assert event.trace_id == delegated.trace_id
    assert url in client.get(reverse("console:audit_event", args=[event.pk])).content.decode()
    listing = client.get(reverse("console:audit"), {"action": "task."}).content.decode()
    assert url in listing


def test_the_confirmation_page_links_to_the_call_chain(bob, bob_agent, org_a, alice, browser):
    run, confirmation = _paused_run(bob, bob_agent, org_a)
    url = reverse("console:run_call_chain", args=[run.pk])
    detail = reverse("console:confirmation", args=[confirmation.pk])
    assert url in browser(alice).get(detail).content.decode()
    page = _page(browser(alice), run)
    assert 'data-kind="confirmation"' in page and detail in page
    assert Confirmation.objects.filter(run_id=run.pk).count() == 1
