"""`cadre skill …`: validate, publish, install, search, tag and yank skills on a Cadre Hub.

Talks to the Cadre Hub API (/api/v1/hub/) with an organization API key. Runs without Django
settings: only the bundle, validation, scan and integrity modules are imported, so it works on
any machine with Cadre's Python package installed.

    cadre skill validate ./pdf-tools
    cadre skill publish ./pdf-tools --version 1.2.0 --changelog "Adds merge" --tag beta
    cadre skill install @acme/pdf-tools@^1.2 --dir skills
    cadre skill search "pdf forms"
    cadre skill tag @acme/pdf-tools 1.1.0 stable          (rollback = re-tag an older version)
    cadre skill yank @acme/pdf-tools 1.2.0 --reason "breaks merges"

Server and key: --url / CADRE_URL (default http://127.0.0.1:8000) and --token / CADRE_API_KEY.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

from cadre.errors import CadreError
from hub.bundles import bundle_from_directory, read_bundle, write_zip
from hub.integrity import IntegrityError, key_id_of, verify_files
from hub.scan import scan_files
from hub.validation import validate_files

DEFAULT_URL = "http://127.0.0.1:8000"
CHUNK = 64 * 1024


class CommandError(Exception):
    """A failure to report on stderr with exit status 1."""


def _split_ref(ref: str) -> tuple[str, str, str | None]:
    """`@ns/name[@spec]` → (ns, name, spec)."""
    text = ref.strip().lstrip("@")
    spec = None
    if "@" in text:
        text, spec = text.split("@", 1)
    if text.count("/") != 1:
        raise CommandError(f"'{ref}' is not a skill reference like @namespace/name[@version].")
    namespace, name = text.split("/")
    return namespace, name, spec or None


class HubClient:
    def __init__(self, url: str, token: str | None, *, timeout: float = 60.0):
        import httpx

        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(
            base_url=url.rstrip("/") + "/api/v1/hub/", headers=headers, timeout=timeout
        )

    def close(self) -> None:
        self.http.close()

    def request(self, method: str, path: str, **kwargs):
        response = self.http.request(method, path, **kwargs)
        if response.status_code >= 400:
            try:
                error = response.json()["error"]
                message = error["message"]
                details = error.get("details") or {}
                if error.get("code"):  # the stable code scripts can match on
                    message = f"{message} [{error['code']}]"
            except (ValueError, KeyError, TypeError):
                message, details = response.text[:500] or f"HTTP {response.status_code}", {}
            raise CommandError(_describe(message, details))
        return response

    def skill_path(self, namespace: str, name: str) -> str:
        return f"skills/@{quote(namespace)}/{quote(name)}/"


def _describe(message: str, details: dict) -> str:
    lines = [message]
    for problem in details.get("problems", []):
        where = f"{problem['path']}:{problem['line']}" if problem.get("line") else problem["path"]
        lines.append(f"  {where}: {problem['severity']}: {problem['message']}")
    for finding in details.get("findings", []):
        lines.append(
            f"  {finding['file']}:{finding['line']}: {finding['severity']}: "
            f"{finding['rule']}: {finding['excerpt']}"
        )
    return "\n".join(lines)


# --- commands ------------------------------------------------------------------------------


def cmd_validate(args, out) -> int:
    bundle = bundle_from_directory(args.folder)
    files = {f.path: f.content for f in bundle.files}
    report = validate_files(files, folder_name=bundle.folder_name)
    scan = scan_files(files.items())
    for problem in report.problems:
        print(str(problem), file=out)
    for finding in scan.findings:
        print(
            f"{finding.file}:{finding.line}: scan {finding.severity}: {finding.message} "
            f"[{finding.rule}] {finding.excerpt}",
            file=out,
        )
    print(
        f"{len(bundle.files)} files, {bundle.total_bytes} bytes, fingerprint "
        f"{bundle.fingerprint}, scan verdict {scan.verdict}",
        file=out,
    )
    ok = report.ok and scan.verdict != "block"
    print("valid" if ok else "NOT valid", file=out)
    return 0 if ok else 1


def _progress_body(data: bytes, label: str, quiet: bool) -> Iterator[bytes]:
    from tqdm import tqdm

    with tqdm(
        total=len(data), unit="B", unit_scale=True, desc=label, disable=quiet, file=sys.stderr
    ) as bar:
        for start in range(0, len(data), CHUNK):
            chunk = data[start : start + CHUNK]
            bar.update(len(chunk))
            yield chunk


def cmd_publish(args, out, client: HubClient) -> int:
    bundle = bundle_from_directory(args.folder)
    archive = write_zip(bundle)
    params: dict = {"version": args.version, "name": args.name or bundle.folder_name}
    for key in ("namespace", "changelog", "visibility", "department"):
        if getattr(args, key, None):
            params[key] = getattr(args, key)
    if args.tag:
        params["tags"] = ",".join(args.tag)
    if args.dry_run:
        params["dry_run"] = "true"
    response = client.request(
        "POST",
        "publish/",
        params=params,
        content=_progress_body(archive, f"upload {params['name']}", args.quiet),
        headers={"Content-Type": "application/zip", "Content-Length": str(len(archive))},
    )
    result = response.json()
    for problem in result["validation"]["problems"]:
        where = f"{problem['path']}:{problem['line']}" if problem.get("line") else problem["path"]
        print(f"{where}: {problem['severity']}: {problem['message']}", file=out)
    if args.dry_run:
        print(
            f"dry run: {'ok' if result['ok'] else 'NOT ok'}, scan {result['scan']['verdict']}, "
            f"fingerprint {result['fingerprint']}",
            file=out,
        )
        return 0 if result["ok"] else 1
    print(
        f"{result['package']}@{result['version']}: {result['status']} "
        f"(fingerprint {result['fingerprint']})",
        file=out,
    )
    return 0


def cmd_install(args, out, client: HubClient) -> int:
    namespace, name, spec = _split_ref(args.ref)
    spec = args.version or spec
    response = client.request(
        "GET",
        client.skill_path(namespace, name) + "download/",
        params={"version": spec} if spec else None,
    )
    body = response.content
    digest = base64.b64encode(hashlib.sha256(body).digest()).decode()
    if response.headers.get("Digest") != f"sha-256={digest}":
        raise CommandError("The download does not match its Digest header. Refusing to install.")
    key = client.request("GET", "signing-key/").json()
    if key_id_of(key["public_key_pem"]) != key["key_id"]:
        raise CommandError("The registry's signing key does not match its key id.")
    if response.headers.get("X-Cadre-Key-Id") != key["key_id"]:
        raise CommandError("The version was signed with another key than the registry's.")
    bundle = read_bundle(body)
    version = response.headers["X-Cadre-Version"]
    try:
        verify_files(
            package=f"@{namespace}/{name}",
            version=version,
            files={f.path: f.content for f in bundle.files},
            fingerprint=response.headers.get("X-Cadre-Fingerprint", ""),
            signature=response.headers.get("X-Cadre-Signature", ""),
            public_key_pem=key["public_key_pem"],
        )
    except IntegrityError as error:
        raise CommandError(str(error)) from None
    target = Path(args.dir) / name
    if target.exists() and not args.force:
        raise CommandError(f"{target} exists; use --force to replace it.")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=target.parent))
    try:
        bundle.extract(staging)
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    print(
        f"installed @{namespace}/{name}@{version} -> {target} (signature and fingerprint verified)",
        file=out,
    )
    return 0


def cmd_search(args, out, client: HubClient) -> int:
    results = client.request(
        "GET", "search/", params={"q": args.query, "limit": args.limit}
    ).json()["results"]
    if not results:
        print("no skills found", file=out)
    for item in results:
        flag = " (deprecated)" if item["deprecated"] else ""
        print(
            f"{item['name']}@{item['latest_version'] or '-'}  {item['summary'][:70]}"
            f"{flag}  score {item['score']:.3f}",
            file=out,
        )
    return 0


def cmd_tag(args, out, client: HubClient) -> int:
    namespace, name, _ = _split_ref(args.ref)
    path = client.skill_path(namespace, name) + f"tags/{quote(args.tag)}/"
    if args.remove:
        client.request("DELETE", path)
        print(f"removed tag {args.tag} from @{namespace}/{name}", file=out)
        return 0
    if not args.version:
        raise CommandError("Give the version the tag should point at.")
    tags = client.request("PUT", path, json={"version": args.version}).json()["tags"]
    print(
        f"@{namespace}/{name}: " + ", ".join(f"{t}={v}" for t, v in sorted(tags.items())), file=out
    )
    return 0


def cmd_yank(args, out, client: HubClient) -> int:
    namespace, name, _ = _split_ref(args.ref)
    base = client.skill_path(namespace, name) + f"versions/{quote(args.version)}/"
    if args.undo:
        client.request("POST", base + "unyank/")
        print(f"@{namespace}/{name}@{args.version} is installable again", file=out)
        return 0
    if not args.reason:
        raise CommandError("Say why with --reason.")
    client.request("POST", base + "yank/", json={"reason": args.reason})
    print(
        f"yanked @{namespace}/{name}@{args.version}: pins still resolve, ranges and latest skip it",
        file=out,
    )
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cadre skill", description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=os.environ.get("CADRE_URL", DEFAULT_URL))
    parser.add_argument("--token", default=os.environ.get("CADRE_API_KEY"))
    commands = parser.add_subparsers(dest="command", required=True)

    validate = commands.add_parser("validate", help="check a skill folder locally")
    validate.add_argument("folder")

    publish = commands.add_parser("publish", help="upload a skill folder as a new version")
    publish.add_argument("folder")
    publish.add_argument("--version", required=True)
    publish.add_argument("--name")
    publish.add_argument("--namespace")
    publish.add_argument("--changelog", default="")
    publish.add_argument("--visibility", choices=["department", "organization", "instance"])
    publish.add_argument("--department", type=int)
    publish.add_argument("--tag", action="append", default=[])
    publish.add_argument("--dry-run", action="store_true")
    publish.add_argument("--quiet", action="store_true", help="no progress bar")

    install = commands.add_parser("install", help="download, verify and unpack a skill")
    install.add_argument("ref", help="@namespace/name[@version|tag|range]")
    install.add_argument("--version")
    install.add_argument("--dir", default="skills")
    install.add_argument("--force", action="store_true")

    search = commands.add_parser("search", help="search the Hub")
    search.add_argument("query")
    search.add_argument("--limit", type=int, default=20)

    tag = commands.add_parser("tag", help="point a dist-tag at a version (or --remove it)")
    tag.add_argument("ref")
    tag.add_argument("version", nargs="?")
    tag.add_argument("tag")
    tag.add_argument("--remove", action="store_true")

    yank = commands.add_parser("yank", help="yank a version (or --undo)")
    yank.add_argument("ref")
    yank.add_argument("version")
    yank.add_argument("--reason")
    yank.add_argument("--undo", action="store_true")
    return parser


def main(argv: list[str] | None = None, *, out=None) -> int:
    """Entry point for `cadre skill …`; returns the exit status."""
    out = out or sys.stdout
    args = build_parser().parse_args(argv)
    try:
        if args.command == "validate":
            return cmd_validate(args, out)
        client = HubClient(args.url, args.token)
        try:
            handler = {
                "publish": cmd_publish,
                "install": cmd_install,
                "search": cmd_search,
                "tag": cmd_tag,
                "yank": cmd_yank,
            }[args.command]
            return handler(args, out, client)
        finally:
            client.close()
    except (CommandError, CadreError) as error:
        print(f"error: {getattr(error, 'message', None) or error}", file=sys.stderr)
        return 1
    except Exception as error:
        import httpx

        if isinstance(error, (OSError, httpx.HTTPError)):
            print(f"error: {error}", file=sys.stderr)
            return 1
        raise


if __name__ == "__main__":
    sys.exit(main())
