"""The embedding model's instance-wide status and activation time are gone: which model is
active, building or retired is each organization's (`OrganizationEmbeddingModel`, 0016)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0016_organization_embedding_model"),
    ]

    operations = [
        migrations.RemoveField(model_name="embeddingmodel", name="activated_at"),
        migrations.RemoveField(model_name="embeddingmodel", name="status"),
    ]
