"""WeCom contact directory: cgi-bin/department/list and user/list (whole tree in one answer
each, no paging), and the change_contact events (which since 2022 carry only ids: the user is
read again through the API)."""

from __future__ import annotations

import httpx

from connectors.directory.contacts import (
    ContactChange,
    DirectoryClient,
    DirectoryDepartment,
    DirectorySnapshot,
    DirectoryUser,
    PermissionDenied,
    Progress,
)
from connectors.wecom.transport import WeComTransport

ROOT = "1"
# No privilege for the contact/party/agent; API forbidden for the app; IP not allowed.
PERMISSION_CODES = {60011, 48002, 60020}
USER_NOT_FOUND_CODES = {60111}
ACTIVE_STATUSES = {1, 4}  # 1 activated, 4 not yet activated; 2 disabled, 5 exited

CHANGE_KINDS = {
    "create_user": "user_created",
    "update_user": "user_updated",
    "delete_user": "user_deleted",
    "create_party": "department_created",
    "update_party": "department_updated",
    "delete_party": "department_deleted",
}


def _employee_no(item: dict) -> str:
    for attr in (item.get("extattr") or {}).get("attrs") or []:
        if str(attr.get("name", "")).lower() in ("employee_no", "employee id", "工号"):
            return str((attr.get("text") or {}).get("value") or attr.get("value") or "")
    return ""


def _user(item: dict) -> DirectoryUser:
    leaders = item.get("direct_leader") or []
    main = str(item.get("main_department") or "")
    departments = [str(d) for d in item.get("department") or []]
    if main and main in departments:  # the main department first: it becomes the member's
        departments.remove(main)
        departments.insert(0, main)
    return DirectoryUser(
        id=str(item.get("userid") or ""),
        name=str(item.get("name") or ""),
        email=str(item.get("email") or item.get("biz_mail") or ""),
        mobile=str(item.get("mobile") or ""),
        employee_no=_employee_no(item),
        title=str(item.get("position") or ""),
        department_ids=[d for d in departments if d != ROOT],
        leader_user_id=str(leaders[0]) if leaders else "",
        active=int(item.get("status") or 1) in ACTIVE_STATUSES,
    )


def _department(item: dict) -> DirectoryDepartment:
    parent = str(item.get("parentid") or "")
    leaders = item.get("department_leader") or []
    return DirectoryDepartment(
        id=str(item.get("id") or ""),
        name=str(item.get("name") or ""),
        parent_id="" if parent in ("", "0", ROOT) else parent,
        leader_user_id=str(leaders[0]) if leaders else "",
    )


class WeComDirectory(DirectoryClient, WeComTransport):
    def check(self, response: httpx.Response) -> dict:
        try:
            data = response.json()
        except ValueError:
            data = None
        if isinstance(data, dict) and data.get("errcode") in PERMISSION_CODES:
            raise PermissionDenied(
                f"WeCom {data['errcode']}: {data.get('errmsg', '')}",
                platform_code=str(data["errcode"]),
            )
        return super().check(response)

    def read_directory(self, progress: Progress | None = None) -> DirectorySnapshot:
        snapshot = DirectorySnapshot()
        data = self.call("GET", "/cgi-bin/department/list")
        snapshot.departments = [
            _department(item)
            for item in data.get("department") or []
            if str(item.get("id")) != ROOT
        ]
        if progress:
            progress("departments", len(snapshot.departments), len(snapshot.departments))
        data = self.call(
            "GET", "/cgi-bin/user/list", params={"department_id": ROOT, "fetch_child": 1}
        )
        seen: set[str] = set()
        for item in data.get("userlist") or []:
            user = _user(item)
            if user.id and user.id not in seen:
                seen.add(user.id)
                snapshot.users.append(user)
        if progress:
            progress("users", len(snapshot.users), len(snapshot.users))
        return snapshot

    def read_user(self, user_id: str) -> DirectoryUser | None:
        try:
            data = self.call("GET", "/cgi-bin/user/get", params={"userid": user_id})
        except PermissionDenied:
            raise
        except Exception as error:
            if any(f"WeCom {code}" in str(error) for code in USER_NOT_FOUND_CODES):
                return None
            raise
        return _user(data)

    def read_department(self, department_id: str) -> DirectoryDepartment | None:
        data = self.call("GET", "/cgi-bin/department/get", params={"id": department_id})
        item = data.get("department")
        return _department(item) if item else None


def contact_change(data: dict) -> ContactChange | None:
    """A change_contact callback (decrypted XML as a dict) as a change."""
    if data.get("Event") != "change_contact":
        return None
    kind = CHANGE_KINDS.get(data.get("ChangeType", ""))
    if kind is None:
        return None
    if kind.startswith("user_"):
        return ContactChange(kind, str(data.get("UserID", "")))
    return ContactChange(kind, str(data.get("Id", "")))


DIRECTORY = WeComDirectory
