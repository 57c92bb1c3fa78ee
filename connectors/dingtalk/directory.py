"""DingTalk contact directory: oapi topapi/v2/department/listsub (one level per call, walked
from the root) and topapi/v2/user/list (per department, cursor paging), and the contact events
(user_add_org, user_modify_org, user_leave_org, org_dept_create/modify/remove).

The oapi endpoints take the app's access token as `access_token` in the query and answer
`errcode`; errcode 88 carries the real reason in `sub_code` (60011: no permission).
"""

from __future__ import annotations

import httpx

from connectors.base.transport import RateLimited, TokenInvalid, TransportError
from connectors.dingtalk.transport import DingTalkTransport
from connectors.directory.contacts import (
    ContactChange,
    DirectoryClient,
    DirectoryDepartment,
    DirectorySnapshot,
    DirectoryUser,
    PermissionDenied,
    Progress,
)

ROOT = 1
PAGE_SIZE = 100  # topapi/v2/user/list's maximum
OAPI = "https://oapi.dingtalk.com"
PERMISSION_CODES = {"60011", "50004", "60020"}  # no permission, dept out of scope, IP
RATE_LIMIT_CODES = {"90018", "90002", "90006", "-1"}
TOKEN_CODES = {"40014", "42001"}
USER_NOT_FOUND_CODES = {"60121", "33012"}

CHANGE_KINDS = {
    "user_add_org": "user_created",
    "user_modify_org": "user_updated",
    "user_leave_org": "user_deleted",
    "org_dept_create": "department_created",
    "org_dept_modify": "department_updated",
    "org_dept_remove": "department_deleted",
}


def _user(item: dict) -> DirectoryUser:
    return DirectoryUser(
        id=str(item.get("userid") or ""),
        name=str(item.get("name") or ""),
        email=str(item.get("email") or item.get("org_email") or ""),
        mobile=str(item.get("mobile") or ""),
        employee_no=str(item.get("job_number") or ""),
        title=str(item.get("title") or ""),
        department_ids=[str(d) for d in item.get("dept_id_list") or [] if int(d) != ROOT],
        # user/list says who leads a department ("leader"), not whom a user reports to: the
        # sync gives each user their department's leader (see _leaders below).
        leader_user_id=str(item.get("manager_userid") or ""),
        active=item.get("active", True) is not False,
    )


class DingTalkDirectory(DirectoryClient, DingTalkTransport):
    def __init__(self, connector, **kwargs):
        super().__init__(connector, **kwargs)
        self.oapi = (self.settings.get("oapi_base_url") or OAPI).rstrip("/")

    _oapi_call = False

    def authorize(self, request_kwargs: dict, token: str) -> None:
        if self._oapi_call:
            request_kwargs.setdefault("params", {})["access_token"] = token
        else:
            super().authorize(request_kwargs, token)

    def check(self, response: httpx.Response) -> dict:
        try:
            data = response.json()
        except ValueError:
            data = None
        if isinstance(data, dict) and "errcode" in data:
            code = str(data.get("errcode"))
            sub = str(data.get("sub_code") or "")
            message = data.get("sub_msg") or data.get("errmsg") or ""
            if code == "0":
                return data
            if code in PERMISSION_CODES or sub in PERMISSION_CODES:
                raise PermissionDenied(
                    f"DingTalk {sub or code}: {message}", platform_code=sub or code
                )
            if code in RATE_LIMIT_CODES or sub in RATE_LIMIT_CODES:
                raise RateLimited(f"DingTalk {sub or code}: {message}", status=response.status_code)
            if code in TOKEN_CODES or sub in TOKEN_CODES:
                raise TokenInvalid(f"DingTalk {sub or code}: {message}")
            raise TransportError(f"DingTalk {sub or code}: {message}")
        return super().check(response)

    def _post(self, path: str, body: dict) -> dict:
        self._oapi_call = True
        try:
            return self.call("POST", f"{self.oapi}{path}", json=body)
        finally:
            self._oapi_call = False

    def read_directory(self, progress: Progress | None = None) -> DirectorySnapshot:
        snapshot = DirectorySnapshot()
        queue = [ROOT]
        while queue:
            parent = queue.pop(0)
            data = self._post("/topapi/v2/department/listsub", {"dept_id": parent})
            for item in data.get("result") or []:
                dept_id = int(item.get("dept_id"))
                parent_id = int(item.get("parent_id") or ROOT)
                snapshot.departments.append(
                    DirectoryDepartment(
                        id=str(dept_id),
                        name=str(item.get("name") or ""),
                        parent_id="" if parent_id == ROOT else str(parent_id),
                    )
                )
                queue.append(dept_id)
            if progress:
                progress("departments", len(snapshot.departments), 0)
        seen: dict[str, DirectoryUser] = {}
        leaders: dict[str, list[str]] = {}
        department_ids = [str(ROOT), *(d.id for d in snapshot.departments)]
        for done, department_id in enumerate(department_ids, 1):
            cursor = 0
            while True:
                data = self._post(
                    "/topapi/v2/user/list",
                    {"dept_id": int(department_id), "cursor": cursor, "size": PAGE_SIZE},
                )
                result = data.get("result") or {}
                for item in result.get("list") or []:
                    user = _user(item)
                    if item.get("leader"):
                        leaders.setdefault(department_id, []).append(user.id)
                    if user.id and user.id not in seen:
                        seen[user.id] = user
                if not result.get("has_more"):
                    break
                cursor = int(result.get("next_cursor") or 0)
            if progress:
                progress("users", done, len(department_ids))
        parents = {d.id: d.parent_id for d in snapshot.departments}
        for department in snapshot.departments:
            found = leaders.get(department.id) or []
            department.leader_user_id = found[0] if found else ""
        for user in seen.values():
            if not user.leader_user_id:
                user.leader_user_id = _leader_of(user, leaders, parents)
        snapshot.users = list(seen.values())
        return snapshot

    def read_user(self, user_id: str) -> DirectoryUser | None:
        try:
            data = self._post("/topapi/v2/user/get", {"userid": user_id})
        except TransportError as error:
            if any(code in str(error) for code in USER_NOT_FOUND_CODES):
                return None
            raise
        return _user(data.get("result") or {})

    def read_department(self, department_id: str) -> DirectoryDepartment | None:
        data = self._post("/topapi/v2/department/get", {"dept_id": int(department_id)})
        item = data.get("result") or {}
        if not item:
            return None
        parent_id = int(item.get("parent_id") or ROOT)
        managers = item.get("dept_manager_userid_list") or []
        return DirectoryDepartment(
            id=str(item.get("dept_id")),
            name=str(item.get("name") or ""),
            parent_id="" if parent_id == ROOT else str(parent_id),
            leader_user_id=str(managers[0]) if managers else "",
        )


def _leader_of(user: DirectoryUser, leaders: dict, parents: dict) -> str:
    """The leader of the user's first department (its parent's when the user leads it)."""
    department = user.department_ids[0] if user.department_ids else str(ROOT)
    while True:
        found = [pk for pk in leaders.get(department, []) if pk != user.id]
        if found:
            return found[0]
        if department == str(ROOT):
            return ""
        department = parents.get(department) or str(ROOT)


def contact_changes(data: dict) -> list[ContactChange]:
    """A contact event ({"EventType", "UserId": [...], "DeptId": [...]}) as changes."""
    kind = CHANGE_KINDS.get(str(data.get("EventType", "")))
    if kind is None:
        return []
    ids = data.get("UserId" if kind.startswith("user_") else "DeptId") or []
    if not isinstance(ids, list):
        ids = [ids]
    return [ContactChange(kind, str(pk)) for pk in ids if str(pk)]


DIRECTORY = DingTalkDirectory
