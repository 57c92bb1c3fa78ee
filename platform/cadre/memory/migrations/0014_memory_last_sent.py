"""When each memory was last sent to a model call (MemoryLastSent), with its reader columns,
kind, status and creation time: rows added, updated and removed with the memories by triggers
on memory_memory, `last_sent` taken from the usage rollup by a trigger on it; filled here."""

import django.db.models.deletion
from django.db import migrations, models

FORWARD = """
CREATE OR REPLACE FUNCTION memory_last_sent_added() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO memory_memorylastsent
        (memory_id, organization_id, scope, scope_key, subject_id, kind, status, created_at)
    SELECT id, organization_id, scope, scope_key, coalesce(subject_id, 0), kind, status,
           created_at
    FROM added_memories;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION memory_last_sent_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE memory_memorylastsent l
    SET organization_id = n.organization_id, scope = n.scope, scope_key = n.scope_key,
        subject_id = coalesce(n.subject_id, 0), kind = n.kind, status = n.status,
        created_at = n.created_at
    FROM old_memories o JOIN new_memories n ON n.id = o.id
    WHERE l.memory_id = n.id
      AND (o.organization_id, o.scope, o.scope_key, o.subject_id, o.kind, o.status,
           o.created_at)
          IS DISTINCT FROM
          (n.organization_id, n.scope, n.scope_key, n.subject_id, n.kind, n.status,
           n.created_at);
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION memory_last_sent_removed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM memory_memorylastsent WHERE memory_id IN (SELECT id FROM removed_memories);
    RETURN NULL;
END $$;

-- The newest send of each memory whose usage rows changed, from those rows.
CREATE OR REPLACE FUNCTION memory_last_sent_retake(memory_ids bigint[]) RETURNS void
LANGUAGE sql AS $$
    UPDATE memory_memorylastsent l
    SET last_sent = (SELECT max(u.last_sent) FROM memory_memoryusageday u
                     WHERE u.memory_id = l.memory_id)
    WHERE l.memory_id = ANY(memory_ids);
$$;

CREATE OR REPLACE FUNCTION memory_last_sent_usage_added() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM memory_last_sent_retake(ARRAY(SELECT DISTINCT memory_id FROM added_usage));
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION memory_last_sent_usage_removed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM memory_last_sent_retake(ARRAY(SELECT DISTINCT memory_id FROM removed_usage));
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION memory_last_sent_usage_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM memory_last_sent_retake(ARRAY(
        SELECT o.memory_id FROM removed_usage o JOIN added_usage n ON n.id = o.id
        WHERE (o.memory_id, o.last_sent) IS DISTINCT FROM (n.memory_id, n.last_sent)
        UNION SELECT n.memory_id FROM removed_usage o JOIN added_usage n ON n.id = o.id
        WHERE (o.memory_id, o.last_sent) IS DISTINCT FROM (n.memory_id, n.last_sent)
    ));
    RETURN NULL;
END $$;

CREATE TRIGGER memory_last_sent_on_insert AFTER INSERT ON memory_memory
    REFERENCING NEW TABLE AS added_memories
    FOR EACH STATEMENT EXECUTE FUNCTION memory_last_sent_added();
CREATE TRIGGER memory_last_sent_on_update AFTER UPDATE ON memory_memory
    REFERENCING OLD TABLE AS old_memories NEW TABLE AS new_memories
    FOR EACH STATEMENT EXECUTE FUNCTION memory_last_sent_changed();
CREATE TRIGGER memory_last_sent_on_delete AFTER DELETE ON memory_memory
    REFERENCING OLD TABLE AS removed_memories
    FOR EACH STATEMENT EXECUTE FUNCTION memory_last_sent_removed();
CREATE TRIGGER memory_last_sent_on_usage_insert AFTER INSERT ON memory_memoryusageday
    REFERENCING NEW TABLE AS added_usage
    FOR EACH STATEMENT EXECUTE FUNCTION memory_last_sent_usage_added();
CREATE TRIGGER memory_last_sent_on_usage_delete AFTER DELETE ON memory_memoryusageday
    REFERENCING OLD TABLE AS removed_usage
    FOR EACH STATEMENT EXECUTE FUNCTION memory_last_sent_usage_removed();
CREATE TRIGGER memory_last_sent_on_usage_update AFTER UPDATE ON memory_memoryusageday
    REFERENCING OLD TABLE AS removed_usage NEW TABLE AS added_usage
    FOR EACH STATEMENT EXECUTE FUNCTION memory_last_sent_usage_changed();

INSERT INTO memory_memorylastsent
    (memory_id, organization_id, scope, scope_key, subject_id, kind, status, created_at,
     last_sent)
SELECT m.id, m.organization_id, m.scope, m.scope_key, coalesce(m.subject_id, 0), m.kind,
       m.status, m.created_at, u.last_sent
FROM memory_memory m
LEFT JOIN (SELECT memory_id, max(last_sent) AS last_sent FROM memory_memoryusageday
           GROUP BY memory_id) u ON u.memory_id = m.id;
"""

BACKWARD = """
DROP TRIGGER IF EXISTS memory_last_sent_on_usage_update ON memory_memoryusageday;
DROP TRIGGER IF EXISTS memory_last_sent_on_usage_delete ON memory_memoryusageday;
DROP TRIGGER IF EXISTS memory_last_sent_on_usage_insert ON memory_memoryusageday;
DROP TRIGGER IF EXISTS memory_last_sent_on_delete ON memory_memory;
DROP TRIGGER IF EXISTS memory_last_sent_on_update ON memory_memory;
DROP TRIGGER IF EXISTS memory_last_sent_on_insert ON memory_memory;
DROP FUNCTION IF EXISTS memory_last_sent_usage_changed();
DROP FUNCTION IF EXISTS memory_last_sent_usage_removed();
DROP FUNCTION IF EXISTS memory_last_sent_usage_added();
DROP FUNCTION IF EXISTS memory_last_sent_retake(bigint[]);
DROP FUNCTION IF EXISTS memory_last_sent_removed();
DROP FUNCTION IF EXISTS memory_last_sent_changed();
DROP FUNCTION IF EXISTS memory_last_sent_added();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0013_context_item_reader_columns"),
        ("tenancy", "0007_saml_sso_sessions"),
    ]

    operations = [
        migrations.CreateModel(
            name="MemoryLastSent",
            fields=[
                (
                    "memory",
                    models.OneToOneField(
                        db_constraint=False,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        primary_key=True,
                        related_name="+",
                        serialize=False,
                        to="memory.memory",
                    ),
                ),
                ("scope", models.CharField(max_length=16)),
                ("scope_key", models.CharField(max_length=48)),
                ("subject_id", models.BigIntegerField(default=0)),
                ("kind", models.CharField(max_length=20)),
                ("status", models.CharField(max_length=16)),
                ("created_at", models.DateTimeField()),
                ("last_sent", models.DateTimeField(blank=True, null=True)),
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
                    models.Index(
                        fields=["organization", "status", "created_at"],
                        include=("scope", "scope_key", "subject_id", "kind", "last_sent"),
                        name="memory_last_sent_idx",
                    )
                ],
            },
        ),
        migrations.RunSQL(FORWARD, BACKWARD),
    ]
