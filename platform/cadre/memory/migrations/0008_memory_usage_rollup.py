"""The per-day usage rollup the heatmap reads (kept by triggers on the context record items,
backfilled here), the packed map points, and the indexes the viewer's queries use."""

import django.db.models.deletion
from django.db import migrations, models

# One statement per write of items: an insert adds its counts; a delete or an update
# recounts every day of the memories it touched from the items left (exact, whatever the
# order a cascade deletes in). A changed record (day, kind) recounts its items' memories.
FORWARD = """
CREATE OR REPLACE FUNCTION memory_usage_recount(memory_ids bigint[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM memory_memoryusageday WHERE memory_id = ANY(memory_ids);
    INSERT INTO memory_memoryusageday
        (organization_id, memory_id, day, retrieved, sent, last_used, last_sent)
    SELECT min(r.organization_id), i.memory_id, (r.created_at AT TIME ZONE 'UTC')::date,
           count(*),
           count(*) FILTER (WHERE i.status = 'sent' AND r.kind = 'model_call'),
           max(r.created_at),
           max(r.created_at) FILTER (WHERE i.status = 'sent' AND r.kind = 'model_call')
    FROM memory_contextrecorditem i
    JOIN memory_contextrecord r ON r.id = i.context_id
    WHERE i.memory_id = ANY(memory_ids)
    GROUP BY i.memory_id, (r.created_at AT TIME ZONE 'UTC')::date;
END $$;

CREATE OR REPLACE FUNCTION memory_usage_added() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO memory_memoryusageday
        (organization_id, memory_id, day, retrieved, sent, last_used, last_sent)
    SELECT min(r.organization_id), i.memory_id, (r.created_at AT TIME ZONE 'UTC')::date,
           count(*),
           count(*) FILTER (WHERE i.status = 'sent' AND r.kind = 'model_call'),
           max(r.created_at),
           max(r.created_at) FILTER (WHERE i.status = 'sent' AND r.kind = 'model_call')
    FROM added_items i
    JOIN memory_contextrecord r ON r.id = i.context_id
    GROUP BY i.memory_id, (r.created_at AT TIME ZONE 'UTC')::date
    ON CONFLICT (memory_id, day) DO UPDATE SET
        retrieved = memory_memoryusageday.retrieved + EXCLUDED.retrieved,
        sent = memory_memoryusageday.sent + EXCLUDED.sent,
        last_used = GREATEST(memory_memoryusageday.last_used, EXCLUDED.last_used),
        last_sent = GREATEST(memory_memoryusageday.last_sent, EXCLUDED.last_sent);
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION memory_usage_removed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM memory_usage_recount(ARRAY(SELECT DISTINCT memory_id FROM removed_items));
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION memory_usage_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM memory_usage_recount(ARRAY(
        SELECT memory_id FROM removed_items UNION SELECT memory_id FROM added_items
    ));
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION memory_usage_record_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM memory_usage_recount(ARRAY(
        SELECT DISTINCT i.memory_id FROM memory_contextrecorditem i
        WHERE i.context_id IN (SELECT id FROM added_records)
    ));
    RETURN NULL;
END $$;

CREATE TRIGGER memory_usage_on_insert AFTER INSERT ON memory_contextrecorditem
    REFERENCING NEW TABLE AS added_items
    FOR EACH STATEMENT EXECUTE FUNCTION memory_usage_added();
CREATE TRIGGER memory_usage_on_delete AFTER DELETE ON memory_contextrecorditem
    REFERENCING OLD TABLE AS removed_items
    FOR EACH STATEMENT EXECUTE FUNCTION memory_usage_removed();
CREATE TRIGGER memory_usage_on_update AFTER UPDATE ON memory_contextrecorditem
    REFERENCING OLD TABLE AS removed_items NEW TABLE AS added_items
    FOR EACH STATEMENT EXECUTE FUNCTION memory_usage_changed();
CREATE TRIGGER memory_usage_on_record_update AFTER UPDATE ON memory_contextrecord
    REFERENCING NEW TABLE AS added_records
    FOR EACH STATEMENT EXECUTE FUNCTION memory_usage_record_changed();

INSERT INTO memory_memoryusageday
    (organization_id, memory_id, day, retrieved, sent, last_used, last_sent)
SELECT min(r.organization_id), i.memory_id, (r.created_at AT TIME ZONE 'UTC')::date,
       count(*),
       count(*) FILTER (WHERE i.status = 'sent' AND r.kind = 'model_call'),
       max(r.created_at),
       max(r.created_at) FILTER (WHERE i.status = 'sent' AND r.kind = 'model_call')
FROM memory_contextrecorditem i
JOIN memory_contextrecord r ON r.id = i.context_id
GROUP BY i.memory_id, (r.created_at AT TIME ZONE 'UTC')::date;
"""

BACKWARD = """
DROP TRIGGER IF EXISTS memory_usage_on_record_update ON memory_contextrecord;
DROP TRIGGER IF EXISTS memory_usage_on_update ON memory_contextrecorditem;
DROP TRIGGER IF EXISTS memory_usage_on_delete ON memory_contextrecorditem;
DROP TRIGGER IF EXISTS memory_usage_on_insert ON memory_contextrecorditem;
DROP FUNCTION IF EXISTS memory_usage_record_changed();
DROP FUNCTION IF EXISTS memory_usage_changed();
DROP FUNCTION IF EXISTS memory_usage_removed();
DROP FUNCTION IF EXISTS memory_usage_added();
DROP FUNCTION IF EXISTS memory_usage_recount(bigint[]);
"""


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0007_context_passed_over"),
        ("tenancy", "0005_ssoidentity"),
    ]

    operations = [
        migrations.CreateModel(
            name="MemoryUsageDay",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("day", models.DateField()),
                ("retrieved", models.PositiveIntegerField(default=0)),
                ("sent", models.PositiveIntegerField(default=0)),
                ("last_used", models.DateTimeField()),
                ("last_sent", models.DateTimeField(blank=True, null=True)),
                (
                    "memory",
                    models.ForeignKey(
                        db_constraint=False,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to="memory.memory",
                    ),
                ),
                (
                    "organization",
                    models.ForeignKey(
                        db_constraint=False,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to="tenancy.organization",
                    ),
                ),
            ],
            options={
                "indexes": [
                    models.Index(fields=["organization", "day"], name="memoryusageday_org_day")
                ],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("memory", "day"), name="memoryusageday_unique_day"
                    )
                ],
            },
        ),
        migrations.AddField(
            model_name="memorymap",
            name="points_data",
            field=models.BinaryField(blank=True, default=b""),
        ),
        migrations.RunSQL(FORWARD, BACKWARD),
    ]
