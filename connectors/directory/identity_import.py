"""Bulk import of IM identities from CSV: a preview with per-line errors, then an all-or-nothing
apply.

Each row links one platform account of the connector's platform to a member, found by email,
employee number or mobile. The same checks run for the preview and the apply; the apply runs them
again inside its transaction and writes nothing unless every row is valid.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.db.models.functions import Lower
from django.utils import timezone

from cadre.errors import Conflict, InvalidInput
from cadre.governance import audit
from cadre.tenancy.actors import Actor
from cadre.tenancy.models import IMIdentity, Member
from connectors.base.identities import phone_digits
from connectors.models import Connector, UnmappedIdentity

MAX_BYTES = 1024 * 1024
MAX_ROWS = 5000

# Accepted column names (after lower-casing and turning spaces and hyphens into underscores).
COLUMNS = {
    "platform_user_id": "platform_user_id",
    "user_id": "platform_user_id",
    "member_email": "email",
    "email": "email",
    "employee_no": "employee_no",
    "employee_id": "employee_no",
    "employee_number": "employee_no",
    "member_mobile": "mobile",
    "mobile": "mobile",
    "tenant_key": "tenant_key",
    "display_name": "display_name",
    "name": "display_name",
}
MEMBER_KEYS = ("email", "employee_no", "mobile")


@dataclass
class ImportRow:
    line: int
    platform_user_id: str
    tenant_key: str = ""
    display_name: str = ""
    member: Member | None = None
    matched_by: str = ""
    status: str = "new"  # new, unchanged (already mapped to this member), error
    errors: list[str] = field(default_factory=list)


@dataclass
class ImportPlan:
    """What an import would do: every row with its member or its errors."""

    rows: list[ImportRow] = field(default_factory=list)
    file_errors: list[str] = field(default_factory=list)

    @property
    def error_rows(self) -> list[ImportRow]:
        return [row for row in self.rows if row.errors]

    @property
    def new_rows(self) -> list[ImportRow]:
        return [row for row in self.rows if row.status == "new" and not row.errors]

    @property
    def unchanged_rows(self) -> list[ImportRow]:
        return [row for row in self.rows if row.status == "unchanged"]

    @property
    def valid(self) -> bool:
        return not self.file_errors and not self.error_rows and bool(self.rows)

    def error_details(self) -> dict[str, list[str]]:
        details = {"file": list(self.file_errors)} if self.file_errors else {}
        for row in self.error_rows:
            details[f"line {row.line}"] = list(row.errors)
        return details


def _decode(data: bytes) -> str:
    if len(data) > MAX_BYTES:
        raise ValueError(f"The file is larger than {MAX_BYTES // 1024} KiB; split it.")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ValueError("The file is not UTF-8 text; save it as “CSV UTF-8”.") from None


def _read(text: str, plan: ImportPlan) -> list[tuple[int, dict[str, str]]]:
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader)
    except StopIteration:
        plan.file_errors.append("The file is empty.")
        return []
    except csv.Error as error:
        plan.file_errors.append(f"Line 1: {error}.")
        return []
    names = [cell.strip().lower().replace(" ", "_").replace("-", "_") for cell in header]
    unknown = [name for name in names if name and name not in COLUMNS]
    if unknown:
        plan.file_errors.append(
            f"Unknown column(s): {', '.join(unknown)}. Use platform_user_id with member_email, "
            "employee_no or mobile (optional: tenant_key, display_name)."
        )
    keys = [COLUMNS.get(name, "") for name in names]
    if "platform_user_id" not in keys:
        plan.file_errors.append("The header row needs a platform_user_id column.")
    if not any(key in keys for key in MEMBER_KEYS):
        plan.file_errors.append(
            "The header row needs a member_email, employee_no or mobile column."
        )
    if plan.file_errors:
        return []
    records = []
    try:
        for cells in reader:
            if not any(cell.strip() for cell in cells):
                continue  # blank lines (a trailing newline from a spreadsheet)
            if len(records) >= MAX_ROWS:
                plan.file_errors.append(f"The file has more than {MAX_ROWS} rows; split it.")
                return []
            record = {key: "" for key in keys if key}
            for key, cell in zip(keys, cells, strict=False):
                if key:
                    record[key] = cell.strip()
            if len(cells) > len(keys):
                record["_extra"] = "1"
            records.append((reader.line_num, record))
    except csv.Error as error:
        plan.file_errors.append(f"Line {reader.line_num}: {error}.")
        return []
    return records


def _members_by_keys(actor: Actor, records: list[dict]) -> dict[str, dict[str, list[Member]]]:
    """Members the actor manages, indexed by lower-cased email, employee number and mobile
    digits — in two queries at most, whatever the size of the file."""
    emails = {r["email"].lower() for r in records if r.get("email")}
    numbers = {r["employee_no"] for r in records if r.get("employee_no")}
    wants_mobile = any(r.get("mobile") for r in records)
    index: dict[str, dict[str, list[Member]]] = {key: {} for key in MEMBER_KEYS}
    members = Member.objects.restrict(actor, "manage")
    condition = Q(pk__in=[])
    if emails:
        condition |= Q(email_lower__in=emails)
    if numbers:
        condition |= Q(employee_no__in=numbers)
    if wants_mobile:
        condition |= ~Q(mobile="")
    for member in members.annotate(email_lower=Lower("email")).filter(condition):
        if member.email:
            index["email"].setdefault(member.email.lower(), []).append(member)
        if member.employee_no:
            index["employee_no"].setdefault(member.employee_no, []).append(member)
        if member.mobile:
            index["mobile"].setdefault(phone_digits(member.mobile), []).append(member)
    return index


def _resolve_member(record: dict, index: dict, row: ImportRow) -> None:
    found: dict[int, Member] = {}
    labels = {"email": "email", "employee_no": "employee number", "mobile": "mobile"}
    for key, label in labels.items():
        value = record.get(key, "")
        if not value:
            continue
        lookup = (
            value.lower() if key == "email" else phone_digits(value) if key == "mobile" else value
        )
        candidates = index[key].get(lookup, [])
        if not candidates:
            row.errors.append(f"No member with {label} {value}.")
            return
        if len(candidates) > 1:
            row.errors.append(f"Several members have {label} {value}; use another column.")
            return
        member = candidates[0]
        found[member.pk] = member
        row.matched_by = row.matched_by or key
    if not found:
        row.errors.append("Give the member's email, employee number or mobile.")
    elif len(found) > 1:
        row.errors.append("The member columns point at different members.")
    else:
        member = next(iter(found.values()))
        if member.status != Member.Status.ACTIVE:
            row.errors.append(f"{member.display_name} is {member.get_status_display().lower()}.")
        row.member = member


def identity_import_plan(*, actor: Actor, connector: Connector, data: bytes) -> ImportPlan:
    """Check a CSV file and say what importing it would do (writes nothing)."""
    actor.require("connector.manage", connector)
    plan = ImportPlan()
    try:
        text = _decode(data)
    except ValueError as error:
        plan.file_errors.append(str(error))
        return plan
    records = _read(text, plan)
    if plan.file_errors:
        return plan
    if not records:
        plan.file_errors.append("The file has a header but no rows.")
        return plan
    index = _members_by_keys(actor, [record for _, record in records])
    existing = {
        (identity.tenant_key, identity.platform_user_id): identity
        for identity in IMIdentity.objects.filter(
            organization_id=connector.organization_id,
            platform=connector.platform,
            platform_user_id__in={r.get("platform_user_id", "") for _, r in records},
        ).select_related("member")
    }
    seen: dict[tuple[str, str], int] = {}
    for line, record in records:
        row = ImportRow(
            line=line,
            platform_user_id=record.get("platform_user_id", ""),
            tenant_key=record.get("tenant_key", "")[:128],
            display_name=record.get("display_name", "")[:150],
        )
        plan.rows.append(row)
        if record.get("_extra"):
            row.errors.append("The row has more cells than the header.")
        if not row.platform_user_id:
            row.errors.append("platform_user_id is empty.")
        elif len(row.platform_user_id) > 191:
            row.errors.append("platform_user_id is longer than 191 characters.")
        key = (row.tenant_key, row.platform_user_id)
        if row.platform_user_id and key in seen:
            row.errors.append(f"The same platform_user_id is on line {seen[key]}.")
        seen.setdefault(key, line)
        _resolve_member(record, index, row)
        mapped = existing.get(key)
        if mapped is not None and row.member is not None:
            if mapped.member_id == row.member.pk:
                row.status = "unchanged"
            else:
                row.errors.append(f"Already mapped to {mapped.member.display_name}.")
        if row.errors:
            row.status = "error"
    return plan


@dataclass(frozen=True)
class ImportResult:
    created: int
    unchanged: int
    resolved_unmapped: int


@transaction.atomic
def identity_import_apply(*, actor: Actor, connector: Connector, data: bytes) -> ImportResult:
    """Map every row of the file, or nothing: any invalid row raises InvalidInput with the
    line numbers and no identity is written."""
    plan = identity_import_plan(actor=actor, connector=connector, data=data)
    if not plan.valid:
        count = len(plan.error_rows) + len(plan.file_errors)
        raise InvalidInput(
            f"The file has {count} error{'s' if count != 1 else ''}; nothing was imported.",
            details=plan.error_details(),
        )
    rows = plan.new_rows
    try:
        with transaction.atomic():
            IMIdentity.objects.bulk_create(
                [
                    IMIdentity(
                        organization_id=connector.organization_id,
                        member=row.member,
                        platform=connector.platform,
                        tenant_key=row.tenant_key,
                        platform_user_id=row.platform_user_id,
                        display_name=row.display_name,
                    )
                    for row in rows
                ]
            )
    except IntegrityError:
        raise Conflict(
            "Some of these accounts were mapped meanwhile; nothing was imported. Preview again."
        ) from None
    resolved = UnmappedIdentity.objects.filter(
        connector=connector,
        resolved_at__isnull=True,
        platform_user_id__in=[row.platform_user_id for row in plan.rows],
    ).update(resolved_at=timezone.now())
    audit.record(
        actor=actor,
        action="connector.identity_import",
        target=connector,
        changes={
            "created": len(rows),
            "unchanged": len(plan.unchanged_rows),
            "resolved_unmapped": resolved,
            # Enough to trace who was linked, bounded so one event stays small.
            "identities": [
                {"platform_user_id": row.platform_user_id, "member": row.member.pk}
                for row in rows[:500]
            ],
        },
    )
    return ImportResult(len(rows), len(plan.unchanged_rows), resolved)
