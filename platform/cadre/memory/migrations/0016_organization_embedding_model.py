"""Each organization's own embedding model: `OrganizationEmbeddingModel` records which model an
organization's search uses (`active`, one per organization), which ones its re-embeds fill
(`building`) and which it left (`retired`). The models and the memories' vectors stay the
instance's (a vector is per memory and model, whoever owns the memory).

Existing installs: every existing organization gets the model that was active for the whole
installation, as its own active one, and the instance's building and retired models with the
same status (a re-embed in progress keeps filling them, a held switch stays possible). The
instance-wide status columns are dropped in 0017 (a separate migration: PostgreSQL refuses to
alter a table while the rows inserted here still have pending foreign-key checks)."""

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


def copy_status_to_every_organization(apps, schema_editor):
    EmbeddingModel = apps.get_model("memory", "EmbeddingModel")
    OrganizationEmbeddingModel = apps.get_model("memory", "OrganizationEmbeddingModel")
    Organization = apps.get_model("tenancy", "Organization")
    models_by_status = list(EmbeddingModel.objects.order_by("pk"))
    rows = [
        OrganizationEmbeddingModel(
            organization_id=organization_id,
            model_id=model.pk,
            status=model.status,
            activated_at=model.activated_at,
        )
        for organization_id in Organization.objects.values_list("pk", flat=True)
        for model in models_by_status
    ]
    OrganizationEmbeddingModel.objects.bulk_create(rows, ignore_conflicts=True)


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0015_memory_verification"),
        ("tenancy", "0007_saml_sso_sessions"),
    ]

    operations = [
        migrations.CreateModel(
            name="OrganizationEmbeddingModel",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "status",
                    models.CharField(
                        choices=[
                            ("building", "Building (re-embedding in progress)"),
                            ("active", "Active"),
                            ("retired", "Retired"),
                        ],
                        default="building",
                        max_length=16,
                    ),
                ),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                ("activated_at", models.DateTimeField(blank=True, null=True)),
                (
                    "model",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="uses",
                        to="memory.embeddingmodel",
                    ),
                ),
                (
                    "organization",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="tenancy.organization",
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(
                        models.F("organization"),
                        models.F("model"),
                        name="orgembeddingmodel_unique_model",
                    ),
                    models.UniqueConstraint(
                        models.F("organization"),
                        condition=models.Q(("status", "active")),
                        name="orgembeddingmodel_one_active",
                    ),
                ],
            },
        ),
        migrations.RunPython(copy_status_to_every_organization, migrations.RunPython.noop),
    ]
