"""PolicyChain no longer points up at agents: template versions link their chain (agents
0003 carried the links over). One organization chain per organization."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("governance", "0007_policychain_scope"),
        ("agents", "0003_templateversion_policy_chain"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="policychain",
            options={"ordering": ["organization", "scope", "pk"]},
        ),
        migrations.RemoveConstraint(model_name="policychain", name="policychain_unique_scope"),
        migrations.RemoveField(model_name="policychain", name="template"),
        migrations.AddConstraint(
            model_name="policychain",
            constraint=models.UniqueConstraint(
                "organization",
                condition=models.Q(scope="organization"),
                name="policychain_one_per_organization",
            ),
        ),
    ]
