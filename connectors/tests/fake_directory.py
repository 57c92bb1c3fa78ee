"""Loopback contact directories of Feishu/Lark, WeCom and DingTalk, in their documented shapes.

One generated organization (`Org`: a department tree and its users) is served as each platform
serves it: Feishu's contact v3 (departments/0/children with fetch_child, users/find_by_department,
page_token paging, `code`/`msg` bodies), WeCom's cgi-bin department/list and user/list (whole
tree, `errcode`/`errmsg`), DingTalk's oapi topapi/v2 department/listsub (one level) and user/list
(cursor paging). Rate limits answer each platform's real code (Feishu 99991400, WeCom 45009,
DingTalk 90018) every `rate_limit_every` list calls; `forbidden` departments answer its
permission error (Feishu 40004, WeCom 60011, DingTalk 88 with sub_code 60011).
"""

from __future__ import annotations

import base64
import itertools
import random
from dataclasses import dataclass, field

from connectors.tests.fakes import FakePlatformServer, Recorded

CREDENTIALS = {
    "feishu": {"app_id": "cli_dir", "app_secret": "dir-secret"},
    "wecom": {
        "corp_id": "wwdir",
        "corp_secret": "dir-secret",
        "token": "QDG6eK",
        "encoding_aes_key": "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C",
    },
    "dingtalk": {"app_key": "dingdir", "app_secret": "dir-secret"},
}


NO_PRIVILEGE = "no privilege to access/modify contact/party/agent"


@dataclass
class FakeDepartment:
    key: int  # 1..n; the platform ids are derived from it
    name: str
    parent: int  # 0: directly under the company


@dataclass
class FakeUser:
    key: int
    name: str
    email: str
    mobile: str
    employee_no: str
    title: str
    departments: list[int]  # 0: the company (root) itself
    leader: int = 0  # the key of their leader (0: none)
    active: bool = True


@dataclass
class Org:
    departments: list[FakeDepartment] = field(default_factory=list)
    users: list[FakeUser] = field(default_factory=list)

    def leaders_of(self, department: int) -> list[int]:
        return [u.key for u in self.users if u.departments and u.departments[0] == department
                and u.title == "Head"]  # fmt: skip


def generate(users: int, departments: int, *, seed: int = 7) -> Org:
    """A directory of `departments` departments (a tree up to ~5 deep) and `users` users; the
    first user of each department heads it and leads its users; heads report to the parent's."""
    rng = random.Random(seed)
    org = Org()
    depth = {0: 0}
    for key in range(1, departments + 1):
        candidates = [k for k in range(0, key) if depth[k] < 4]
        parent = 0 if key <= 5 else rng.choice(candidates)
        depth[key] = depth[parent] + 1
        org.departments.append(FakeDepartment(key, f"Department {key}", parent))
    parents = {d.key: d.parent for d in org.departments}
    head: dict[int, int] = {}
    for key in range(1, users + 1):
        department = ((key - 1) % departments) + 1 if departments else 0
        is_head = department not in head
        if is_head:
            head[department] = key
        org.users.append(
            FakeUser(
                key=key,
                name=f"User {key}",
                email=f"user{key}@corp.example",
                mobile=f"+86 138{key:08d}",
                employee_no=f"E{key:05d}",
                title="Head" if is_head else "Engineer",
                departments=[department],
            )
        )
    for user in org.users:
        department = user.departments[0]
        if head.get(department) != user.key:
            user.leader = head.get(department, 0)
        else:
            parent = parents.get(department, 0)
            user.leader = head.get(parent, 0) if parent else 0
    return org


class FakeDirectory:
    """One platform's contact API over an `Org`, on a FakePlatformServer."""

    def __init__(self, server: FakePlatformServer, platform: str, org: Org):
        self.server = server
        self.platform = platform
        self.org = org
        self.tokens: set[str] = set()
        self.counter = itertools.count(1)
        self.rate_limit_every = 0
        self.list_calls = 0
        self.rate_limited = 0
        self.forbidden: set[int] = set()
        getattr(self, f"_routes_{platform}")()

    @property
    def url(self) -> str:
        return self.server.url

    def connector_settings(self) -> dict:
        settings = {"api_base_url": self.url, "backoff_base": 0.01}
        if self.platform == "dingtalk":
            settings["oapi_base_url"] = self.url
        return settings

    # helpers

    def _token(self) -> str:
        token = f"tok-{next(self.counter)}"
        self.tokens.add(token)
        return token

    def _limited(self) -> bool:
        self.list_calls += 1
        if self.rate_limit_every and self.list_calls % self.rate_limit_every == 0:
            self.rate_limited += 1
            return True
        return False

    def _children(self, parent: int) -> list[FakeDepartment]:
        return [d for d in self.org.departments if d.parent == parent]

    def _subtree(self, root: int) -> list[FakeDepartment]:
        found, queue = [], [root]
        while queue:
            for child in self._children(queue.pop(0)):
                found.append(child)
                queue.append(child.key)
        return found

    def _direct_users(self, department: int) -> list[FakeUser]:
        return [u for u in self.org.users if department in u.departments]

    def _user(self, key: int) -> FakeUser | None:
        return next((u for u in self.org.users if u.key == key), None)

    # Feishu / Lark: contact v3

    def _routes_feishu(self):
        s = self.server
        s.route("POST", "/open-apis/auth/v3/tenant_access_token/internal", self._feishu_token)
        s.route("GET", "/open-apis/contact/v3/departments/*", self._feishu_departments)
        s.route("GET", "/open-apis/contact/v3/users/find_by_department", self._feishu_users)
        s.route("GET", "/open-apis/contact/v3/users/*", self._feishu_user)

    def _feishu_token(self, request: Recorded):
        body = request.json()
        expected = CREDENTIALS["feishu"]
        if (body.get("app_id"), body.get("app_secret")) != (
            expected["app_id"],
            expected["app_secret"],
        ):
            return 200, {"code": 10014, "msg": "app secret invalid"}
        return 200, {"code": 0, "msg": "ok", "tenant_access_token": self._token(), "expire": 7200}

    def _feishu_auth(self, request: Recorded):
        if request.headers.get("authorization", "").removeprefix("Bearer ") not in self.tokens:
            return 200, {"code": 99991663, "msg": "Invalid access token for authorization."}
        return None

    @staticmethod
    def _feishu_page(request: Recorded, items: list, convert) -> dict:
        size = min(int(request.query.get("page_size", 50)), 50)
        token = request.query.get("page_token", "")
        start = int(base64.urlsafe_b64decode(token).decode()) if token else 0
        page = items[start : start + size]
        more = start + size < len(items)
        data = {"has_more": more, "items": [convert(item) for item in page]}
        if more:
            data["page_token"] = base64.urlsafe_b64encode(str(start + size).encode()).decode()
        return {"code": 0, "msg": "success", "data": data}

    def _feishu_department(self, d: FakeDepartment) -> dict:
        heads = self.org.leaders_of(d.key)
        return {
            "name": d.name,
            "department_id": f"D{d.key}",
            "open_department_id": f"od-{d.key}",
            "parent_department_id": f"od-{d.parent}" if d.parent else "0",
            "leader_user_id": f"ou_{heads[0]}" if heads else "",
            "status": {"is_deleted": False},
        }

    def _feishu_user_body(self, u: FakeUser) -> dict:
        return {
            "open_id": f"ou_{u.key}",
            "user_id": f"uid{u.key}",
            "union_id": f"on_{u.key}",
            "name": u.name,
            "email": u.email,
            "mobile": u.mobile,
            "employee_no": u.employee_no,
            "job_title": u.title,
            "department_ids": [f"od-{k}" if k else "0" for k in u.departments],
            "leader_user_id": f"ou_{u.leader}" if u.leader else "",
            "status": {
                "is_activated": u.active,
                "is_frozen": False,
                "is_resigned": not u.active,
                "is_exited": False,
            },
        }

    @staticmethod
    def _feishu_key(value: str) -> int:
        return 0 if value == "0" else int(value.removeprefix("od-") or 0)

    def _feishu_departments(self, request: Recorded):
        if denied := self._feishu_auth(request):
            return denied
        rest = request.path.removeprefix("/open-apis/contact/v3/departments/")
        if rest.endswith("/children"):
            key = self._feishu_key(rest.removesuffix("/children"))
            if key in self.forbidden:
                return 400, {"code": 40004, "msg": "no dept authority error"}
            if self._limited():
                return 400, {"code": 99991400, "msg": "request trigger frequency limit"}
            if request.query.get("fetch_child") == "true":
                items = self._subtree(key)
            else:
                items = self._children(key)
            return 200, self._feishu_page(request, items, self._feishu_department)
        key = self._feishu_key(rest)
        department = next((d for d in self.org.departments if d.key == key), None)
        if department is None:
            return 400, {"code": 40003, "msg": "department not found"}
        return 200, {"code": 0, "data": {"department": self._feishu_department(department)}}

    def _feishu_users(self, request: Recorded):
        if denied := self._feishu_auth(request):
            return denied
        key = self._feishu_key(request.query.get("department_id", "0"))
        if key in self.forbidden:
            return 400, {"code": 40004, "msg": "no dept authority error"}
        if self._limited():
            return 400, {"code": 99991400, "msg": "request trigger frequency limit"}
        return 200, self._feishu_page(request, self._direct_users(key), self._feishu_user_body)

    def _feishu_user(self, request: Recorded):
        if denied := self._feishu_auth(request):
            return denied
        key = int(request.path.rsplit("ou_", 1)[-1] or 0)
        user = self._user(key)
        if user is None:
            return 400, {"code": 41050, "msg": "no user authority error"}
        return 200, {"code": 0, "data": {"user": self._feishu_user_body(user)}}

    # WeCom: cgi-bin

    def _routes_wecom(self):
        s = self.server
        s.route("GET", "/cgi-bin/gettoken", self._wecom_token)
        s.route("GET", "/cgi-bin/department/list", self._wecom_departments)
        s.route("GET", "/cgi-bin/department/get", self._wecom_department_get)
        s.route("GET", "/cgi-bin/user/list", self._wecom_users)
        s.route("GET", "/cgi-bin/user/get", self._wecom_user_get)

    def _wecom_token(self, request: Recorded):
        expected = CREDENTIALS["wecom"]
        if (request.query.get("corpid"), request.query.get("corpsecret")) != (
            expected["corp_id"],
            expected["corp_secret"],
        ):
            return 200, {"errcode": 40013, "errmsg": "invalid corpid"}
        return 200, {
            "errcode": 0,
            "errmsg": "ok",
            "access_token": self._token(),
            "expires_in": 7200,
        }

    def _wecom_auth(self, request: Recorded):
        if request.query.get("access_token") not in self.tokens:
            return 200, {"errcode": 40014, "errmsg": "invalid access_token"}
        return None

    @staticmethod
    def _wecom_id(key: int) -> int:
        return key + 1  # the company is department 1

    def _wecom_department(self, d: FakeDepartment) -> dict:
        heads = self.org.leaders_of(d.key)
        return {
            "id": self._wecom_id(d.key),
            "name": d.name,
            "parentid": self._wecom_id(d.parent),
            "order": d.key,
            "department_leader": [f"u{k}" for k in heads],
        }

    def _wecom_user(self, u: FakeUser) -> dict:
        return {
            "errcode": 0,
            "errmsg": "ok",
            "userid": f"u{u.key}",
            "name": u.name,
            "department": [self._wecom_id(k) for k in u.departments],
            "main_department": self._wecom_id(u.departments[0]) if u.departments else 1,
            "position": u.title,
            "mobile": u.mobile,
            "email": u.email,
            "status": 1 if u.active else 5,
            "direct_leader": [f"u{u.leader}"] if u.leader else [],
            "extattr": {"attrs": [{"type": 0, "name": "工号", "text": {"value": u.employee_no}}]},
        }

    def _wecom_departments(self, request: Recorded):
        if denied := self._wecom_auth(request):
            return denied
        if self.forbidden:
            return 200, {
                "errcode": 60011,
                "errmsg": "no privilege to access/modify contact/party/agent",
            }
        if self._limited():
            return 200, {"errcode": 45009, "errmsg": "api freq out of limit"}
        root = {"id": 1, "name": "Corp", "parentid": 0, "order": 0, "department_leader": []}
        return 200, {
            "errcode": 0,
            "errmsg": "ok",
            "department": [root, *(self._wecom_department(d) for d in self.org.departments)],
        }

    def _wecom_department_get(self, request: Recorded):
        if denied := self._wecom_auth(request):
            return denied
        key = int(request.query.get("id", 0)) - 1
        department = next((d for d in self.org.departments if d.key == key), None)
        if department is None:
            return 200, {"errcode": 60123, "errmsg": "invalid party id"}
        return 200, {"errcode": 0, "department": self._wecom_department(department)}

    def _wecom_users(self, request: Recorded):
        if denied := self._wecom_auth(request):
            return denied
        if self.forbidden:
            return 200, {
                "errcode": 60011,
                "errmsg": "no privilege to access/modify contact/party/agent",
            }
        if self._limited():
            return 200, {"errcode": 45009, "errmsg": "api freq out of limit"}
        users = [self._wecom_user(u) for u in self.org.users]
        for user in users:
            user.pop("errcode"), user.pop("errmsg")
        return 200, {"errcode": 0, "errmsg": "ok", "userlist": users}

    def _wecom_user_get(self, request: Recorded):
        if denied := self._wecom_auth(request):
            return denied
        user = self._user(int(request.query.get("userid", "u0")[1:] or 0))
        if user is None:
            return 200, {"errcode": 60111, "errmsg": "invalid string value `userid`"}
        return 200, self._wecom_user(user)

    # DingTalk: oapi topapi/v2

    def _routes_dingtalk(self):
        s = self.server
        s.route("POST", "/v1.0/oauth2/accessToken", self._dingtalk_token)
        s.route("POST", "/topapi/v2/department/listsub", self._dingtalk_listsub)
        s.route("POST", "/topapi/v2/department/get", self._dingtalk_department_get)
        s.route("POST", "/topapi/v2/user/list", self._dingtalk_users)
        s.route("POST", "/topapi/v2/user/get", self._dingtalk_user_get)

    def _dingtalk_token(self, request: Recorded):
        body = request.json()
        expected = CREDENTIALS["dingtalk"]
        if (body.get("appKey"), body.get("appSecret")) != (
            expected["app_key"],
            expected["app_secret"],
        ):
            return 400, {
                "code": "invalidClientIdOrSecret",
                "message": "无效的clientId或者clientSecret",
            }
        return 200, {"accessToken": self._token(), "expireIn": 7200}

    def _dingtalk_auth(self, request: Recorded):
        if request.query.get("access_token") not in self.tokens:
            return 200, {"errcode": 40014, "errmsg": "不合法的access_token"}
        return None

    @staticmethod
    def _dingtalk_id(key: int) -> int:
        return 1 if key == 0 else 100 + key

    def _dingtalk_key(self, dept_id: int) -> int:
        return 0 if dept_id == 1 else dept_id - 100

    def _denied(self, key: int) -> dict | None:
        if key in self.forbidden:
            return {
                "errcode": 88,
                "sub_code": "60011",
                "sub_msg": "没有调用该接口的权限",
                "errmsg": "ding talk error[subcode=60011,submsg=没有调用该接口的权限]",
            }
        if self._limited():
            return {"errcode": 90018, "errmsg": "当前企业调用该接口的频率超过限制"}
        return None

    def _dingtalk_listsub(self, request: Recorded):
        if denied := self._dingtalk_auth(request):
            return denied
        key = self._dingtalk_key(int(request.json().get("dept_id", 1)))
        if refused := self._denied(key):
            return 200, refused
        result = [
            {
                "dept_id": self._dingtalk_id(d.key),
                "name": d.name,
                "parent_id": self._dingtalk_id(d.parent),
                "create_dept_group": False,
                "auto_add_user": False,
            }
            for d in self._children(key)
        ]
        return 200, {"errcode": 0, "errmsg": "ok", "result": result, "request_id": "r"}

    def _dingtalk_user(self, u: FakeUser, department: int | None = None) -> dict:
        return {
            "userid": f"d{u.key}",
            "unionid": f"un{u.key}",
            "name": u.name,
            "mobile": u.mobile,
            "email": u.email,
            "job_number": u.employee_no,
            "title": u.title,
            "dept_id_list": [self._dingtalk_id(k) for k in u.departments],
            "leader": u.title == "Head" and department in (None, *u.departments[:1]),
            "active": u.active,
            "admin": False,
            "boss": False,
        }

    def _dingtalk_users(self, request: Recorded):
        if denied := self._dingtalk_auth(request):
            return denied
        body = request.json()
        key = self._dingtalk_key(int(body.get("dept_id", 1)))
        if refused := self._denied(key):
            return 200, refused
        size = min(int(body.get("size", 100)), 100)
        cursor = int(body.get("cursor", 0))
        users = self._direct_users(key)
        page = users[cursor : cursor + size]
        more = cursor + size < len(users)
        result = {"has_more": more, "list": [self._dingtalk_user(u, key) for u in page]}
        if more:
            result["next_cursor"] = cursor + size
        return 200, {"errcode": 0, "errmsg": "ok", "result": result, "request_id": "r"}

    def _dingtalk_user_get(self, request: Recorded):
        if denied := self._dingtalk_auth(request):
            return denied
        user = self._user(int(str(request.json().get("userid", "d0"))[1:] or 0))
        if user is None:
            return 200, {"errcode": 60121, "errmsg": "找不到该用户"}
        body = self._dingtalk_user(user)
        body["manager_userid"] = f"d{user.leader}" if user.leader else ""
        return 200, {"errcode": 0, "errmsg": "ok", "result": body}

    def _dingtalk_department_get(self, request: Recorded):
        if denied := self._dingtalk_auth(request):
            return denied
        key = self._dingtalk_key(int(request.json().get("dept_id", 1)))
        department = next((d for d in self.org.departments if d.key == key), None)
        if department is None:
            return 200, {"errcode": 60003, "errmsg": "部门不存在"}
        heads = self.org.leaders_of(key)
        return 200, {
            "errcode": 0,
            "result": {
                "dept_id": self._dingtalk_id(key),
                "name": department.name,
                "parent_id": self._dingtalk_id(department.parent),
                "dept_manager_userid_list": [f"d{k}" for k in heads],
            },
        }


def platform_user_id(platform: str, key: int) -> str:
    return {"feishu": f"ou_{key}", "wecom": f"u{key}", "dingtalk": f"d{key}"}[platform]


def platform_department_id(platform: str, key: int) -> str:
    return {"feishu": f"od-{key}", "wecom": str(key + 1), "dingtalk": str(100 + key)}[platform]
