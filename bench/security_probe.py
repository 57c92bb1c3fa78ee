"""Scripted re-run of the issue 14 and issue 29 security probes, over HTTP as an outsider.

Issue 14: sign replay, brute force, malformed events, forgery; issue 29: hostile input,
evaluation, outbound URLs, shared memory, SSO and SCIM.

Prints one line per check, `PASS name: detail` or `FAIL name: detail` (`SKIP` when the target
was not given what the check needs), then `SUMMARY passed=N failed=N skipped=N`; exits 1 if
any check failed.

    .venv/bin/python bench/security_probe.py            # its own server and database

Against a running Cadre instead (what is not given is skipped):

    .venv/bin/python bench/security_probe.py --url http://127.0.0.1:8000 \\
        --api-key cadre_… --email owner@example.com --password … \\
        --employee-api-key cadre_… --colleague-api-key cadre_… --scim-token scim_… \\
        --dingtalk-callback /connectors/dingtalk/<id>/events --dingtalk-secret <app secret> \\
        --feishu-callback /connectors/feishu/<id>/events --feishu-encrypt-key <encrypt key> \\
        --export <an extracted audit export directory>

`--api-key` is the owner's (`--email`) key with the scopes org:read, memory:read, memory:write,
templates:write, models:write and connectors:write; `--employee-api-key` an employee's key with
memory:read, memory:write and templates:write (capped by the employee role);
`--colleague-api-key` another employee's memory:read key; `--scim-token` a SCIM token an IT
admin made. The probe's own server makes all of these, on a fresh organization.

Issue 29's findings, re-probed over HTTP as an outsider would:
- F2: 54 malformed Mem0/MemOS requests with the key (the suite's list in
  tests/api/test_compat_hostile.py: `user_id` "²", NUL in content, user_id, app_id and metadata,
  `[` x 50,000, `top_k` 1e309, unicode digits) each answer 4xx and store nothing; then a
  console page, an API list and /readyz still answer 200 (no 503 `database_busy`).
- F4: an employee's key is refused the evaluation runs, cases and suites.
- F3: the owner's key may not build a retrieval case on another member's `user:` scope (400
  naming the scope, nothing stored; a case on `organization` is the control).
- F7/F9/F12: a model provider at 169.254.169.254, [fd00:ec2::254] or this probe's loopback
  listener, an MCP server at the same three, an OIDC issuer at 169.254.169.254 (and, on its own
  server, at loopback) are refused on save; an anonymous SSO sign-in link of a provider stored
  with a loopback issuer fetches nothing; the listener receives nothing. The probe's own
  server runs with no CADRE_MODEL_PROVIDER/OIDC/MCP_ALLOWED_HOSTS (a fresh install): loopback
  must be refused there. Against a target that allows loopback, a saved loopback URL is
  deleted again and reported SKIP.
- F1: a cross-organization SSO takeover needs a second organization and an IdP; SKIP, covered
  by tests/tenancy/test_identity_isolation.py.
- F8: an employee's organization-scope memory is stored `verification: unverified`, and a
  colleague's search does not return it (an owner's memory with the same words is the
  control); both are deleted afterwards, as are the probe's memory and evaluation suite.
- F5/F6/F11: the IT admin's SCIM token may not deactivate the owner (403, still active; a 200
  is undone at once); GET /scim/v2/Users answers 200 with admin@demo.local among the members;
  on its own server a member at a .local domain is deprovisioned by PATCH active:false; 40
  wrong SCIM tokens are 401 then 429 from the 31st (the API keys' budget: a wrong API key is
  then 429 too).
- F10: SCIM `/Users/²`, `/Groups/²`, `id eq "²"`, `members eq "²"`, a startIndex past bigint,
  NUL, 300-character and deep userNames, `members:[{"value":"²"}]`; an evaluation run with
  `candidate.version` "²"; the Memory Viewer's timeline at `scope=user:²`: never a 5xx, writes
  4xx storing nothing. ("Test connection" against a non-JSON 200 needs an allowed loopback
  model endpoint: tests/agents/test_provider_outbound.py.)

The probe's own server is uvicorn serving cadre.asgi in the probe's process, with a database
pool of 4 (DATABASE_POOL_SIZE), so a request that kept its connection shows as 503 within a few
requests; tasks run eagerly there. The attacker's receiver and the loopback listener are
servers of this script: a Cadre on another machine cannot reach them, so "nothing sent" is
only meaningful for a Cadre on this one. The sign-in, SCIM-token and API-key checks lock this
machine's address out of that Cadre for the lock's duration (own server: the probe clears its
failed-authentication budget between them). The checks reuse the test suite's request builders
(tests and connectors' tests), so the probe and the tests send the same payloads. Schema
fuzzing is the schemathesis suite's and bench/hostile_fuzz.py's job: `--schemathesis` runs the
`st` CLI against the target if it is installed, and is skipped otherwise.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import quote

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "platform")]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cadre.settings")
# Keys of this run (used signs, throttles, sign-in locks) apart from anyone else's on this Redis.
os.environ.setdefault("CADRE_CACHE_PREFIX", "cadre-security-probe")
os.environ.setdefault("LOG_LEVEL", "ERROR")  # the check lines are the output

PROBE_DB = "cadre_security_probe"
PASSWORD = "probe-owner-passphrase-42"


@dataclass
class Target:
    url: str
    api_key: str = ""
    email: str = ""
    password: str = ""
    dingtalk_callback: str = ""
    dingtalk_secret: str = ""
    feishu_callback: str = ""
    feishu_encrypt_key: str = ""
    export: Path | None = None
    employee_api_key: str = ""
    colleague_api_key: str = ""
    scim_token: str = ""
    # Self-hosted only: counts straight from the database (an outside target uses the API).
    count_runs: Callable[[], int] | None = None
    # Self-hosted only: what the probe arranged (an outside target: looked up, or skipped).
    own_server: bool = False
    owner_member_id: int | None = None
    employee_member_id: int | None = None
    scim_leaver_id: int | None = None  # a member at a .local domain SCIM may deprovision
    sso_start_path: str = ""  # an OIDC provider stored with the loopback listener as issuer
    listener: Any = None  # a loopback FakePlatformServer that must receive nothing
    reset_auth_failures: Callable[[], None] | None = None


@dataclass
class Results:
    lines: list[tuple[str, str, str]] = field(default_factory=list)

    def report(self, outcome: str, name: str, detail: str) -> None:
        self.lines.append((outcome, name, detail))
        print(f"{outcome} {name}: {detail}", flush=True)

    def check(self, name: str, ok: bool, detail: str) -> None:
        self.report("PASS" if ok else "FAIL", name, detail)

    def summary(self) -> int:
        counts = {
            key: sum(1 for line in self.lines if line[0] == key) for key in ("PASS", "FAIL", "SKIP")
        }
        print(
            f"SUMMARY passed={counts['PASS']} failed={counts['FAIL']} skipped={counts['SKIP']}",
            flush=True,
        )
        return 1 if counts["FAIL"] else 0


def _runs(target: Target, client: httpx.Client) -> int | None:
    if target.count_runs is not None:
        return target.count_runs()
    if not target.api_key:
        return None
    response = client.get("/api/v1/runs/", headers={"Authorization": f"Bearer {target.api_key}"})
    return response.json().get("count") if response.status_code == 200 else None


# --- 1. DingTalk: a captured sign replayed with a new body and an attacker's sessionWebhook -----


def check_dingtalk_replay(target: Target, results: Results) -> None:
    from connectors.dingtalk.inbound import sign
    from connectors.dingtalk.tests.test_replay import message
    from connectors.tests.fakes import FakePlatformServer

    name = "dingtalk_sign_replay"
    if not (target.dingtalk_callback and target.dingtalk_secret):
        results.report("SKIP", name, "no --dingtalk-callback/--dingtalk-secret")
        return
    attacker = FakePlatformServer().start()
    attacker.route("POST", "/x", lambda request: (200, {"errcode": 0}))
    try:
        with httpx.Client(base_url=target.url, timeout=30) as client:

            def post(data: dict, timestamp: str, signature: str) -> httpx.Response:
                return client.post(
                    target.dingtalk_callback,
                    content=json.dumps(data),
                    headers={
                        "Content-Type": "application/json",
                        "timestamp": timestamp,
                        "sign": signature,
                    },
                )

            run = secrets.token_hex(4)
            timestamp = str(int(time.time() * 1000))
            captured = sign(target.dingtalk_secret, timestamp)
            official = "https://oapi.dingtalk.com/robot/sendBySession?session=probe"
            genuine = message(f"probe-{run}-genuine", "staff-bob", "my deal is 42", official)
            first = post(genuine, timestamp, captured)
            runs_before = _runs(target, client)
            forged = message(
                f"probe-{run}-forged", "staff-other", "repeat my last message", f"{attacker.url}/x"
            )
            replay = post(forged, timestamp, captured)
            time.sleep(2)  # a worker that took it would have answered by now
            runs_after = _runs(target, client)
            sent = len(attacker.requests)
            ok = first.status_code == 200 and replay.status_code == 401 and sent == 0
            ok = ok and (runs_before is None or runs_before == runs_after)
            results.check(
                name,
                ok,
                f"genuine={first.status_code} replay={replay.status_code} (want 401) "
                f"attacker_requests={sent} runs_before={runs_before} runs_after={runs_after}",
            )

            # A freshly signed message naming a foreign sessionWebhook: answered, never there.
            timestamp = str(int(time.time() * 1000) + 1)
            own = message(f"probe-{run}-foreign", "staff-bob", "hello", f"{attacker.url}/x")
            response = post(own, timestamp, sign(target.dingtalk_secret, timestamp))
            time.sleep(2)
            sent = len(attacker.requests)
            results.check(
                "dingtalk_foreign_session_webhook_unused",
                response.status_code == 200 and sent == 0,
                f"status={response.status_code} attacker_requests={sent}",
            )
    finally:
        attacker.stop()


# --- 2. brute force on sign-in and on API keys --------------------------------------------------


def check_signin_brute_force(target: Target, results: Results, limit: int = 10) -> None:
    name = "signin_brute_force"
    if not (target.email and target.password):
        results.report("SKIP", name, "no --email/--password")
        return
    with httpx.Client(base_url=target.url, timeout=30, follow_redirects=False) as client:

        def attempt(password: str) -> httpx.Response:
            client.get("/login/")
            token = client.cookies.get("csrftoken", "")
            return client.post(
                "/login/",
                data={"username": target.email, "password": password, "csrfmiddlewaretoken": token},
                headers={"Referer": f"{target.url}/login/"},
            )

        statuses = [attempt(f"wrong-{index}").status_code for index in range(limit)]
        right = attempt(target.password)
        signed_in = client.get("/").status_code == 200
        retry_after = right.headers.get("Retry-After", "")
        results.check(
            name,
            right.status_code == 429 and retry_after.isdigit() and not signed_in,
            f"{limit} wrong passwords -> {sorted(set(statuses))}; right password -> "
            f"{right.status_code} Retry-After={retry_after or '-'} signed_in={signed_in}",
        )


def check_api_key_brute_force(target: Target, results: Results, attempts: int = 300) -> None:
    with httpx.Client(base_url=target.url, timeout=30) as client:
        statuses = []
        response = None
        for index in range(attempts):
            response = client.get(
                "/api/v1/members/",
                headers={"Authorization": f"Bearer cadre_probe{index % 7}_wrong{index:04d}"},
            )
            statuses.append(response.status_code)
            if response.status_code == 429:
                break
        retry_after = response.headers.get("Retry-After", "") if response is not None else ""
        code = ""
        if response is not None and response.status_code == 429:
            code = response.json().get("error", {}).get("code", "")
        results.check(
            "api_key_brute_force",
            statuses[-1] == 429 and retry_after.isdigit() and code == "throttled",
            f"{len(statuses)} wrong keys -> 401 x{statuses.count(401)} then {statuses[-1]} "
            f"Retry-After={retry_after or '-'} code={code or '-'}",
        )


# --- 3. authentic but malformed events (item 5) ------------------------------------------------


def _malformed_dingtalk() -> dict[str, bytes]:
    from connectors.tests import test_inbound_malformed as m

    return {
        "nul-id": m.body_of(m.ding_message(msgId=f"msg{m.NUL}1")),
        "nul-text": m.body_of(m.ding_message(text={"content": f"hel{m.NUL}lo"})),
        "lone-surrogate": m.body_of(m.ding_message(text={"content": f"bad {m.LONE} half"})),
        "deep": m.deep_body(m.ding_message()),
        "expiry-str": m.body_of(m.ding_message(sessionWebhookExpiredTime="soon")),
        "expiry-float": m.body_of(m.ding_message(sessionWebhookExpiredTime=1.5)),
        "text-str": m.body_of(m.ding_message(text="hello")),
        "user-obj": m.body_of(m.ding_message(senderStaffId={"id": 1})),
        "msgid-list": m.body_of(m.ding_message(msgId=["m"])),
    }


def _malformed_feishu() -> dict[str, bytes]:
    from connectors.tests import test_inbound_malformed as m

    return {
        "nul-id": m.body_of(m.feishu_with("header.event_id", f"ev{m.NUL}1")),
        "nul-text": m.body_of(m.feishu_message(text=f"hel{m.NUL}lo")),
        "lone-surrogate": m.body_of(m.feishu_message(text=f"bad {m.LONE} half")),
        "deep": m.deep_body(m.feishu_message()),
        "event-str": m.body_of(m.feishu_message(event="im.message.receive_v1")),
        "header-str": m.body_of(m.feishu_message(header="ev-1")),
        "sender-str": m.body_of(m.feishu_with("event.sender", "ou_1")),
        "message-list": m.body_of(m.feishu_with("event.message", ["om_1"])),
    }


def check_malformed_events(target: Target, results: Results) -> None:
    from connectors.dingtalk.inbound import sign

    platforms = []
    if target.dingtalk_callback and target.dingtalk_secret:

        def ding_headers(body: bytes) -> dict:
            timestamp = str(int(time.time() * 1000))
            return {"timestamp": timestamp, "sign": sign(target.dingtalk_secret, timestamp)}

        platforms.append(
            ("dingtalk", target.dingtalk_callback, _malformed_dingtalk(), ding_headers)
        )
    if target.feishu_callback and target.feishu_encrypt_key:

        def feishu_headers(body: bytes) -> dict:
            timestamp, nonce = str(int(time.time())), secrets.token_hex(4)
            digest = hashlib.sha256((timestamp + nonce + target.feishu_encrypt_key).encode() + body)
            return {
                "X-Lark-Request-Timestamp": timestamp,
                "X-Lark-Request-Nonce": nonce,
                "X-Lark-Signature": digest.hexdigest(),
            }

        platforms.append(("feishu", target.feishu_callback, _malformed_feishu(), feishu_headers))
    if not platforms:
        results.report("SKIP", "malformed_signed_events", "no connector callbacks given")
        return
    with httpx.Client(base_url=target.url, timeout=60) as client:
        for platform, path, cases, headers in platforms:
            answers = {}
            for case, body in cases.items():
                response = client.post(
                    path,
                    content=body,
                    headers={"Content-Type": "application/json", **headers(body)},
                )
                answers[case] = response.status_code
            bad = {case: code for case, code in answers.items() if code >= 500 or code < 200}
            summary = " ".join(f"{case}={code}" for case, code in answers.items())
            results.check(f"malformed_signed_events_{platform}", not bad, summary)


# --- 4. a forged audit export, re-signed with a fresh key --------------------------------------


def check_forged_export(target: Target, results: Results) -> None:
    from tests.governance.test_audit_tamper import _resign_with_fresh_key

    name = "forged_export_resigned_with_fresh_key"
    if target.export is None:
        results.report("SKIP", name, "no --export directory")
        return
    with tempfile.TemporaryDirectory(prefix="cadre-probe-") as scratch:
        published = httpx.get(f"{target.url}/api/v1/audit/public-key/", timeout=30).json()
        pem = Path(scratch) / "instance.pem"
        pem.write_text(published["public_key_pem"])

        def verify(directory: Path, *extra: str) -> tuple[int, str]:
            command = [sys.executable, str(ROOT / "manage.py"), "audit_export_verify"]
            done = subprocess.run(  # noqa: S603 - our own manage.py, our arguments
                [*command, str(directory), *extra], capture_output=True, text=True
            )
            return done.returncode, (done.stdout.strip().splitlines() or [done.stderr.strip()])[0]

        # The control: the export as the instance signed it verifies against its public key.
        genuine = verify(target.export, "--public-key", str(pem))
        forged = Path(scratch) / "forged"
        shutil.copytree(target.export, forged)
        claimed = _resign_with_fresh_key(forged)
        outcomes = {
            "default": verify(forged),
            "--public-key": verify(forged, "--public-key", str(pem)),
        }
        ok = genuine[0] == 0 and all(
            code == 1 and line.startswith("TAMPERED") and claimed[:16] not in line
            for code, line in outcomes.values()
        )
        detail = f"genuine: exit={genuine[0]} {genuine[1][:60]}; " + "; ".join(
            f"forged {how}: exit={code} {line[:60]}" for how, (code, line) in outcomes.items()
        )
        results.check(name, ok, detail)


# --- 5. schema fuzzing (owned by the schemathesis suite) --------------------------------------


def schemathesis_hook(target: Target, results: Results, enabled: bool) -> None:
    """Hook for the schemathesis suite: runs `st` against the target when asked and installed."""
    name = "schemathesis"
    st = shutil.which("st")
    if not enabled or st is None or not target.api_key:
        why = "not asked (--schemathesis)" if not enabled else "no `st` CLI or no --api-key"
        results.report("SKIP", name, f"{why}; the schemathesis suite in `make test` owns this")
        return
    done = subprocess.run(  # noqa: S603 - the installed schemathesis CLI, our arguments
        [st, "run", f"{target.url}/api/schema/", "--checks", "not_a_server_error",
         "--max-examples", "5", "-H", f"Authorization: Bearer {target.api_key}"],
        capture_output=True, text=True,
    )  # fmt: skip
    results.check(name, done.returncode == 0, (done.stdout.strip().splitlines() or [""])[-1])


# --- 6. issue 29: shared helpers ------------------------------------------------------------


def _bearer(key: str) -> dict:
    return {"Authorization": f"Bearer {key}"}


def _json(response: httpx.Response) -> dict:
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _code(response: httpx.Response) -> str:
    error = _json(response).get("error")
    return str(error.get("code", "")) if isinstance(error, dict) else ""


def _listed(client: httpx.Client, path: str, key: str) -> int | None:
    """How many rows a list endpoint answers (its `count`, or the length of an unpaged list)."""
    response = client.get(path, headers=_bearer(key))
    if response.status_code != 200:
        return None
    body = response.json()
    if isinstance(body, dict):
        return body.get("count", len(body.get("results", [])))
    return len(body)


def _statuses(statuses) -> str:
    return " ".join(f"{status}x{count}" for status, count in sorted(Counter(statuses).items()))


def _member_id(client: httpx.Client, target: Target, email: str) -> int | None:
    response = client.get("/api/v1/members/", params={"q": email}, headers=_bearer(target.api_key))
    for row in _json(response).get("results", []):
        if str(row.get("email", "")).lower() == email.lower():
            return row.get("id")
    return None


def _another_member_id(client: httpx.Client, target: Target) -> int | None:
    """A member who is not the key's owner: whose personal scope the owner's key may not read."""
    if target.employee_member_id is not None:
        return target.employee_member_id
    response = client.get("/api/v1/members/", headers=_bearer(target.api_key))
    for row in _json(response).get("results", []):
        if str(row.get("email", "")).lower() != target.email.lower():
            return row.get("id")
    return None


def _received(target: Target) -> int:
    return len(target.listener.requests)


# --- 7. issue 29 F2: malformed Mem0/MemOS requests, then the process still serves ----------

PROBE_MEMORY = "The probe keeps its notes in the blue folder"
# Ids and query strings in the path (tests/api/test_compat_hostile.py sends the same).
HOSTILE_GETS = (
    "/mem0/v1/memories/%C2%B2/",
    "/mem0/v1/memories/{id_arabic}/",
    "/mem0/v1/memories/99999999999999999999999/",
    "/mem0/v1/memories/{id}%00/",
    "/mem0/v1/memories/?user_id=a%00b",
    "/mem0/v1/memories/?user_id=%C2%B2",
    "/mem0/v1/memories/?user_id={email}&page=1e309",
)


def check_hostile_compat_requests(target: Target, results: Results) -> None:
    from tests.api.test_compat_hostile import MEM0, MEMOS, _fill, _raw

    name = "hostile_compat_requests"
    if not (target.api_key and target.email):
        results.report("SKIP", name, "no --api-key/--email")
        results.report("SKIP", "serving_after_hostile_requests", "no --api-key/--email")
        return
    with httpx.Client(base_url=target.url, timeout=120) as client:
        key = _bearer(target.api_key)
        own = client.post(
            "/api/v1/memories/", json={"scope": "user", "content": PROBE_MEMORY}, headers=key
        )
        memory_id = _json(own).get("id")
        if own.status_code != 201 or memory_id is None:
            why = f"the key wrote no memory ({own.status_code} {_code(own)})"
            results.report("SKIP", name, f"{why}: --api-key needs memory:read and memory:write")
            results.report("SKIP", "serving_after_hostile_requests", why)
            return
        try:
            before = _listed(client, "/api/v1/memories/", target.api_key)
            owner, memory = SimpleNamespace(email=target.email), SimpleNamespace(pk=memory_id)
            headers = {"Authorization": f"Token {target.api_key}"}
            answers = []
            for path, body in MEM0 + MEMOS:
                response = client.post(
                    path,
                    content=_fill(_raw(body), owner, memory).encode(),
                    headers={**headers, "Content-Type": "application/json"},
                )
                answers.append((f"POST {path}", response.status_code))
            for path in HOSTILE_GETS:
                response = client.get(_fill(path, owner, memory, url=True), headers=headers)
                answers.append((f"GET {path}", response.status_code))
            after = _listed(client, "/api/v1/memories/", target.api_key)
            mine = client.get(f"/api/v1/memories/{memory_id}/", headers=key)
            unchanged = mine.status_code == 200 and _json(mine).get("content") == PROBE_MEMORY
            wrong = [f"{what}={status}" for what, status in answers if not 400 <= status < 500]
            for_the_key = sum(1 for _, status in answers if status in (401, 403))
            results.check(
                name,
                not wrong and before == after and unchanged,
                f"{len(answers)} requests -> {_statuses(s for _, s in answers)} "
                f"(401/403 x{for_the_key}); not 4xx: {wrong[:4] or 'none'}; "
                f"memories {before}->{after}; own memory unchanged={unchanged}",
            )
            console = client.get("/login/").status_code
            # A console path with the key: its error pages had asked for a key's memberships.
            keyed = client.get("/members/", headers=headers).status_code
            api = client.get("/api/v1/members/", headers=key).status_code
            ready = client.get("/readyz")
            pool = _json(ready).get("database_pool") or {}
            results.check(
                "serving_after_hostile_requests",
                console == 200 and keyed < 500 and api == 200 and ready.status_code == 200,
                f"console /login/={console} /members/ with the key={keyed} "
                f"/api/v1/members/={api} /readyz={ready.status_code} "
                f"pool reclaimed={pool.get('reclaimed', '-')} "
                f"exhausted={pool.get('exhausted', '-')}",
            )
        finally:
            client.delete(f"/api/v1/memories/{memory_id}/", headers=key)


# --- 8. issue 29 F3/F4/F10: evaluation is an admin's tool ----------------------------------


def check_evaluation_refused_to_employee(target: Target, results: Results) -> None:
    name = "evaluation_refused_to_employee_key"
    if not target.employee_api_key:
        results.report("SKIP", name, "no --employee-api-key")
        return
    with httpx.Client(base_url=target.url, timeout=60) as client:
        key = _bearer(target.employee_api_key)
        control = client.get("/api/v1/memories/", headers=key).status_code  # the key works
        answers = {
            path: client.get(path, headers=key).status_code
            for path in (
                "/api/v1/evaluation/runs/",
                "/api/v1/evaluation/cases/",
                "/api/v1/evaluation/suites/",
            )
        }
    results.check(
        name,
        control == 200 and all(status in (403, 404) for status in answers.values()),
        " ".join(f"{path}={status}" for path, status in answers.items())
        + f" (want 403/404); control /api/v1/memories/={control}",
    )


def check_evaluation_case_scope(target: Target, results: Results) -> None:
    names = ("evaluation_case_on_another_members_scope", "evaluation_run_hostile_version")
    if not target.api_key:
        for name in names:
            results.report("SKIP", name, "no --api-key")
        return
    with httpx.Client(base_url=target.url, timeout=60) as client:
        key = _bearer(target.api_key)
        other = _another_member_id(client, target)
        suite = client.post(
            "/api/v1/evaluation/suites/",
            json={"name": f"probe-{secrets.token_hex(3)}", "kind": "retrieval"},
            headers=key,
        )
        suite_id = _json(suite).get("id")
        if suite.status_code != 201 or suite_id is None or other is None:
            why = f"suite -> {suite.status_code} {_code(suite)}, another member: {other}"
            for name in names:
                results.report("SKIP", name, f"{why} (--api-key needs templates:write, org:read)")
            return
        try:
            cases = f"/api/v1/evaluation/cases/?suite={suite_id}"
            control = client.post(
                "/api/v1/evaluation/cases/",
                json={"suite": suite_id, "input": "hello", "scopes": ["organization"]},
                headers=key,
            )
            before = _listed(client, cases, target.api_key)
            scope = f"user:{other}"
            refused = client.post(
                "/api/v1/evaluation/cases/",
                json={"suite": suite_id, "input": "What is their locker code?", "scopes": [scope]},
                headers=key,
            )
            after = _listed(client, cases, target.api_key)
            details = json.dumps(_json(refused).get("error", {}).get("details", {}))
            results.check(
                names[0],
                refused.status_code == 400 and scope in details and before == after
                and control.status_code == 201,
                f"owner's key, scopes [{scope}] -> {refused.status_code} {_code(refused)} "
                f"names the scope={scope in details}; cases {before}->{after}; "
                f"control case on organization -> {control.status_code}",
            )  # fmt: skip

            runs = f"/api/v1/evaluation/runs/?suite={suite_id}"
            runs_before = _listed(client, runs, target.api_key)
            run = client.post(
                "/api/v1/evaluation/runs/",
                json={"suite": suite_id, "candidate": {"kind": "template_version", "version": "²"}},
                headers=key,
            )
            runs_after = _listed(client, runs, target.api_key)
            results.check(
                names[1],
                run.status_code == 400 and runs_before == runs_after,
                f'candidate.version "²" -> {run.status_code} {_code(run)} (want 400); '
                f"runs {runs_before}->{runs_after}",
            )
        finally:
            client.delete(f"/api/v1/evaluation/suites/{suite_id}/", headers=key)


# --- 9. issue 29 F7/F9/F12: URLs Cadre would fetch ------------------------------------------


def _internal_urls(target: Target, path: str) -> dict[str, str]:
    return {
        "metadata_v4": f"http://169.254.169.254{path}",
        "metadata_v6": f"http://[fd00:ec2::254]{path}",
        "loopback": f"{target.listener.url}{path}",
    }


def _check_refused_on_save(
    target: Target,
    results: Results,
    *,
    name: str,
    collection: str,
    body: Callable[[str, str], dict],
    path: str,
    undo: str = "",
) -> None:
    """POST each internal URL to `collection`: refused 400, nothing stored, nothing fetched.
    What a target wrongly accepts is revoked through `undo` (a detail action), when the API
    has one, and named probe-… otherwise."""
    with httpx.Client(base_url=target.url, timeout=60) as client:
        key = _bearer(target.api_key)
        for label, url in _internal_urls(target, path).items():
            check = f"{name}[{label}]"
            before, received = _listed(client, collection, target.api_key), _received(target)
            response = client.post(collection, json=body(label, url), headers=key)
            created = _json(response).get("id") if response.status_code == 201 else None
            after, sent = _listed(client, collection, target.api_key), _received(target) - received
            detail = (
                f"{url} -> {response.status_code} {_code(response)}; "
                f"stored {before}->{after}; listener requests={sent}"
            )
            if created is not None:
                if undo:
                    client.post(f"{collection}{created}/{undo}/", headers=key)
                detail += f" ({undo}d)" if undo else f" (left as probe-{label}: no API to delete)"
            if response.status_code in (401, 403):
                results.report("SKIP", check, f"{detail}: the key may not create these")
            elif label == "loopback" and created is not None and not target.own_server:
                results.report("SKIP", check, f"{detail}: this instance allows loopback")
            else:
                ok = response.status_code == 400 and created is None and sent == 0
                results.check(check, ok and before == after, detail)


def check_model_provider_urls(target: Target, results: Results) -> None:
    name = "model_provider_url_refused"
    if not target.api_key:
        results.report("SKIP", name, "no --api-key")
        return
    _check_refused_on_save(
        target,
        results,
        name=name,
        collection="/api/v1/model-providers/",
        path="/v1",
        body=lambda label, url: {
            "name": f"probe-{label}",
            "kind": "openai_compatible",
            "base_url": url,
            "api_key": "sk-probe-stored-key",
            "default_model": "probe-chat",
        },
    )


def check_mcp_server_urls(target: Target, results: Results) -> None:
    name = "mcp_server_url_refused"
    if not target.api_key:
        results.report("SKIP", name, "no --api-key")
        return
    _check_refused_on_save(
        target,
        results,
        name=name,
        collection="/api/v1/mcp-servers/",
        path="/mcp",
        undo="revoke",
        body=lambda label, url: {
            "name": f"probe-{label}".replace("_", "-"),
            "transport": "streamable_http",
            "url": url,
        },
    )


def _console_sign_in(target: Target, client: httpx.Client) -> bool:
    client.get("/login/")
    client.post(
        "/login/",
        data={
            "username": target.email,
            "password": target.password,
            "csrfmiddlewaretoken": client.cookies.get("csrftoken", ""),
        },
        headers={"Referer": f"{target.url}/login/"},
    )
    return client.get("/identity-providers/").status_code == 200


def check_oidc_issuers(target: Target, results: Results) -> None:
    name = "oidc_issuer_refused_on_save"
    if not (target.email and target.password):
        results.report("SKIP", name, "no --email/--password")
    else:
        with httpx.Client(base_url=target.url, timeout=60, follow_redirects=False) as client:
            if not _console_sign_in(target, client):
                results.report("SKIP", name, f"could not sign in to the console as {target.email}")
            else:
                issuers = {"metadata_v4": "http://169.254.169.254/latest"}
                if target.own_server:  # a Cadre elsewhere cannot reach this listener anyway
                    issuers["loopback"] = target.listener.url
                for label, issuer in issuers.items():
                    slug = f"probe-{label.replace('_', '-')}-{secrets.token_hex(2)}"
                    form_page = f"{target.url}/identity-providers/new/"
                    client.get("/identity-providers/new/")
                    received = _received(target)
                    response = client.post(
                        "/identity-providers/new/",
                        data={
                            "name": f"Probe {label}",
                            "slug": slug,
                            "kind": "oidc",
                            "issuer": issuer,
                            "client_id": "probe",
                            "client_secret": "probe-secret",
                            "scopes": "openid email profile",
                            "claim_email": "email",
                            "claim_name": "name",
                            "is_enabled": "on",
                            "csrfmiddlewaretoken": client.cookies.get("csrftoken", ""),
                        },
                        headers={"Referer": form_page},
                    )
                    stored = slug in client.get("/identity-providers/").text
                    sent = _received(target) - received
                    results.check(
                        f"{name}[{label}]",
                        response.status_code == 200 and not stored and sent == 0,
                        f"{issuer} -> {response.status_code} (want 200, the form again) "
                        f"'internal address' shown={'internal address' in response.text} "
                        f"stored={stored} listener requests={sent}",
                    )

    name = "sso_link_fetches_no_loopback_issuer"
    if not target.sso_start_path:
        results.report("SKIP", name, "needs a provider stored with a loopback issuer (own server)")
    else:
        received = _received(target)
        response = httpx.get(f"{target.url}{target.sso_start_path}", timeout=60)
        reason = "provider_unreachable" if "provider_unreachable" in response.text else "-"
        sent = _received(target) - received
        results.check(
            name,
            response.status_code == 403 and sent == 0,
            f"anonymous GET {target.sso_start_path} -> {response.status_code} reason={reason} "
            f"listener requests={sent}",
        )
    results.report(
        "SKIP",
        "sso_cross_organization_takeover",
        "needs a second organization and an IdP asserting another's e-mail: "
        "tests/tenancy/test_identity_isolation.py re-plays it for OIDC, SAML and IM logins",
    )


# --- 10. issue 29 F8: an employee's shared memory waits unverified ---------------------------

CONTROL_MEMORY = (
    "Discounts above 60 percent need the finance director's approval; the helpdesk never asks "
    "for a password."
)


def check_shared_memory_review(target: Target, results: Results) -> None:
    from tests.memory.test_shared_review import INJECTION

    names = ("shared_memory_by_employee_unverified", "shared_memory_unverified_not_found")
    if not target.employee_api_key:
        for name in names:
            results.report("SKIP", name, "no --employee-api-key")
        return
    with httpx.Client(base_url=target.url, timeout=120) as client:
        employee = _bearer(target.employee_api_key)
        written = client.post(
            "/api/v1/memories/",
            json={"scope": "organization", "content": INJECTION},
            headers=employee,
        )
        memory = _json(written)
        control_id = None
        try:
            results.check(
                names[0],
                written.status_code == 201 and memory.get("verification") == "unverified",
                f"employee key, organization scope -> {written.status_code} "
                f"verification={memory.get('verification', _code(written) or '-')}",
            )
            if not target.colleague_api_key or "id" not in memory:
                results.report("SKIP", names[1], "no --colleague-api-key or nothing written")
                return
            if target.api_key:  # an admin's shared memory is verified at once: the control
                control = client.post(
                    "/api/v1/memories/",
                    json={"scope": "organization", "content": CONTROL_MEMORY},
                    headers=_bearer(target.api_key),
                )
                control_id = _json(control).get("id") if control.status_code == 201 else None
            colleague = _bearer(target.colleague_api_key)
            search = client.post(
                "/api/v1/memories/search/",
                json={"query": "discount approval password helpdesk", "top_k": 20, "force": True},
                headers=colleague,
            )
            found = {hit["memory"]["id"] for hit in _json(search).get("hits", [])}
            opened = client.get(f"/api/v1/memories/{memory['id']}/", headers=colleague)
            results.check(
                names[1],
                search.status_code == 200
                and memory["id"] not in found
                and opened.status_code == 404
                and (control_id is None or control_id in found),
                f"colleague's search -> {search.status_code} finds it={memory['id'] in found} "
                f"(the admin's control found={control_id in found if control_id else '-'}); "
                f"colleague GET it -> {opened.status_code} (want 404)",
            )  # fmt: skip
        finally:
            for memory_id in (memory.get("id"), control_id):
                if memory_id is not None and target.api_key:
                    client.delete(f"/api/v1/memories/{memory_id}/", headers=_bearer(target.api_key))


# --- 11. issue 29 F5/F6/F10/F11: SCIM ------------------------------------------------------


def _scim(client: httpx.Client, token: str, method: str, path: str, body=None, **params):
    headers = {"Authorization": f"Bearer {token}"}
    content = None
    if body is not None:
        headers["Content-Type"] = "application/scim+json"
        text = body if isinstance(body, str) else json.dumps(body)
        content = text.encode()
    return client.request(
        method, f"/scim/v2/{quote(path)}", content=content, headers=headers, params=params or None
    )


def _scim_active(client: httpx.Client, token: str, member_id: int) -> Any:
    return _json(_scim(client, token, "GET", f"Users/{member_id}")).get("active", "-")


def _scim_totals(client: httpx.Client, token: str) -> tuple:
    return tuple(
        _json(_scim(client, token, "GET", kind, count="1")).get("totalResults")
        for kind in ("Users", "Groups")
    )


def check_scim(target: Target, results: Results) -> None:
    from tests.tenancy.test_scim_trust import DEEP, NUL, _deactivate, _group, _user

    names = (
        "scim_it_admin_cannot_deactivate_owner",
        "scim_lists_local_domain_emails",
        "scim_deprovisions_local_domain_member",
        "scim_hostile_input",
    )
    if not target.scim_token:
        for name in names:
            results.report("SKIP", name, "no --scim-token")
        return
    token = target.scim_token
    with httpx.Client(base_url=target.url, timeout=120) as client:
        owner = target.owner_member_id
        if owner is None and target.api_key and target.email:
            owner = _member_id(client, target, target.email)
        if owner is None:
            results.report("SKIP", names[0], "the owner's member id not found (--api-key, --email)")
        else:
            patch = _scim(client, token, "PATCH", f"Users/{owner}", _deactivate())
            active = _scim_active(client, token, owner)
            if active is False:  # the finding: give the owner their access back at once
                _scim(client, token, "PATCH", f"Users/{owner}", _deactivate(active=True))
            results.check(
                names[0],
                patch.status_code == 403 and active is True,
                f"PATCH /scim/v2/Users/{owner} active:false -> {patch.status_code} (want 403); "
                f"owner active={active}",
            )

        listing = _scim(client, token, "GET", "Users", count="1000")
        emails = {
            email.get("value")
            for resource in _json(listing).get("Resources", [])
            for email in resource.get("emails", [])
        }
        demo = "admin@demo.local" in emails
        results.check(
            names[1],
            listing.status_code == 200 and (demo or not target.own_server),
            f"GET /scim/v2/Users -> {listing.status_code} totalResults="
            f"{_json(listing).get('totalResults', '-')} admin@demo.local listed={demo}"
            + ("" if demo or target.own_server else " (no such member on this target)"),
        )

        if target.scim_leaver_id is None:
            results.report("SKIP", names[2], "deprovisions a member: own server only")
        else:
            leaver = target.scim_leaver_id
            patch = _scim(client, token, "PATCH", f"Users/{leaver}", _deactivate())
            answer = _json(patch)
            results.check(
                names[2],
                patch.status_code == 200 and answer.get("active") is False,
                f"PATCH Users/{leaver} active:false -> {patch.status_code} "
                f"active={answer.get('active', '-')} emails={answer.get('emails', '-')}",
            )

        before = _scim_totals(client, token)
        reads = [
            ("GET", "Users/²", None, {}),
            ("GET", "Groups/²", None, {}),
            ("GET", "Users", None, {"filter": 'id eq "²"'}),
            ("GET", "Groups", None, {"filter": 'members eq "²"'}),
            ("GET", "Users", None, {"startIndex": "99999999999999999999999"}),
        ]
        writes = [
            ("POST", "Users", _user(NUL), {}),
            ("POST", "Users", _user("x" * 300), {}),
            ("POST", "Users", DEEP, {}),
            ("POST", "Groups", _group("Probe", members=[{"value": "²"}]), {}),
            ("PATCH", "Users/²", _deactivate(), {}),
        ]
        answers = []
        for kind, requests in (("read", reads), ("write", writes)):
            for method, path, body, params in requests:
                status = _scim(client, token, method, path, body, **params).status_code
                shown = f"{method} {path}" + (f"?{next(iter(params.values()))}" if params else "")
                answers.append((kind, shown, status))
        after = _scim_totals(client, token)
        wrong = [
            f"{shown}={status}"
            for kind, shown, status in answers
            if status >= 500 or (kind == "write" and not 400 <= status < 500)
        ]
        results.check(
            names[3],
            not wrong and before == after,
            f"{len(answers)} requests -> {_statuses(s for _, _, s in answers)}; "
            f"5xx or a write not 4xx: {wrong or 'none'}; users/groups {before}->{after}",
        )


def check_scim_wrong_tokens(target: Target, results: Results, attempts: int = 40) -> None:
    name = "scim_wrong_tokens_throttled"
    if target.reset_auth_failures is not None:
        target.reset_auth_failures()  # the budget is the API keys': start it from zero
    with httpx.Client(base_url=target.url, timeout=30) as client:
        statuses, response = [], None
        for index in range(attempts):
            response = _scim(client, f"scim_probe{index % 10}_wrong{index:04d}", "GET", "Users")
            statuses.append(response.status_code)
        shared = client.get("/api/v1/members/", headers=_bearer("cadre_probe_wrong")).status_code
    first = statuses.index(429) if 429 in statuses else None
    retry_after = response.headers.get("Retry-After", "") if response is not None else ""
    ok = (
        first is not None
        and set(statuses[:first]) <= {401}
        and set(statuses[first:]) == {429}
        and retry_after.isdigit()
        and (first == 30 or (target.reset_auth_failures is None and first <= 30))
        and shared == 429
    )
    results.check(
        name,
        ok,
        f"{attempts} wrong tokens -> 401 x{statuses.count(401)} then 429 "
        f"x{statuses.count(429)} (first at #{first + 1 if first is not None else '-'}) "
        f"Retry-After={retry_after or '-'}; then a wrong API key -> {shared} (one budget)",
    )
    if target.reset_auth_failures is not None:
        target.reset_auth_failures()  # the API-key check counts its own 30


# --- 12. issue 29 F10: the Memory Viewer's scope ------------------------------------------


def check_memory_viewer_hostile_scope(target: Target, results: Results) -> None:
    name = "memory_viewer_hostile_scope"
    if not target.api_key:
        results.report("SKIP", name, "no --api-key")
        return
    with httpx.Client(base_url=target.url, timeout=60) as client:
        answers = {
            scope: client.get(
                "/api/v1/memory-viewer/timeline/",
                params={"scope": scope},
                headers=_bearer(target.api_key),
            ).status_code
            for scope in ("user:²", "user:١٢")
        }
    results.check(
        name,
        all(400 <= status < 500 for status in answers.values()),
        "GET /api/v1/memory-viewer/timeline/ "
        + " ".join(f"scope={scope} -> {status}" for scope, status in answers.items())
        + " (want 4xx)",
    )


# --- a self-hosted target ---------------------------------------------------------------------


# A fresh install allows no internal destination for these surfaces (issue 29, F7/F9/F12): the
# probe's server must refuse its loopback listener, whatever the shell running it has set. The
# hosts of the model endpoints the environment names are allowed too (cadre/settings.py).
UNSET_FOR_OWN_SERVER = (
    "CADRE_MODEL_PROVIDER_ALLOWED_HOSTS",
    "CADRE_OIDC_ALLOWED_HOSTS",
    "CADRE_MCP_ALLOWED_HOSTS",
    "CADRE_MODEL_BASE_URL",
    "CADRE_MEMORY_PROVIDER_BASE_URL",
    "CADRE_MEMORY_LLM_BASE_URL",
    "CADRE_EMBEDDING_BASE_URL",
)
# Employees' keys are made while their creator is an IT admin, then capped by the employee
# role they hold (an employee may not make keys; a key outlives its creator's demotion).
EMPLOYEE_KEY_SCOPES = ["memory:read", "memory:write", "templates:write"]
OWNER_KEY_SCOPES = [
    "org:read",
    "agents:run",
    "memory:read",
    "memory:write",
    "templates:write",
    "models:write",
    "connectors:write",
]


class SelfHosted:
    """This checkout served as `cadre up` serves it (uvicorn, cadre.asgi, a database pool) on
    its own database, with an owner and their API key, an employee and a colleague with keys,
    an IT admin's SCIM token, members at .local domains, an OIDC provider whose issuer is the
    loopback listener, DingTalk and Feishu connectors (the DingTalk API a loopback fake) and a
    signed export."""

    def __enter__(self) -> Target:
        # As the test suite runs: the schema owner's connection (it may create the probe's
        # database), fast password hashing.
        os.environ.setdefault("CADRE_TESTING", "1")
        for name in UNSET_FOR_OWN_SERVER:
            os.environ.pop(name, None)
        # The fake DingTalk API the connector talks to lives on loopback (not a surface probed).
        os.environ.setdefault("CADRE_CONNECTOR_ALLOWED_HOSTS", "127.0.0.1,localhost")
        # A web process's pool, small and quick to give up: a request that kept its connection
        # (issue 29, F2) shows as 503 `database_busy` within a few requests, not a hang.
        os.environ.setdefault("DATABASE_POOL", "true")
        os.environ.setdefault("DATABASE_POOL_SIZE", "4")
        os.environ.setdefault("DATABASE_POOL_TIMEOUT", "3")
        import logging

        import django

        django.setup()
        # 4xx are what the probe provokes; a 5xx is still logged (ERROR).
        logging.getLogger("django.request").setLevel(logging.ERROR)
        from django.conf import settings

        # IM callbacks on the edge's own threads, as in production (the tests run them on the
        # request's thread, in the test's transaction).
        settings.CONNECTORS_SHARED_THREADS = True
        from django.db import connection
        from django.test.utils import setup_databases

        from cadre.celery import app

        connection.settings_dict["TEST"]["NAME"] = PROBE_DB
        self.old_config = setup_databases(verbosity=0, interactive=False)
        # Tasks run in the server's process on commit, so anything a request starts (a run, a
        # reply) has happened, or not, by the time it answers.
        app.conf.task_always_eager = True
        app.conf.task_eager_propagates = False
        return self._arrange(self._serve())

    def _serve(self) -> str:
        """uvicorn serving cadre.asgi:application in a thread of this process. Cadre is served
        over ASGI only (the IM inbound edge, /mcp/ and the body limit sit in front of Django
        there; a WSGI server answers differently, e.g. a path in unicode digits); in this
        process, tasks run eagerly on the probe's database."""
        import socket
        import threading

        import uvicorn

        listening = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listening.bind(("127.0.0.1", 0))
        config = uvicorn.Config(
            "cadre.asgi:application", lifespan="off", access_log=False, log_config=None
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [listening]}, daemon=True
        )
        self.thread.start()
        deadline = time.monotonic() + 90
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.05)
        return f"http://127.0.0.1:{listening.getsockname()[1]}"

    def _arrange(self, url: str) -> Target:
        from django.conf import settings

        from cadre.agents.models import Run
        from cadre.governance import audit, export
        from cadre.tenancy import services
        from cadre.tenancy.actors import member_actor
        from cadre.tenancy.models import IdentityProvider
        from connectors.dingtalk.tests.fake_api import APP_KEY, APP_SECRET, FakeDingTalk
        from connectors.tests import test_inbound_malformed as malformed
        from connectors.tests.fakes import FakePlatformServer
        from connectors.tests.helpers import make_connector
        from tests.factories import IMIdentityFactory, MemberFactory, OrganizationFactory

        anchors = Path(tempfile.mkdtemp(prefix="cadre-probe-"))
        settings.AUDIT_DIGEST_LOG = anchors / "digests.jsonl"
        settings.STORAGES = {
            **settings.STORAGES,
            "audit_anchors": {
                "BACKEND": "cadre.object_storage.WriteOnceFileSystemStorage",
                "OPTIONS": {"location": str(anchors / "audit-anchors")},
            },
        }
        if settings.CADRE_MODEL_PROVIDER_ALLOWED_HOSTS:  # the F7 loopback check would mean nothing
            raise RuntimeError("the probe's own server must allow no internal model endpoint")
        organization = OrganizationFactory(name="Probe Co", slug=f"probe-{secrets.token_hex(3)}")
        owner = MemberFactory(organization=organization, email="owner@probe.test", roles=["owner"])
        owner.user.set_password(PASSWORD)
        owner.user.save()
        actor = member_actor(owner)
        _, api_key = services.api_key_create(actor=actor, name="probe", scopes=OWNER_KEY_SCOPES)
        employee = MemberFactory(organization=organization, email="emma@probe.test")
        colleague = MemberFactory(organization=organization, email="colin@probe.test")
        it_admin = MemberFactory(
            organization=organization, email="ivy@probe.test", roles=["it_admin"]
        )
        _, scim_token = services.scim_token_create(actor=member_actor(it_admin), name="IdP")
        MemberFactory(organization=organization, email="admin@demo.local")
        leaver = MemberFactory(organization=organization, email="leaver@probe.local")
        self.listener = FakePlatformServer().start()
        IdentityProvider.objects.create(  # as one saved before the guard, or while allowed
            organization=organization,
            name="Loopback IdP",
            slug="loopback",
            issuer=self.listener.url,
            client_id="cadre",
            client_secret="probe-secret",
        )
        self.dingtalk_api = FakePlatformServer().start()
        FakeDingTalk(self.dingtalk_api)
        dingtalk = make_connector(
            owner,
            "dingtalk",
            {"app_key": APP_KEY, "app_secret": APP_SECRET},
            {"api_base_url": self.dingtalk_api.url},
        )
        bob = MemberFactory(organization=organization, display_name="Bob")
        IMIdentityFactory(member=bob, platform="dingtalk", platform_user_id="staff-bob")
        self._deploy_agent(actor, bob)
        other = MemberFactory(organization=organization, display_name="Dana")
        IMIdentityFactory(member=other, platform="dingtalk", platform_user_id="staff-other")
        feishu = make_connector(
            owner,
            "feishu",
            {"app_id": "cli_probe", "app_secret": "s", "encrypt_key": malformed.FEISHU_KEY},
        )
        for number in range(3):
            audit.record(actor=actor, action="member.update", target=("member", number, "M"))
        job = export.audit_export_run(
            export_id=export.audit_export_create(actor=actor, formats=["jsonl"]).pk
        )
        # The probe runs on one machine: the bundle's files are under the filesystem storage.
        self.bundle = export.stored_bundle(job)
        self.export = Path(self.bundle.storage.path(self.bundle.key))
        return Target(
            url=url,
            api_key=api_key,
            email=owner.email,
            password=PASSWORD,
            dingtalk_callback=dingtalk.callback_path,
            dingtalk_secret=APP_SECRET,
            feishu_callback=feishu.callback_path,
            feishu_encrypt_key=malformed.FEISHU_KEY,
            export=self.export,
            employee_api_key=self._employee_key(employee, EMPLOYEE_KEY_SCOPES),
            colleague_api_key=self._employee_key(colleague, ["memory:read"]),
            scim_token=scim_token,
            count_runs=Run.objects.count,
            own_server=True,
            owner_member_id=owner.pk,
            employee_member_id=employee.pk,
            scim_leaver_id=leaver.pk,
            sso_start_path=f"/sso/{organization.slug}/loopback/",
            listener=self.listener,
            reset_auth_failures=self._reset_auth_failures,
        )

    @staticmethod
    def _employee_key(member, scopes: list[str]) -> str:
        from cadre.tenancy import services
        from cadre.tenancy.actors import member_actor

        member.roles = ["it_admin"]
        member.save(update_fields=["roles"])
        _, secret = services.api_key_create(actor=member_actor(member), name="probe", scopes=scopes)
        member.roles = ["employee"]
        member.save(update_fields=["roles"])
        return secret

    @staticmethod
    def _reset_auth_failures() -> None:
        """Clear this run's failed-authentication budget (the SCIM and API-key checks each
        count from zero); only keys under this run's cache prefix."""
        from django.core.cache import caches

        redis = caches["throttle"]._cache.get_client(write=True)
        pattern = f"*{os.environ['CADRE_CACHE_PREFIX']}*auth_failure*"
        for key in redis.scan_iter(match=pattern):
            redis.delete(key)

    @staticmethod
    def _deploy_agent(actor, member) -> None:
        """An agent (offline model) for `member` on DingTalk: a genuine message starts a run."""
        from cadre.agents import services as agents
        from tests.factories import PositionFactory

        position = PositionFactory(organization=member.organization, name="Sales")
        member.positions.add(position)
        template = agents.template_create(
            actor=actor,
            name="Sales assistant",
            code="sales-assistant",
            agent_md="# Persona\nYou help sell.",
            model_settings={"provider": "offline", "model": "offline-1"},
        )
        version = template.versions.get()
        agents.version_submit(actor=actor, version=version)
        agents.version_publish(actor=actor, version=version, reason="probe")
        agents.deployment_create(
            actor=actor,
            name="Sales agents",
            template=template,
            positions=[position],
            channels=["console", "dingtalk"],
        )

    def __exit__(self, *exc) -> None:
        from django.core.cache import caches
        from django.db import connections
        from django.test.utils import teardown_databases

        from cadre.governance import export
        from connectors.inbound.views import edge_threads_stop

        self.dingtalk_api.stop()
        self.listener.stop()
        self.server.should_exit = True
        self.thread.join(30)
        export.remove_bundle(self.bundle)
        for alias in ("default", "throttle"):
            redis = caches[alias]._cache.get_client(write=True)
            for key in redis.scan_iter(match=f"*{os.environ['CADRE_CACHE_PREFIX']}*"):
                redis.delete(key)
        edge_threads_stop()
        connections.close_all()
        teardown_databases(self.old_config, verbosity=0)


def run_checks(target: Target, schemathesis: bool) -> int:
    from connectors.tests.fakes import FakePlatformServer

    results = Results()
    started = None
    if target.listener is None:
        target.listener = started = FakePlatformServer().start()
    try:
        check_dingtalk_replay(target, results)
        check_malformed_events(target, results)
        check_forged_export(target, results)
        # issue 29
        check_hostile_compat_requests(target, results)
        check_evaluation_refused_to_employee(target, results)
        check_evaluation_case_scope(target, results)
        check_model_provider_urls(target, results)
        check_mcp_server_urls(target, results)
        check_oidc_issuers(target, results)
        check_shared_memory_review(target, results)
        check_memory_viewer_hostile_scope(target, results)
        check_scim(target, results)
        # The failed-authentication budget: SCIM tokens and API keys share it, sign-in has its own.
        check_scim_wrong_tokens(target, results)
        check_api_key_brute_force(target, results)
        check_signin_brute_force(target, results)  # last: it locks this address out of sign-in
        schemathesis_hook(target, results, schemathesis)
    finally:
        if started is not None:
            started.stop()
    return results.summary()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", help="a running Cadre; without it the probe starts its own")
    for option in (
        "api-key", "email", "password", "dingtalk-callback", "dingtalk-secret",
        "feishu-callback", "feishu-encrypt-key", "employee-api-key", "colleague-api-key",
        "scim-token",
    ):  # fmt: skip
        parser.add_argument(f"--{option}", default="")
    parser.add_argument("--export", type=Path, help="an extracted audit export directory")
    parser.add_argument("--schemathesis", action="store_true", help="also run `st` if installed")
    args = parser.parse_args()
    if args.url:
        import django

        django.setup()  # audit_export_verify and the shared request builders import Django code
        target = Target(
            url=args.url.rstrip("/"),
            api_key=args.api_key,
            email=args.email,
            password=args.password,
            dingtalk_callback=args.dingtalk_callback,
            dingtalk_secret=args.dingtalk_secret,
            feishu_callback=args.feishu_callback,
            feishu_encrypt_key=args.feishu_encrypt_key,
            export=args.export,
            employee_api_key=args.employee_api_key,
            colleague_api_key=args.colleague_api_key,
            scim_token=args.scim_token,
        )
        sys.exit(run_checks(target, args.schemathesis))
    with SelfHosted() as target:
        status = run_checks(target, args.schemathesis)
    sys.exit(status)


if __name__ == "__main__":
    main()
