#!/bin/sh
# Creates (or updates) Cadre's application role in the compose file's PostgreSQL, as the
# superuser; run by the one-shot `db-roles` service on every `up`, so it also brings an existing
# database volume to two roles and applies a changed POSTGRES_APP_PASSWORD.
#
# The role owns nothing, inherits nothing and creates nothing: the database's owner (`cadre`,
# which `migrate` connects as through DATABASE_OWNER_URL) grants it row privileges after every
# migrate (platform/cadre/runtime/database_roles.py), as `make up` does with `cadre_app`.
# Reads PGHOST, PGUSER, PGPASSWORD, PGDATABASE, CADRE_APP_ROLE and POSTGRES_APP_PASSWORD.
set -eu
: "${CADRE_APP_ROLE:?}" "${POSTGRES_APP_PASSWORD:?}"
psql --no-psqlrc --quiet -v ON_ERROR_STOP=1 \
    -v app_role="$CADRE_APP_ROLE" -v app_password="$POSTGRES_APP_PASSWORD" <<'SQL'
SELECT format(
    'CREATE ROLE %I LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOREPLICATION NOBYPASSRLS',
    :'app_role'
) WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'app_role') \gexec
-- The same attributes on a role that already existed; a password, which the server stores hashed.
SELECT format(
    'ALTER ROLE %I LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOREPLICATION NOBYPASSRLS PASSWORD %L',
    :'app_role', :'app_password'
) \gexec
-- An application role that owned objects could disable the audit triggers: refuse to go on.
SELECT set_config('cadre.app_role', :'app_role', false) \gset
DO $$
BEGIN
    IF EXISTS (
        SELECT FROM pg_class c JOIN pg_roles r ON r.oid = c.relowner
        WHERE r.rolname = current_setting('cadre.app_role', true)
    ) THEN
        RAISE EXCEPTION 'the application role owns tables: reassign them to the owner first';
    END IF;
END $$;
SQL
