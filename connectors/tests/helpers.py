"""Arranging connector tests: connectors with fake-API settings, signed webhook posts."""

from __future__ import annotations

import json
import time

from cadre.agents import services as agent_services
from cadre.agents.models import Run
from cadre.tenancy.actors import member_actor
from connectors.base import services
from connectors.models import Connector, Delivery, InboundEvent
from tests.factories import PositionFactory
from tests.refusals import nothing_changes


def make_connector(
    owner, platform: str, credentials: dict, settings: dict | None = None, name: str = ""
) -> Connector:
    return services.connector_create(
        actor=member_actor(owner),
        platform=platform,
        name=name or f"{platform} test",
        credentials=credentials,
        settings=settings or {},
    )


SALES_TOOLS = {
    "im_send": {"risk": "medium", "confirmation": "high_risk"},
    "task_create": {"risk": "low", "confirmation": "never"},
}


def sales_agent(owner, member):
    """`member`'s agent, deployed by `owner` from a published template to a Sales position,
    reachable on every platform, on the offline model."""
    actor = member_actor(owner)
    sales = PositionFactory(organization=owner.organization, name="Sales", code="sales")
    member.positions.add(sales)
    template = agent_services.template_create(
        actor=actor,
        name="Sales assistant",
        code="sales-assistant",
        agent_md="# Persona\nYou help sell.",
        sop="# SOP\nBe brief.",
        user_md_template="# About {{member.display_name}}",
        tool_permissions=SALES_TOOLS,
        model_settings={"provider": "offline", "model": "offline-1", "budget": {"max_steps": 6}},
        memory_policy={"read_scopes": ["agent"], "write_scopes": ["agent"]},
        hooks={"assemble_context": [{"name": "memory_retrieval", "enabled": False}]},
    )
    version = template.versions.get()
    agent_services.version_submit(actor=actor, version=version)
    agent_services.version_publish(actor=actor, version=version, reason="ready")
    deployment = agent_services.deployment_create(
        actor=actor,
        name="Sales agents",
        template=template,
        positions=[sales],
        channels=["console", "feishu", "wecom", "dingtalk", "slack", "webhook"],
    )
    return deployment.agents.get(member=member)


def nothing_received(**options):
    """A refused inbound request stores no event, starts no run and sends nothing back."""
    return nothing_changes(InboundEvent, Delivery, Run, **options)


def webhook_post(
    client,
    connector,
    event: dict,
    *,
    secret: str = "whsec-test",
    timestamp: int | None = None,
    signature: str | None = None,
):
    from connectors.webhook.inbound import sign

    body = json.dumps(event).encode()
    ts = str(int(time.time()) if timestamp is None else timestamp)
    headers = {
        "HTTP_X_CADRE_TIMESTAMP": ts,
        "HTTP_X_CADRE_SIGNATURE": signature or sign(secret, ts, body),
    }
    return client.post(
        connector.callback_path, data=body, content_type="application/json", **headers
    )
