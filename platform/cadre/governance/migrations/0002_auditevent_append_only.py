"""Make audit events append-only in the database too: UPDATE and DELETE raise.

TRUNCATE (used by test isolation and by nothing in the product) is not a row operation and is
not blocked. A superuser can still bypass triggers (session_replication_role = replica); the
hash chain and `audit_verify` catch that.
"""

from django.db import migrations

SQL = """
CREATE OR REPLACE FUNCTION cadre_audit_append_only() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'audit events are append-only (% refused)', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER governance_auditevent_append_only
    BEFORE UPDATE OR DELETE ON governance_auditevent
    FOR EACH ROW EXECUTE FUNCTION cadre_audit_append_only();
"""

REVERSE = """
DROP TRIGGER IF EXISTS governance_auditevent_append_only ON governance_auditevent;
DROP FUNCTION IF EXISTS cadre_audit_append_only();
"""


class Migration(migrations.Migration):
    dependencies = [("governance", "0001_initial")]
    operations = [migrations.RunSQL(SQL, REVERSE)]
