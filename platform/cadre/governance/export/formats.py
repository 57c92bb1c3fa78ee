"""The export's file formats: JSONL, CSV and OCSF 1.1 API Activity events."""

from __future__ import annotations

import csv
import io
import json
from datetime import datetime

from cadre.governance.export.rows import COLUMNS

FORMATS = ("jsonl", "csv", "ocsf")
FILE_NAMES = {"jsonl": "audit.jsonl", "csv": "audit.csv", "ocsf": "audit.ocsf.jsonl"}

_ACTIVITY = {"create": 1, "read": 2, "view": 2, "update": 3, "delete": 4}
_ACTIVITY_NAMES = {1: "Create", 2: "Read", 3: "Update", 4: "Delete", 99: "Other"}
_OCSF_USER_TYPE = {
    "member": "User",
    "api_key": "Service",
    "scim_token": "Service",
    "agent": "Service",
    "system": "System",
}
_DENIALS = ("denied", "deny", "rejected", "failed", "refused")


def ocsf_event(row: dict) -> dict:
    """One audit event as an OCSF 1.1 API Activity [6003] event (mapping in docs/governance.md)."""
    verb = row["action"].rsplit(".", 1)[-1]
    activity_id = next((code for word, code in _ACTIVITY.items() if verb.startswith(word)), 99)
    failed = any(word in row["action"] for word in _DENIALS)
    created = datetime.fromisoformat(row["created_at"])
    event = {
        "class_uid": 6003,
        "class_name": "API Activity",
        "category_uid": 6,
        "category_name": "Application Activity",
        "activity_id": activity_id,
        "activity_name": _ACTIVITY_NAMES[activity_id],
        "type_uid": 6003 * 100 + activity_id,
        "time": int(created.timestamp() * 1000),
        "severity_id": 1,
        "severity": "Informational",
        "status_id": 2 if failed else 1,
        "status": "Failure" if failed else "Success",
        "message": row["reason"],
        "metadata": {
            "version": "1.1.0",
            "product": {"name": "Cadre", "vendor_name": "Cadre"},
            "uid": str(row["id"]),
            "sequence": row["sequence"],
            "correlation_uid": row["trace_id"],
            "log_name": "audit",
            "original_time": row["created_at"],
            "tenant_uid": str(row["organization"]),
        },
        "actor": {
            "user": {
                "uid": row["actor_id"],
                "name": row["actor_label"],
                "type": _OCSF_USER_TYPE.get(row["actor_type"], "Other"),
            }
        },
        "api": {"operation": row["action"], "request": {"uid": row["request_id"]}},
        "resources": (
            [{"type": row["target_type"], "uid": row["target_id"], "name": row["target_label"]}]
            if row["target_type"]
            else []
        ),
        "unmapped": {
            "changes": row["changes"],
            "hash": row["hash"],
            "prev_hash": row["prev_hash"],
        },
    }
    if row["ip"] or row["user_agent"]:
        event["src_endpoint"] = {"ip": row["ip"]} if row["ip"] else {}
        if row["user_agent"]:
            event["http_request"] = {"user_agent": row["user_agent"]}
    return event


def json_line(value: dict) -> bytes:
    return (json.dumps(value, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def csv_line(row: dict) -> bytes:
    buffer = io.StringIO()
    values = [
        json.dumps(row[name], ensure_ascii=False, separators=(",", ":"))
        if name == "changes"
        else ("" if row[name] is None else row[name])
        for name in COLUMNS
    ]
    csv.writer(buffer, lineterminator="\n").writerow(values)
    return buffer.getvalue().encode("utf-8")
