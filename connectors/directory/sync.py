"""IM directory sync: a platform's contact directory into departments, members and IM identities.

A full sync (or the nightly reconciliation) reads the whole directory first, page by page, and
writes nothing until the read is complete: a permission error or a rate limit that outlasts the
retries fails the run with the platform's code and changes nothing. The writes then happen in one
transaction, in batches (bulk inserts and updates, one audit event per member created or
changed), through the tenancy services where a rule lives there (departments, deactivation).

What the sync never decides alone goes to the review queue (`DirectoryConflict`):
- two directory users with one e-mail (or an e-mail held by a member linked to someone else):
  neither is matched or created by it;
- a member field edited in Cadre since the last sync while the directory changed it too
  (`DirectoryUser.synced_values` holds what the last sync wrote);
- a departed user the deactivation service refuses (the organization's last owner).

Departed users (gone from the directory, or resigned/frozen/disabled) are deactivated through
`member_deactivate`: their agents stop, their API keys and sessions are revoked.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from dataclasses import dataclass, field

from django.db import IntegrityError, connection, transaction
from django.db.models.functions import Lower
from django.utils import timezone

from cadre.errors import CadreError, Conflict, InvalidInput
from cadre.governance import audit
from cadre.queues import enqueue
from cadre.tenancy.actors import Actor, system_actor
from cadre.tenancy.models import Department, IMIdentity, Member
from cadre.tenancy.services import (
    department_archive,
    department_create,
    department_update,
    member_deactivate,
    member_reactivate,
    member_update,
)
from connectors.base.transport import TransportError
from connectors.directory.contacts import (
    ContactChange,
    DirectoryDepartment,
    DirectoryRefused,
    DirectorySnapshot,
    DirectoryUser,
    directory_client,
    refused,
    supports_directory,
)
from connectors.models import Connector, DirectoryConflict, DirectorySync
from connectors.models import DirectoryDepartmentLink as DepartmentLink
from connectors.models import DirectoryUserLink as UserLink

logger = logging.getLogger(__name__)

PROGRESS_EVERY = 0.5  # seconds between progress writes while reading
MAX_ROW_ERRORS = 200
_MISSING = object()
LIMITS = {"display_name": 150, "email": 254, "mobile": 32, "employee_no": 64, "title": 150}
DEPARTED_REASON = "left the IM directory"


def _set_column(model, column: str, rows: list[tuple[int, object]], cast: str) -> None:
    """UPDATE … FROM (VALUES …): one column of many rows, each its own value. Django's
    bulk_update builds a CASE WHEN per row, which cost most of a 5,000-member sync."""
    table = connection.ops.quote_name(model._meta.db_table)
    name = connection.ops.quote_name(column)
    with connection.cursor() as cursor:
        for start in range(0, len(rows), 1000):
            chunk = rows[start : start + 1000]
            values = ", ".join(["(%s, %s)"] * len(chunk))
            cursor.execute(
                f"UPDATE {table} AS t SET {name} = v.value::{cast} "  # noqa: S608 - names from the model
                f"FROM (VALUES {values}) AS v(id, value) WHERE t.id = v.id::bigint",
                [item for pair in chunk for item in pair],
            )


def _save_synced_values(links) -> None:
    rows = [(link.pk, json.dumps(link.synced_values)) for link in links if link.pk]
    _set_column(UserLink, "synced_values", rows, "jsonb")
    _set_column(UserLink, "synced_at", [(link.pk, timezone.now()) for link in links if link.pk],
                "timestamptz")  # fmt: skip


def sync_actor(connector: Connector) -> Actor:
    return system_actor(connector.organization, label=f"directory sync ({connector.name})")


# --- starting and running -------------------------------------------------------------------


@transaction.atomic
def directory_sync_start(
    *, actor: Actor, connector: Connector, kind: str = DirectorySync.Kind.FULL
) -> DirectorySync:
    """Queue a full sync (one at a time per connector) and enqueue its task on commit."""
    actor.require("connector.manage", connector)
    if not supports_directory(connector.platform):
        raise InvalidInput(
            f"{connector.get_platform_display()} has no contact directory to sync.",
            code="no_directory",
        )
    if not connector.is_active:
        raise Conflict("The connector is disabled.", code="connector_disabled")
    try:
        with transaction.atomic():
            sync = DirectorySync.objects.create(
                organization_id=connector.organization_id,
                connector=connector,
                kind=kind,
                requested_by=actor.member,
            )
    except IntegrityError:
        raise Conflict(
            "A directory sync of this connector is already running.", code="sync_running"
        ) from None
    if not connector.settings.get("directory_sync"):
        # From now on contact-change events apply and the nightly reconciliation includes it.
        connector.settings = {**connector.settings, "directory_sync": True}
        connector.save(update_fields=["settings"])
    audit.record(
        actor=actor,
        action="connector.directory_sync_start",
        target=connector,
        changes={"sync": sync.pk, "kind": kind},
    )
    transaction.on_commit(lambda: enqueue("connectors.tasks.directory_sync_run", sync.pk))
    return sync


def _set(sync: DirectorySync, **fields) -> None:
    for name, value in fields.items():
        setattr(sync, name, value)
    DirectorySync.objects.filter(pk=sync.pk).update(**fields)


def directory_sync_execute(sync: DirectorySync, *, client=None) -> DirectorySync:
    """Read the directory to the end, then apply it; the run records the outcome."""
    if sync.status not in (DirectorySync.Status.QUEUED, DirectorySync.Status.RUNNING):
        return sync
    connector = sync.connector
    _set(sync, status=DirectorySync.Status.RUNNING, started_at=timezone.now(), phase="departments")
    last = [0.0]

    def progress(phase: str, done: int, total: int) -> None:
        now = timezone.now().timestamp()
        if now - last[0] >= PROGRESS_EVERY or (total and done == total):
            last[0] = now
            _set(sync, phase=phase, progress_done=done, progress_total=total)

    try:
        client = client or directory_client(connector)
        snapshot = client.read_directory(progress)
    except DirectoryRefused as error:
        return _fail(sync, error)
    except TransportError as error:
        return _fail(sync, refused(error))
    _set(sync, phase="apply", progress_done=0, progress_total=len(snapshot.users))
    try:
        with transaction.atomic():
            outcome = directory_apply(connector, snapshot, sync=sync, full=True)
            audit.record(
                actor=sync_actor(connector),
                action="connector.directory_sync",
                target=connector,
                changes={"sync": sync.pk, "kind": sync.kind, "counts": outcome.counts},
            )
    except CadreError as error:
        return _fail(sync, DirectoryRefused(error.code or "invalid", str(error)))
    _set(
        sync,
        status=DirectorySync.Status.SUCCEEDED,
        finished_at=timezone.now(),
        phase="done",
        progress_done=len(snapshot.users),
        counts=outcome.counts,
        errors=outcome.errors[:MAX_ROW_ERRORS],
    )
    return sync


def _fail(sync: DirectorySync, error: DirectoryRefused) -> DirectorySync:
    logger.info("directory sync %s failed: %s", sync.pk, error)
    _set(
        sync,
        status=DirectorySync.Status.FAILED,
        finished_at=timezone.now(),
        error_code=error.code[:32],
        error=str(error)[:500],
        errors=[error.as_dict()],
    )
    return sync


def directory_reconcile_all() -> int:
    """The nightly reconciliation: a full read of every active connector with a directory
    (skipping one whose sync is already running)."""
    started = 0
    for connector in Connector.objects.filter(status=Connector.Status.ACTIVE).select_related(
        "organization"
    ):
        if not supports_directory(connector.platform) or not connector.settings.get(
            "directory_sync", False
        ):
            continue
        try:
            directory_sync_start(
                actor=sync_actor(connector), connector=connector, kind=DirectorySync.Kind.RECONCILE
            )
        except Conflict:
            continue
        started += 1
    return started


# --- applying a snapshot --------------------------------------------------------------------


@dataclass
class Outcome:
    counts: Counter = field(default_factory=Counter)
    errors: list = field(default_factory=list)


def _clip(values: dict) -> dict:
    return {
        name: (value[: LIMITS[name]] if name in LIMITS and isinstance(value, str) else value)
        for name, value in values.items()
    }


def _member_values(user: DirectoryUser, department_pk: int | None) -> dict:
    return _clip(
        {
            "display_name": (user.name or user.id).strip(),
            "email": user.email.strip().lower(),
            "mobile": user.mobile.strip(),
            "employee_no": user.employee_no.strip(),
            "title": user.title.strip(),
            "department": department_pk,
        }
    )


def _current(member: Member, name: str):
    return getattr(member, "department_id" if name == "department" else name)


def _conflict(connector, sync, *, kind, user: DirectoryUser, member=None, fields=(), local=None,
              message="") -> DirectoryConflict:  # fmt: skip
    row, created = DirectoryConflict.objects.get_or_create(
        connector=connector,
        platform_user_id=user.id[:191],
        kind=kind,
        status=DirectoryConflict.Status.OPEN,
        defaults={"organization_id": connector.organization_id},
    )
    row.sync = sync
    row.member = member
    row.directory_values = user.as_dict()
    if created or kind != DirectoryConflict.Kind.LOCAL_EDIT:
        row.local_values = local or {}
        row.fields = list(fields)
    else:  # the scalar fields and the manager are found in two passes: one row for both
        row.local_values = {**row.local_values, **(local or {})}
        row.fields = sorted(set(row.fields) | set(fields))
    row.message = message[:500]
    row.updated_at = timezone.now()
    row.save()
    return row


class _Apply:
    """One application of directory records to an organization (full snapshot or one event)."""

    def __init__(self, connector: Connector, sync: DirectorySync | None, *, full: bool):
        self.connector = connector
        self.sync = sync
        self.full = full
        self.actor = sync_actor(connector)
        self.org_id = connector.organization_id
        self.outcome = Outcome()
        self.counts = self.outcome.counts
        self.now = timezone.now()
        self.department_links = {
            link.platform_department_id: link
            for link in DepartmentLink.objects.filter(connector=connector).select_related(
                "department"
            )
        }
        self.department_of: dict[str, Department] = {
            key: link.department for key, link in self.department_links.items()
        }

    # departments

    def departments(self, departments: list[DirectoryDepartment]) -> None:
        by_id = {d.id: d for d in departments if d.id}
        placed: set[str] = set()
        ordered: list[DirectoryDepartment] = []

        def place(department: DirectoryDepartment, trail: set[str]) -> None:
            if department.id in placed or department.id in trail:
                return
            parent = by_id.get(department.parent_id)
            if parent is not None:
                place(parent, trail | {department.id})
            placed.add(department.id)
            ordered.append(department)

        for department in by_id.values():
            place(department, set())
        linked = {link.department_id for link in self.department_links.values()}
        for department in ordered:
            self._department(department, linked)
        if self.full:
            for key in set(self.department_links) - set(by_id):
                self._department_gone(key)

    def _department(self, record: DirectoryDepartment, linked: set[int]) -> Department:
        parent = self.department_of.get(record.parent_id) if record.parent_id else None
        name = (record.name or record.id).strip()[:200]
        link = self.department_links.get(record.id)
        if link is not None:
            department = link.department
            changes = {}
            if department.parent_id != (parent.pk if parent else None):
                changes["parent"] = parent
            if department.is_archived:
                changes["is_archived"] = False
            if department.name != name:
                changes["name"] = self._free_name(name, parent, department)
            if changes:
                department = department_update(actor=self.actor, department=department, **changes)
                self.counts["departments_updated"] += 1
            self.department_of[record.id] = department
            return department
        existing = (
            Department.objects.filter(organization_id=self.org_id, parent=parent)
            .annotate(lowered=Lower("name"))
            .filter(lowered=name.lower())
            .exclude(pk__in=linked)
            .first()
        )
        if existing is not None:
            department = existing
            if department.is_archived:
                department = department_update(
                    actor=self.actor, department=department, is_archived=False
                )
            self.counts["departments_linked"] += 1
        else:
            department = department_create(
                actor=self.actor, name=self._free_name(name, parent, None), parent=parent
            )
            self.counts["departments_created"] += 1
        link = DepartmentLink.objects.create(
            organization_id=self.org_id,
            connector=self.connector,
            platform_department_id=record.id[:191],
            department=department,
        )
        linked.add(department.pk)
        self.department_links[record.id] = link
        self.department_of[record.id] = department
        return department

    def _free_name(self, name: str, parent, department) -> str:
        """Sibling names are unique (case-insensitive): a second "Sales" becomes "Sales (2)"."""
        siblings = Department.objects.filter(organization_id=self.org_id, parent=parent)
        if department is not None:
            siblings = siblings.exclude(pk=department.pk)
        taken = {value.lower() for value in siblings.values_list("name", flat=True)}
        candidate, number = name, 2
        while candidate.lower() in taken:
            candidate = f"{name[:190]} ({number})"
            number += 1
        return candidate

    def _department_gone(self, key: str) -> None:
        link = self.department_links[key]
        department = link.department
        if department.is_archived:
            return
        try:
            with transaction.atomic():
                department_archive(actor=self.actor, department=department)
            self.counts["departments_archived"] += 1
        except CadreError as error:
            self.outcome.errors.append(
                {"department": key, "code": error.code, "message": str(error)}
            )

    # users

    def users(self, users: list[DirectoryUser], *, known_departments_only: bool = False) -> None:
        connector = self.connector
        links = {
            link.platform_user_id: link
            for link in UserLink.objects.filter(connector=connector).select_related("member")
        }
        linked_members = {link.member_id: key for key, link in links.items()}
        identity_member = dict(
            IMIdentity.objects.filter(
                organization_id=self.org_id, platform=connector.platform
            ).values_list("platform_user_id", "member_id")
        )
        # Every member, deactivated ones too: an e-mail stays theirs (it is unique).
        members = {m.pk: m for m in Member.objects.filter(organization_id=self.org_id)}
        by_email = {m.email.lower(): m for m in members.values() if m.email}
        by_employee_no: dict[str, list[Member]] = {}
        for m in members.values():
            if m.employee_no:
                by_employee_no.setdefault(m.employee_no, []).append(m)
        email_count = Counter(u.email.strip().lower() for u in users if u.email.strip())

        to_create: list[tuple[DirectoryUser, Member, dict]] = []
        to_update: dict[int, tuple[Member, dict, dict]] = {}  # pk -> member, before, values
        link_of: dict[str, UserLink] = {}
        new_links: list[UserLink] = []
        to_deactivate: list[tuple[DirectoryUser, Member]] = []
        to_reactivate: list[Member] = []

        for user in users:
            if not user.id:
                continue
            department_pk = self._department_pk(user, known_departments_only)
            values = _member_values(user, department_pk)
            if department_pk is False:
                values.pop("department")
            email = values.get("email", "")
            link = links.get(user.id)
            member = link.member if link is not None else None
            if member is None and not user.active:
                self.counts["skipped_inactive"] += 1  # never linked, already gone: nothing to do
                continue
            if member is None:
                member = self._match(user, values, identity_member, members, by_email,
                                     by_employee_no, linked_members, email_count)  # fmt: skip
                if member == "conflict":
                    continue
            if email and email_count[email] > 1:
                _conflict(
                    connector, self.sync, kind=DirectoryConflict.Kind.DUPLICATE_EMAIL, user=user,
                    member=member if isinstance(member, Member) else None,
                    message=f"{email_count[email]} directory users have the e-mail {email}.",
                )  # fmt: skip
                self.counts["conflicts"] += 1
                values.pop("email")
                if member is None:
                    continue
            elif email and email in by_email and getattr(member, "pk", None) != by_email[email].pk:
                other = by_email[email]
                _conflict(
                    connector, self.sync, kind=DirectoryConflict.Kind.DUPLICATE_EMAIL, user=user,
                    member=member, local={"email_member": other.pk},
                    message=f"The e-mail {email} belongs to {other.display_name}, another member.",
                )  # fmt: skip
                self.counts["conflicts"] += 1
                values.pop("email")
                if member is None:
                    continue
            if member is None:
                if not user.active:
                    self.counts["skipped_inactive"] += 1
                    continue
                member = Member(
                    organization_id=self.org_id,
                    roles=["employee"],
                    status=Member.Status.ACTIVE,
                    **{("department_id" if k == "department" else k): v for k, v in values.items()},
                )
                to_create.append((user, member, values))
                if member.email:
                    by_email[member.email] = member
                continue
            if link is None:
                link = UserLink(
                    organization_id=self.org_id,
                    connector=connector,
                    platform_user_id=user.id[:191],
                    member=member,
                    synced_values={},
                )
                new_links.append(link)
                linked_members[member.pk] = user.id
                self.counts["members_linked"] += 1
            link_of[user.id] = link
            self._changes(user, member, link, values, to_update, first=link.pk is None)
            if not user.active and member.status != Member.Status.DEACTIVATED:
                to_deactivate.append((user, member))
            elif (
                user.active
                and member.status == Member.Status.DEACTIVATED
                and link.departed_at is not None
            ):
                to_reactivate.append(member)

        self._write(to_create, to_update, new_links, link_of, identity_member)
        self._managers(users, link_of)
        if self.full:
            present = {u.id for u in users}
            for key, link in links.items():
                if key not in present and link.member.status != Member.Status.DEACTIVATED:
                    gone = DirectoryUser(id=key, name=link.member.display_name, active=False)
                    to_deactivate.append((gone, link.member))
        for user, member in to_deactivate:
            self._deactivate(user, member, link_of.get(user.id) or links.get(user.id))
        for member in to_reactivate:
            member_reactivate(actor=self.actor, member=member)
            UserLink.objects.filter(connector=connector, member=member).update(departed_at=None)
            self.counts["members_reactivated"] += 1

    def _department_pk(self, user: DirectoryUser, known_only: bool):
        for key in user.department_ids:
            department = self.department_of.get(key)
            if department is not None:
                return department.pk
        if known_only and user.department_ids:
            return False  # an event about a department not synced yet: leave it as it is
        return None

    def _match(self, user, values, identity_member, members, by_email, by_employee_no,
               linked_members, email_count):  # fmt: skip
        """The existing member a not-yet-linked directory user is: their IM identity, their
        e-mail, their employee number (when exactly one member has it); None for a new one."""
        candidate = members.get(identity_member.get(user.id))
        email = values.get("email", "")
        if candidate is None and email and email_count[email] == 1:
            candidate = by_email.get(email)
        if candidate is None and values.get("employee_no"):
            found = by_employee_no.get(values["employee_no"], [])
            candidate = found[0] if len(found) == 1 else None
        if candidate is not None and candidate.pk in linked_members:
            return None if candidate.email != email else self._taken(user, candidate)
        return candidate

    def _taken(self, user, candidate):
        _conflict(
            self.connector, self.sync, kind=DirectoryConflict.Kind.DUPLICATE_EMAIL, user=user,
            member=candidate,
            message=f"{candidate.display_name} is already linked to another directory user "
            "with this e-mail.",
        )  # fmt: skip
        self.counts["conflicts"] += 1
        return "conflict"

    def _changes(self, user, member, link, values, to_update, *, first: bool) -> None:
        """Directory values into the member, unless Cadre changed the field since the last
        sync (then the field is queued as a conflict and left alone)."""
        synced = link.synced_values or {}
        before = {name: _current(member, name) for name in values}
        changed, conflicted = {}, {}
        for name, new in values.items():
            current = before[name]
            if new == current:
                continue
            if not first and name in synced and new == synced[name]:
                continue  # the directory did not change it: Cadre's edit stands
            untouched = (
                (current in ("", None)) if first or name not in synced else current == synced[name]
            )
            if untouched:
                changed[name] = new
            else:
                conflicted[name] = current
        link.synced_values = {**synced, **{n: v for n, v in values.items() if n not in conflicted}}
        for name in conflicted:  # still what the last sync wrote, until someone decides
            if name in synced:
                link.synced_values[name] = synced[name]
            else:
                link.synced_values.pop(name, None)
        if conflicted:
            _conflict(
                self.connector, self.sync, kind=DirectoryConflict.Kind.LOCAL_EDIT, user=user,
                member=member, fields=sorted(conflicted), local=conflicted,
                message="Changed in Cadre since the last sync: " + ", ".join(sorted(conflicted)),
            )  # fmt: skip
            self.counts["conflicts"] += 1
        if changed:
            for name, value in changed.items():
                setattr(member, "department_id" if name == "department" else name, value)
            to_update[member.pk] = (member, {n: before[n] for n in changed}, changed)

    def _write(self, to_create, to_update, new_links, link_of, identity_member) -> None:
        connector = self.connector
        if to_create:
            created = Member.objects.bulk_create([member for _, member, _ in to_create])
            identities, links = [], []
            for (user, _, values), member in zip(to_create, created, strict=True):
                if user.id not in identity_member:
                    identities.append(
                        IMIdentity(
                            organization_id=self.org_id, member=member, platform=connector.platform,
                            platform_user_id=user.id[:191], display_name=member.display_name,
                        )
                    )  # fmt: skip
                link = UserLink(
                    organization_id=self.org_id, connector=connector,
                    platform_user_id=user.id[:191], member=member, synced_values=dict(values),
                )  # fmt: skip
                links.append(link)
                link_of[user.id] = link
                audit.record(
                    actor=self.actor,
                    action="member.create",
                    target=member,
                    after={**values, "roles": member.roles, "status": member.status,
                           "platform_user_id": user.id},
                    reason=f"IM directory sync ({connector.platform})",
                )  # fmt: skip
            IMIdentity.objects.bulk_create(identities, batch_size=1000)
            UserLink.objects.bulk_create(links, batch_size=1000)
            self.counts["members_created"] += len(created)
            self.counts["identities_created"] += len(identities)
        if to_update:
            fields = sorted(
                {"department_id" if n == "department" else n for _, _, c in to_update.values()
                 for n in c}
            )  # fmt: skip
            Member.objects.bulk_update([m for m, _, _ in to_update.values()], fields, 500)
            for member, before, after in to_update.values():
                audit.record(
                    actor=self.actor, action="member.update", target=member, before=before,
                    after=after, reason=f"IM directory sync ({connector.platform})",
                )  # fmt: skip
            self.counts["members_updated"] += len(to_update)
        for link in new_links:
            if link.member_id and not IMIdentity.objects.filter(
                organization_id=self.org_id, platform=connector.platform,
                platform_user_id=link.platform_user_id,
            ).exists():  # fmt: skip
                IMIdentity.objects.create(
                    organization_id=self.org_id, member_id=link.member_id,
                    platform=connector.platform, platform_user_id=link.platform_user_id,
                    display_name=link.member.display_name,
                )  # fmt: skip
                self.counts["identities_created"] += 1
        UserLink.objects.bulk_create(new_links, batch_size=1000)
        new_ids = {id(link) for link in new_links}
        existing = [link for link in link_of.values() if link.pk and id(link) not in new_ids]
        _save_synced_values(existing)

    def _managers(self, users: list[DirectoryUser], link_of: dict) -> None:
        """Each member's manager is their directory leader's member (second pass: the leader
        may have been created in this run)."""
        member_of = {key: link.member_id for key, link in link_of.items()}
        outside = {u.leader_user_id for u in users if u.leader_user_id} - set(member_of)
        if outside:  # leaders synced before (an event's user reports to someone known)
            member_of.update(
                UserLink.objects.filter(
                    connector=self.connector, platform_user_id__in=outside
                ).values_list("platform_user_id", "member_id")
            )
        users_by_id = {user.id: user for user in users}
        wanted = {}
        for user in users:
            link = link_of.get(user.id)
            if link is None:
                continue
            leader = member_of.get(user.leader_user_id)
            if leader == link.member_id:
                leader = None
            if user.leader_user_id and leader is None and user.leader_user_id not in member_of:
                continue  # leader outside this read (an event): leave the manager as it is
            wanted[link.member_id] = (link, leader)
        if not wanted:
            return
        current = dict(Member.objects.filter(pk__in=wanted).values_list("pk", "manager_id"))
        changed = []
        for member_pk, (link, leader) in wanted.items():
            now = current.get(member_pk)
            synced = link.synced_values.get("manager", _MISSING)
            if leader == now:
                link.synced_values["manager"] = leader
                continue
            if synced is not _MISSING and leader == synced:
                continue  # the directory did not change it: Cadre's edit stands
            untouched = now is None if synced is _MISSING else now == synced
            if not untouched:
                user = users_by_id[link.platform_user_id]
                _conflict(
                    self.connector, self.sync, kind=DirectoryConflict.Kind.LOCAL_EDIT, user=user,
                    member=link.member, fields=["manager"], local={"manager": now},
                    message="Changed in Cadre since the last sync: manager",
                )  # fmt: skip
                self.counts["conflicts"] += 1
                continue
            link.synced_values["manager"] = leader
            changed.append(Member(pk=member_pk, manager_id=leader))
        if changed:
            _set_column(Member, "manager_id", [(m.pk, m.manager_id) for m in changed], "bigint")
            self.counts["managers_set"] += len(changed)
        _save_synced_values([link for link, _ in wanted.values()])

    def _deactivate(self, user: DirectoryUser, member: Member, link) -> None:
        try:
            with transaction.atomic():
                member_deactivate(actor=self.actor, member=member, reason=DEPARTED_REASON)
        except CadreError as error:
            _conflict(
                self.connector, self.sync, kind=DirectoryConflict.Kind.DEACTIVATE_REFUSED,
                user=user, member=member, message=str(error),
            )  # fmt: skip
            self.counts["conflicts"] += 1
            return
        if link is not None:
            UserLink.objects.filter(pk=link.pk).update(departed_at=self.now)
        self.counts["members_deactivated"] += 1


def directory_apply(
    connector: Connector, snapshot: DirectorySnapshot, *, sync: DirectorySync | None, full: bool
) -> Outcome:
    """Write a directory snapshot (call inside a transaction)."""
    run = _Apply(connector, sync, full=full)
    run.departments(snapshot.departments)
    run.users(snapshot.users)
    return run.outcome


# --- incremental: one contact-change event ----------------------------------------------------


def contact_change_apply(
    connector: Connector, change: ContactChange, *, client=None
) -> DirectorySync:
    """Apply one contact-change event. The user (or department) is read again from the
    platform, which is authoritative (WeCom's events carry only ids); a deleted user is
    deactivated. Recorded as a DirectorySync of kind "event"."""
    sync = DirectorySync.objects.create(
        organization_id=connector.organization_id,
        connector=connector,
        kind=DirectorySync.Kind.EVENT,
        status=DirectorySync.Status.RUNNING,
        phase=change.kind,
        started_at=timezone.now(),
    )
    try:
        client = client or directory_client(connector)
        user = department = None
        if change.kind == "user_deleted":
            user = change.user or DirectoryUser(id=change.object_id, name="", active=False)
            user.active = False
        elif change.is_user:
            user = client.read_user(change.object_id)
            if user is None:
                user = DirectoryUser(id=change.object_id, name="", active=False)
        elif change.kind != "department_deleted":
            department = client.read_department(change.object_id) or change.department
    except DirectoryRefused as error:
        return _fail(sync, error)
    except TransportError as error:
        return _fail(sync, refused(error))
    with transaction.atomic():
        run = _Apply(connector, sync, full=False)
        if change.kind == "department_deleted":
            if change.object_id in run.department_links:
                run._department_gone(change.object_id)
        elif department is not None:
            run.departments([department])
        if user is not None:
            if change.kind != "user_deleted" and (user.active or user.name):
                run.users([user], known_departments_only=True)
            else:
                link = (
                    UserLink.objects.filter(connector=connector, platform_user_id=user.id)
                    .select_related("member")
                    .first()
                )
                if link is not None and link.member.status != Member.Status.DEACTIVATED:
                    run._deactivate(user, link.member, link)
    _set(
        sync,
        status=DirectorySync.Status.SUCCEEDED,
        finished_at=timezone.now(),
        counts=run.counts,
        errors=run.outcome.errors[:MAX_ROW_ERRORS],
    )
    return sync


# --- the review queue -------------------------------------------------------------------------


@transaction.atomic
def directory_conflict_resolve(
    *,
    actor: Actor,
    conflict: DirectoryConflict,
    resolution: str,
    member: Member | None = None,
) -> DirectoryConflict:
    """Settle a queued conflict. local_edit: take_directory or keep_local; duplicate_email:
    link (to `member`), create (a member without the e-mail) or dismiss; any: dismiss."""
    actor.require("connector.manage", conflict.connector)
    conflict = DirectoryConflict.objects.select_for_update().get(pk=conflict.pk)
    if conflict.status != DirectoryConflict.Status.OPEN:
        raise Conflict("This conflict is already resolved.", code="already_resolved")
    kinds = DirectoryConflict.Kind
    allowed = {
        kinds.LOCAL_EDIT: {"take_directory", "keep_local", "dismiss"},
        kinds.DUPLICATE_EMAIL: {"link", "create", "dismiss"},
        kinds.DEACTIVATE_REFUSED: {"dismiss"},
    }[conflict.kind]
    if resolution not in allowed:
        raise InvalidInput(
            f"A {conflict.kind} conflict is resolved with: {', '.join(sorted(allowed))}.",
            code="invalid_resolution",
            details={"resolution": [f"Choose from: {', '.join(sorted(allowed))}"]},
        )
    connector = conflict.connector
    values = {k: v for k, v in (conflict.directory_values or {}).items()
              if k in DirectoryUser.__dataclass_fields__}  # fmt: skip
    try:
        user = DirectoryUser(**values)
    except TypeError:  # a record without the directory's id or name: nothing to apply
        raise Conflict(
            "The directory's record of this user is incomplete; run a sync to queue it again.",
            code="incomplete_conflict",
        ) from None
    link = UserLink.objects.filter(connector=connector, platform_user_id=user.id).first()
    if resolution in ("take_directory", "keep_local"):
        target = conflict.member
        if target is None or link is None:
            raise Conflict("The member is no longer linked to this directory user.")
        run = _Apply(connector, None, full=False)
        values = _member_values(user, run._department_pk(user, True) or None)
        if "manager" in conflict.fields:
            leader = UserLink.objects.filter(
                connector=connector, platform_user_id=user.leader_user_id
            ).first()
            values["manager"] = leader.member_id if leader else None
        values = {name: values[name] for name in conflict.fields if name in values}
        if resolution == "take_directory" and values:
            models = {"department": Department, "manager": Member}
            fields = {
                name: (
                    models[name].objects.filter(pk=value, organization_id=connector.organization_id)
                    .first() if name in models and value else value
                )
                for name, value in values.items()
            }  # fmt: skip
            member_update(actor=actor, member=target, **fields)
        link.synced_values = {**link.synced_values, **values}
        link.save(update_fields=["synced_values"])
    elif resolution == "link":
        if member is None or member.organization_id != connector.organization_id:
            raise InvalidInput("Choose a member of this organization.", code="member_required",
                               details={"member": ["Required."]})  # fmt: skip
        if (
            UserLink.objects.filter(connector=connector, member=member)
            .exclude(platform_user_id=user.id)
            .exists()
        ):
            raise Conflict(f"{member.display_name} is linked to another directory user.",
                           code="member_linked")  # fmt: skip
        UserLink.objects.update_or_create(
            connector=connector, platform_user_id=user.id[:191],
            defaults={"organization_id": connector.organization_id, "member": member,
                      "synced_values": {}},
        )  # fmt: skip
        IMIdentity.objects.get_or_create(
            organization_id=connector.organization_id, platform=connector.platform,
            tenant_key="", platform_user_id=user.id[:191],
            defaults={"member": member, "display_name": user.name[:150]},
        )  # fmt: skip
    elif resolution == "create":
        user.email = ""
        with transaction.atomic():
            run = _Apply(connector, None, full=False)
            run.users([user], known_departments_only=True)
    conflict.status = DirectoryConflict.Status.RESOLVED
    conflict.resolution = resolution
    conflict.resolved_by = actor.member
    conflict.resolved_at = timezone.now()
    conflict.updated_at = conflict.resolved_at
    conflict.save()
    audit.record(
        actor=actor,
        action="connector.directory_conflict_resolve",
        target=connector,
        changes={"conflict": conflict.pk, "kind": conflict.kind, "resolution": resolution,
                 "platform_user_id": user.id, "member": getattr(member, "pk", None)},
    )  # fmt: skip
    return conflict
