#!/bin/sh
# Prepares the compose file's object store (MinIO) for Cadre, as its root user; run by the
# one-shot `buckets` service on every `up` (each step is idempotent):
# - CADRE_S3_BUCKET for export bundles;
# - CADRE_S3_ANCHOR_BUCKET for the signed audit digests, with Object Lock and a default
#   retention, so an object once written cannot be overwritten or deleted before it expires
#   (docs/audit.md);
# - the access key Cadre uses (CADRE_S3_ACCESS_KEY_ID), with a policy that may read, write,
#   list and delete exports, and only read, write and list anchors: no delete.
set -eu
: "${MINIO_ROOT_USER:?}" "${MINIO_ROOT_PASSWORD:?}" "${CADRE_S3_BUCKET:?}" "${CADRE_S3_ANCHOR_BUCKET:?}"
: "${CADRE_S3_ACCESS_KEY_ID:?}" "${CADRE_S3_SECRET_ACCESS_KEY:?}"
retention="${CADRE_S3_ANCHOR_RETENTION:-400d}"

mc alias set store http://object-storage:9000 "$MINIO_ROOT_USER" "$MINIO_ROOT_PASSWORD"
mc mb --ignore-existing "store/$CADRE_S3_BUCKET"
mc mb --ignore-existing --with-lock "store/$CADRE_S3_ANCHOR_BUCKET"
mc retention set --default GOVERNANCE "$retention" "store/$CADRE_S3_ANCHOR_BUCKET"

policy=/tmp/cadre-app-policy.json
printf '%s\n' "{
  \"Version\": \"2012-10-17\",
  \"Statement\": [
    {\"Effect\": \"Allow\", \"Action\": [\"s3:ListBucket\", \"s3:GetBucketLocation\"],
     \"Resource\": [\"arn:aws:s3:::$CADRE_S3_BUCKET\", \"arn:aws:s3:::$CADRE_S3_ANCHOR_BUCKET\"]},
    {\"Effect\": \"Allow\",
     \"Action\": [\"s3:GetObject\", \"s3:PutObject\", \"s3:DeleteObject\", \"s3:AbortMultipartUpload\"],
     \"Resource\": [\"arn:aws:s3:::$CADRE_S3_BUCKET/*\"]},
    {\"Effect\": \"Allow\", \"Action\": [\"s3:GetObject\", \"s3:PutObject\"],
     \"Resource\": [\"arn:aws:s3:::$CADRE_S3_ANCHOR_BUCKET/*\"]}
  ]
}" > "$policy"
mc admin policy create store cadre-app "$policy"
mc admin user add store "$CADRE_S3_ACCESS_KEY_ID" "$CADRE_S3_SECRET_ACCESS_KEY"
# Attaching a policy the user already has is an error: attach only when it is missing (a
# shell `case`, not grep: the mc image has little beyond mc and a shell).
case "$(mc admin user info store "$CADRE_S3_ACCESS_KEY_ID")" in
    *cadre-app*) ;;
    *) mc admin policy attach store cadre-app --user "$CADRE_S3_ACCESS_KEY_ID" ;;
esac
