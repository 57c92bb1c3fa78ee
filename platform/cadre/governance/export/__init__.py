"""Audit export: a time range of the audit log as JSONL / CSV / OCSF, in a signed bundle.

Rows are streamed in keyset pages (`sequence > last` on the organization's unique
(organization, sequence) index), so memory stays bounded whatever the range and no long
transaction holds a snapshot open while progress is reported. Free text (labels, reason and
every string inside `changes`) passes through the masking engine unless the export is made
with `mask=False`.

A bundle is written by the worker in a temporary directory, then stored as objects
`exports/<org>/<export id>/<file>` in the "exports" storage (S3, or files under DATA_DIR on one
machine), from which any web node streams the download as a tar built on the fly; bundles
expire after CADRE_AUDIT_EXPORT_RETENTION_DAYS (`audit_exports_expire`):

    audit.jsonl          one event per line: the audit columns + hash and prev_hash
    audit.csv            the same columns, `changes` as JSON text
    audit.ocsf.jsonl     OCSF 1.1 "API Activity" (class 6003) events, one per line
    digests.jsonl        the organization's signed chain-head digests (audit_digest)
    manifest.json        rows, range, filters, chain heads, SHA-256 and block hashes per file
    manifest.sig         base64 Ed25519 signature of manifest.json's exact bytes

`verify_bundle` (and `manage.py audit_export_verify`) checks all of it offline, against a key
it trusts (the instance's, a given PEM, or a pinned key id), never the manifest's own;
`openssl_steps` are the commands that check the signature and the files with OpenSSL alone.

The package is split by concern; import from `cadre.governance.export`.
"""

from __future__ import annotations

from cadre.governance.export.bundle import (
    BundleResult,
    HashedWriter,
    StoredBundle,
    exports_storage,
    remove_bundle,
    store_bundle,
    tar_bundle,
    tar_stream,
    write_bundle,
)
from cadre.governance.export.formats import FILE_NAMES, FORMATS, ocsf_event
from cadre.governance.export.jobs import (
    FILTER_FIELDS,
    audit_export_create,
    audit_export_run,
    audit_exports_expire,
    export_key,
    stored_bundle,
)
from cadre.governance.export.openssl_check import openssl_steps, tar_name
from cadre.governance.export.rows import (
    COLUMNS,
    TextMasker,
    export_rows,
    masked,
    stream_events_jsonl,
)
from cadre.governance.export.verify import Problem, VerifyReport, verify_bundle

__all__ = [
    "COLUMNS",
    "FILE_NAMES",
    "FILTER_FIELDS",
    "FORMATS",
    "BundleResult",
    "HashedWriter",
    "Problem",
    "StoredBundle",
    "TextMasker",
    "VerifyReport",
    "audit_export_create",
    "audit_export_run",
    "audit_exports_expire",
    "export_key",
    "export_rows",
    "exports_storage",
    "masked",
    "ocsf_event",
    "openssl_steps",
    "remove_bundle",
    "store_bundle",
    "stored_bundle",
    "stream_events_jsonl",
    "tar_bundle",
    "tar_name",
    "tar_stream",
    "verify_bundle",
    "write_bundle",
]
