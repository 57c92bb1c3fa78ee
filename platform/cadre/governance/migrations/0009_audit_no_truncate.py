"""TRUNCATE of the audit events and of the chain heads is refused too (a statement trigger).

Row triggers never see a TRUNCATE, so 0002's append-only trigger let it empty the table. This
one refuses it whoever runs it, except a role that could disable the trigger anyway (the
table's owner or a superuser) and says so for its session with
`SET cadre.audit_truncate = 'allow'` — what the test suite's database does, to reset tables
between tests. The application's role owns nothing and has no TRUNCATE privilege either
(cadre.runtime.database_roles).
"""

from django.db import migrations

SQL = """
CREATE OR REPLACE FUNCTION cadre_audit_no_truncate() RETURNS trigger AS $$
BEGIN
    IF current_setting('cadre.audit_truncate', true) = 'allow'
        AND pg_has_role(
            current_user, (SELECT relowner FROM pg_class WHERE oid = TG_RELID), 'USAGE'
        )
    THEN
        RETURN NULL;
    END IF;
    RAISE EXCEPTION 'audit events are append-only (TRUNCATE of % refused)', TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER governance_auditevent_no_truncate
    BEFORE TRUNCATE ON governance_auditevent
    FOR EACH STATEMENT EXECUTE FUNCTION cadre_audit_no_truncate();
CREATE TRIGGER governance_auditchainhead_no_truncate
    BEFORE TRUNCATE ON governance_auditchainhead
    FOR EACH STATEMENT EXECUTE FUNCTION cadre_audit_no_truncate();
"""

REVERSE = """
DROP TRIGGER IF EXISTS governance_auditchainhead_no_truncate ON governance_auditchainhead;
DROP TRIGGER IF EXISTS governance_auditevent_no_truncate ON governance_auditevent;
DROP FUNCTION IF EXISTS cadre_audit_no_truncate();
"""


class Migration(migrations.Migration):
    dependencies = [("governance", "0008_remove_policychain_template")]
    operations = [migrations.RunSQL(SQL, REVERSE)]
