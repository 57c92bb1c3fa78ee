"""Context record items carry their memory's reader columns and kind: filled by a trigger
before each insert (whatever Python sent), copied again when a memory changes them, filled
here. The usage rollup's item-update trigger now skips updates that change none of what it
counts (these copies), instead of recounting the memories."""

from django.db import migrations, models

FORWARD = """
CREATE OR REPLACE FUNCTION memory_context_item_reader() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    SELECT m.scope, m.scope_key, coalesce(m.subject_id, 0), m.kind
    INTO NEW.scope, NEW.scope_key, NEW.subject_id, NEW.kind
    FROM memory_memory m WHERE m.id = NEW.memory_id;
    RETURN NEW;
END $$;

CREATE OR REPLACE FUNCTION memory_context_items_memories_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE memory_contextrecorditem i
    SET scope = n.scope, scope_key = n.scope_key, subject_id = coalesce(n.subject_id, 0),
        kind = n.kind
    FROM old_memories o JOIN new_memories n ON n.id = o.id
    WHERE i.memory_id = n.id
      AND (o.scope, o.scope_key, o.subject_id, o.kind)
          IS DISTINCT FROM (n.scope, n.scope_key, n.subject_id, n.kind);
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION memory_usage_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (
        SELECT 1 FROM removed_items o JOIN added_items n ON n.id = o.id
        WHERE (o.context_id, o.memory_id, o.status) IS DISTINCT FROM
              (n.context_id, n.memory_id, n.status)
    ) THEN
        RETURN NULL;  -- e.g. the reader columns copied from a memory that changed them
    END IF;
    PERFORM memory_usage_recount(ARRAY(
        SELECT memory_id FROM removed_items UNION SELECT memory_id FROM added_items
    ));
    RETURN NULL;
END $$;

CREATE TRIGGER memory_context_item_reader_on_insert BEFORE INSERT ON memory_contextrecorditem
    FOR EACH ROW EXECUTE FUNCTION memory_context_item_reader();
CREATE TRIGGER memory_context_items_on_memory_update AFTER UPDATE ON memory_memory
    REFERENCING OLD TABLE AS old_memories NEW TABLE AS new_memories
    FOR EACH STATEMENT EXECUTE FUNCTION memory_context_items_memories_changed();

-- Copies only: the guarded item-update trigger above does not recount for them.
UPDATE memory_contextrecorditem i
SET scope = m.scope, scope_key = m.scope_key, subject_id = coalesce(m.subject_id, 0),
    kind = m.kind
FROM memory_memory m WHERE m.id = i.memory_id;
"""

# Back to migration 0008's item-update function (the columns go with the fields).
BACKWARD = """
DROP TRIGGER IF EXISTS memory_context_items_on_memory_update ON memory_memory;
DROP TRIGGER IF EXISTS memory_context_item_reader_on_insert ON memory_contextrecorditem;
DROP FUNCTION IF EXISTS memory_context_items_memories_changed();
DROP FUNCTION IF EXISTS memory_context_item_reader();
CREATE OR REPLACE FUNCTION memory_usage_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM memory_usage_recount(ARRAY(
        SELECT memory_id FROM removed_items UNION SELECT memory_id FROM added_items
    ));
    RETURN NULL;
END $$;
"""


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0012_memory_activity_by_scope"),
    ]

    operations = [
        migrations.AddField(
            model_name="contextrecorditem",
            name="kind",
            field=models.CharField(blank=True, editable=False, max_length=20),
        ),
        migrations.AddField(
            model_name="contextrecorditem",
            name="scope",
            field=models.CharField(blank=True, editable=False, max_length=16),
        ),
        migrations.AddField(
            model_name="contextrecorditem",
            name="scope_key",
            field=models.CharField(blank=True, editable=False, max_length=48),
        ),
        migrations.AddField(
            model_name="contextrecorditem",
            name="subject_id",
            field=models.BigIntegerField(default=0, editable=False),
        ),
        migrations.RunSQL(FORWARD, BACKWARD),
    ]
