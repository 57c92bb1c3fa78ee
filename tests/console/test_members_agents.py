# ruff: noqa: F811 - the fixtures imported from tests.console.agents_setup are parameters here
"""A member's page lists the agents dispatched to them, as far as the viewer may see agents."""

from __future__ import annotations

from django.urls import reverse

from tests.console.agents_setup import (  # noqa: F401 - fixtures
    bob_agent,
    client,
    deployment,
    owner,
    published,
    sales,
    template,
)


def test_member_page_lists_the_members_agents_with_their_deployment(alice, bob, bob_agent):
    page = client(alice).get(reverse("console:member", args=[bob.pk])).content.decode()
    assert reverse("console:agent", args=[bob_agent.pk]) in page
    assert reverse("console:deployment", args=[bob_agent.deployment_id]) in page
    assert "once deployments are available" not in page


def test_member_without_agents_says_so(alice, make_member):
    carol = make_member(display_name="Carol")
    page = client(alice).get(reverse("console:member", args=[carol.pk])).content.decode()
    assert "No agent has been dispatched to Carol." in page
