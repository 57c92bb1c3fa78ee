"""Template versions link their template chain (`policy_chain`, pointing down into governance):
every version of a template gets the chain that was stored for the template. The unused
`governance_policy_ref` text goes."""

import django.db.models.deletion
from django.db import migrations, models


def links_from_chains(apps, schema_editor):
    PolicyChain = apps.get_model("governance", "PolicyChain")
    TemplateVersion = apps.get_model("agents", "TemplateVersion")
    for chain in PolicyChain.objects.filter(template__isnull=False):
        TemplateVersion.objects.filter(template_id=chain.template_id).update(policy_chain=chain)


def chains_from_links(apps, schema_editor):
    PolicyChain = apps.get_model("governance", "PolicyChain")
    TemplateVersion = apps.get_model("agents", "TemplateVersion")
    linked = TemplateVersion.objects.filter(policy_chain__isnull=False)
    for template_id, chain_id in linked.values_list("template_id", "policy_chain_id").distinct():
        PolicyChain.objects.filter(pk=chain_id).update(template_id=template_id)


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0002_agent_subscriptions"),
        ("governance", "0007_policychain_scope"),
    ]

    operations = [
        migrations.AddField(
            model_name="templateversion",
            name="policy_chain",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to="governance.policychain",
            ),
        ),
        migrations.RunPython(links_from_chains, chains_from_links),
        migrations.RemoveField(model_name="templateversion", name="governance_policy_ref"),
    ]
