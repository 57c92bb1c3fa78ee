"""Scripted re-run of the issue 14 probe: sign replay, brute force, malformed events, forgery.

Prints one line per check, `PASS name: detail` or `FAIL name: detail` (`SKIP` when the target
was not given what the check needs), then `SUMMARY passed=N failed=N skipped=N`; exits 1 if
any check failed.

    .venv/bin/python bench/security_probe.py            # its own live server and database

Against a running Cadre instead (what is not given is skipped):

    .venv/bin/python bench/security_probe.py --url http://127.0.0.1:8000 \\
        --api-key cadre_… --email owner@example.com --password … \\
        --dingtalk-callback /connectors/dingtalk/<id>/events --dingtalk-secret <app secret> \\
        --feishu-callback /connectors/feishu/<id>/events --feishu-encrypt-key <encrypt key> \\
        --export <an extracted audit export directory>

The attacker's receiver is a loopback server of this script: a Cadre on another machine cannot
reach it, so "nothing sent" is only meaningful for a Cadre on this one. The sign-in and API-key
checks lock this machine's address out of that Cadre for the lock's duration. The checks reuse
the test suite's request builders (tests and connectors' tests), so the probe and the tests
send the same payloads. Schema fuzzing is the schemathesis suite's job: `--schemathesis` runs
the `st` CLI against the target if it is installed, and is skipped otherwise.
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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

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
    # Self-hosted only: counts straight from the database (an outside target uses the API).
    count_runs: Callable[[], int] | None = None


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


# --- a self-hosted target ---------------------------------------------------------------------


class SelfHosted:
    """A live HTTP server of this checkout on its own database, with an owner, an API key,
    DingTalk and Feishu connectors (the DingTalk API a loopback fake) and a signed export."""

    def __enter__(self) -> Target:
        # As the test suite runs: the schema owner's connection (it may create the probe's
        # database), fast password hashing.
        os.environ.setdefault("CADRE_TESTING", "1")
        import django

        django.setup()
        from django.db import connection
        from django.test.testcases import LiveServerThread, _StaticFilesHandler
        from django.test.utils import setup_databases

        from cadre.celery import app

        connection.settings_dict["TEST"]["NAME"] = PROBE_DB
        self.old_config = setup_databases(verbosity=0, interactive=False)
        # Tasks run in the server's process on commit, so anything a request starts (a run, a
        # reply) has happened, or not, by the time it answers.
        app.conf.task_always_eager = True
        app.conf.task_eager_propagates = False
        self.server = LiveServerThread("127.0.0.1", _StaticFilesHandler, port=0)
        self.server.daemon = True
        self.server.start()
        self.server.is_ready.wait()
        if self.server.error:
            raise self.server.error
        url = f"http://127.0.0.1:{self.server.port}"
        return self._arrange(url)

    def _arrange(self, url: str) -> Target:
        from django.conf import settings

        from cadre.agents.models import Run
        from cadre.governance import audit, export
        from cadre.tenancy import services
        from cadre.tenancy.actors import member_actor
        from connectors.dingtalk.tests.fake_api import APP_KEY, APP_SECRET, FakeDingTalk
        from connectors.tests import test_inbound_malformed as malformed
        from connectors.tests.fakes import FakePlatformServer
        from connectors.tests.helpers import make_connector
        from tests.factories import IMIdentityFactory, MemberFactory, OrganizationFactory

        settings.AUDIT_DIGEST_LOG = Path(tempfile.mkdtemp(prefix="cadre-probe-")) / "digests.jsonl"
        organization = OrganizationFactory(name="Probe Co", slug=f"probe-{secrets.token_hex(3)}")
        owner = MemberFactory(organization=organization, email="owner@probe.test", roles=["owner"])
        owner.user.set_password(PASSWORD)
        owner.user.save()
        actor = member_actor(owner)
        _, api_key = services.api_key_create(actor=actor, name="probe", scopes=["org:read"])
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
        self.export = export.bundle_directory(job)
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
            count_runs=Run.objects.count,
        )

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

        self.dingtalk_api.stop()
        self.server.terminate()
        export.remove_bundle(self.export)
        for alias in ("default", "throttle"):
            redis = caches[alias]._cache.get_client(write=True)
            for key in redis.scan_iter(match=f"*{os.environ['CADRE_CACHE_PREFIX']}*"):
                redis.delete(key)
        connections.close_all()
        teardown_databases(self.old_config, verbosity=0)


def run_checks(target: Target, schemathesis: bool) -> int:
    results = Results()
    check_dingtalk_replay(target, results)
    check_malformed_events(target, results)
    check_forged_export(target, results)
    check_api_key_brute_force(target, results)
    check_signin_brute_force(target, results)  # last: it locks this address out of sign-in
    schemathesis_hook(target, results, schemathesis)
    return results.summary()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", help="a running Cadre; without it the probe starts its own")
    for option in (
        "api-key", "email", "password", "dingtalk-callback", "dingtalk-secret",
        "feishu-callback", "feishu-encrypt-key",
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
        )
        sys.exit(run_checks(target, args.schemathesis))
    with SelfHosted() as target:
        status = run_checks(target, args.schemathesis)
    sys.exit(status)


if __name__ == "__main__":
    main()
