import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("connectors", "0002_alter_connector_platform"),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="outboundmessage",
            name="outboundmessage_unique_key",
        ),
        migrations.RenameModel(
            old_name="OutboundMessage",
            new_name="Delivery",
        ),
        migrations.AlterField(
            model_name="delivery",
            name="connector",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="deliveries",
                to="connectors.connector",
            ),
        ),
        migrations.AddConstraint(
            model_name="delivery",
            constraint=models.UniqueConstraint(
                "connector", "idempotency_key", name="delivery_unique_key"
            ),
        ),
    ]
