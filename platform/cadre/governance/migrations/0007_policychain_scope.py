"""Policy chains get a scope: the organization's own chain, or a template chain that role
template versions link to (agents 0003 moves the links onto the versions; 0008 drops
PolicyChain.template)."""

from django.db import migrations, models


def scope_from_template(apps, schema_editor):
    PolicyChain = apps.get_model("governance", "PolicyChain")
    PolicyChain.objects.filter(template__isnull=False).update(scope="template")


class Migration(migrations.Migration):
    dependencies = [
        ("governance", "0006_auditevent_organization_no_own_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="policychain",
            name="scope",
            field=models.CharField(
                choices=[("organization", "Organization"), ("template", "Template")],
                default="organization",
                max_length=16,
            ),
        ),
        migrations.RunPython(scope_from_template, migrations.RunPython.noop),
    ]
