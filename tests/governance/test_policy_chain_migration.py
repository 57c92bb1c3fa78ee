"""The migration that moves a template's chain link onto its versions: a chain stored for a
template (PolicyChain.template) becomes the `policy_chain` of every version of that template,
and the organization's chain keeps scope `organization`."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [
    ("governance", "0006_auditevent_organization_no_own_index"),
    ("agents", "0002_agent_subscriptions"),
]
AFTER = [
    ("governance", "0008_remove_policychain_template"),
    ("agents", "0003_templateversion_policy_chain"),
]


@pytest.mark.django_db(transaction=True)
def test_template_chains_become_the_versions_policy_chain():
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    old = executor.loader.project_state(BEFORE).apps
    organization = old.get_model("tenancy", "Organization").objects.create(name="Acme", slug="acme")
    Template = old.get_model("agents", "AgentTemplate")
    Version = old.get_model("agents", "TemplateVersion")
    Chain = old.get_model("governance", "PolicyChain")
    sales = Template.objects.create(organization=organization, name="Sales", code="sales")
    support = Template.objects.create(organization=organization, name="Support", code="support")
    for template in (sales, support):
        for number in (1, 2):
            Version.objects.create(
                organization=organization, template=template, number=number, name=template.name
            )
    organization_chain = Chain.objects.create(organization=organization, plugins=[], version=3)
    sales_chain = Chain.objects.create(
        organization=organization, template=sales, plugins=[{"plugin": "masking"}], version=2
    )

    executor = MigrationExecutor(connection)
    executor.migrate(AFTER)
    new = executor.loader.project_state(AFTER).apps
    Version = new.get_model("agents", "TemplateVersion")
    Chain = new.get_model("governance", "PolicyChain")
    assert set(
        Version.objects.filter(template_id=sales.pk).values_list("policy_chain", flat=True)
    ) == {sales_chain.pk}
    assert set(
        Version.objects.filter(template_id=support.pk).values_list("policy_chain", flat=True)
    ) == {None}
    assert Chain.objects.get(pk=organization_chain.pk).scope == "organization"
    assert Chain.objects.get(pk=sales_chain.pk).scope == "template"

    MigrationExecutor(connection).migrate(executor.loader.graph.leaf_nodes())
