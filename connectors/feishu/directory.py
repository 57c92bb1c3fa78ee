"""Feishu/Lark contact directory: contact v3 departments (children, fetch_child) and users
(find_by_department), paged with page_token, and the contact.*_v3 change events."""

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
from connectors.feishu.transport import FeishuTransport

ROOT = "0"
PAGE_SIZE = 50  # the contact v3 list endpoints' maximum
# No access to the department (outside the app's contact scope) / the app lacks the scope.
PERMISSION_CODES = {40004, 99991672, 99991679}
USER_NOT_FOUND_CODES = {41050, 40010}

CHANGE_KINDS = {
    "contact.user.created_v3": "user_created",
    "contact.user.updated_v3": "user_updated",
    "contact.user.deleted_v3": "user_deleted",
    "contact.department.created_v3": "department_created",
    "contact.department.updated_v3": "department_updated",
    "contact.department.deleted_v3": "department_deleted",
}


def _user(item: dict) -> DirectoryUser:
    status = item.get("status") or {}
    active = not (status.get("is_resigned") or status.get("is_exited") or status.get("is_frozen"))
    return DirectoryUser(
        id=str(item.get("open_id") or ""),
        name=str(item.get("name") or ""),
        email=str(item.get("email") or item.get("enterprise_email") or ""),
        mobile=str(item.get("mobile") or ""),
        employee_no=str(item.get("employee_no") or ""),
        title=str(item.get("job_title") or ""),
        department_ids=[str(d) for d in item.get("department_ids") or [] if str(d) != ROOT],
        leader_user_id=str(item.get("leader_user_id") or ""),
        active=active,
    )


def _department(item: dict) -> DirectoryDepartment:
    parent = str(item.get("parent_department_id") or "")
    return DirectoryDepartment(
        id=str(item.get("open_department_id") or item.get("department_id") or ""),
        name=str(item.get("name") or ""),
        parent_id="" if parent in ("", ROOT) else parent,
        leader_user_id=str(item.get("leader_user_id") or ""),
    )


class FeishuDirectory(DirectoryClient, FeishuTransport):
    params = {"user_id_type": "open_id", "department_id_type": "open_department_id"}

    def check(self, response: httpx.Response) -> dict:
        try:
            data = response.json()
        except ValueError:
            data = None
        if isinstance(data, dict) and data.get("code") in PERMISSION_CODES:
            raise PermissionDenied(
                f"Feishu {data['code']}: {data.get('msg', '')}", platform_code=str(data["code"])
            )
        return super().check(response)

    def _pages(self, path: str, params: dict):
        token = ""
        while True:
            query = {**self.params, **params, "page_size": PAGE_SIZE}
            if token:
                query["page_token"] = token
            data = self.call("GET", path, params=query).get("data") or {}
            yield data.get("items") or []
            token = data.get("page_token") or ""
            if not data.get("has_more") or not token:
                return

    def read_directory(self, progress: Progress | None = None) -> DirectorySnapshot:
        snapshot = DirectorySnapshot()
        for items in self._pages(
            f"/open-apis/contact/v3/departments/{ROOT}/children", {"fetch_child": "true"}
        ):
            snapshot.departments.extend(
                _department(item)
                for item in items
                if not (item.get("status") or {}).get("is_deleted")
            )
            if progress:
                progress("departments", len(snapshot.departments), 0)
        seen: set[str] = set()
        department_ids = [ROOT, *(d.id for d in snapshot.departments)]
        for done, department_id in enumerate(department_ids, 1):
            for items in self._pages(
                "/open-apis/contact/v3/users/find_by_department",
                {"department_id": department_id},
            ):
                for item in items:
                    user = _user(item)
                    if user.id and user.id not in seen:
                        seen.add(user.id)
                        snapshot.users.append(user)
            if progress:
                progress("users", done, len(department_ids))
        return snapshot

    def read_user(self, user_id: str) -> DirectoryUser | None:
        try:
            data = self.call(
                "GET", f"/open-apis/contact/v3/users/{user_id}", params=dict(self.params)
            )
        except PermissionDenied:
            raise
        except Exception as error:  # a deleted user answers an error code, not a 404
            if any(str(code) in str(error) for code in USER_NOT_FOUND_CODES):
                return None
            raise
        user = (data.get("data") or {}).get("user")
        return _user(user) if user else None

    def read_department(self, department_id: str) -> DirectoryDepartment | None:
        data = self.call(
            "GET", f"/open-apis/contact/v3/departments/{department_id}", params=dict(self.params)
        )
        item = (data.get("data") or {}).get("department")
        return _department(item) if item else None


def contact_change(event_type: str, event: dict) -> ContactChange | None:
    """A contact.*_v3 event as a change (None for any other event)."""
    kind = CHANGE_KINDS.get(event_type)
    if kind is None:
        return None
    item = event.get("object") if isinstance(event.get("object"), dict) else {}
    if kind.startswith("user_"):
        user = _user(item)
        if kind == "user_deleted":
            user.active = False
        return ContactChange(kind, user.id, user=user)
    department = _department(item)
    return ContactChange(kind, department.id, department=department)


DIRECTORY = FeishuDirectory
