"""Skills recalled for outside memory clients (MemOS `include_skill`): Hub search, then only
versions whose files still match their signed fingerprint, in MemOS's skill_detail_list shape."""

from __future__ import annotations

import re

from django.urls import reverse

from cadre import signing
from cadre.errors import NotFound
from hub import selectors
from hub.integrity import IntegrityError, verify_files
from hub.models import SkillPackage, SkillVersion
from hub.validation import SKILL_FILE, parse_skill_md

SECTION = re.compile(r"^#{1,3}\s+(.+?)\s*$", re.MULTILINE)


def verified_files(package: SkillPackage, version: SkillVersion) -> dict[str, bytes]:
    """The version's files, checked against its fingerprint and the Hub's signature."""

    files = {item.path: bytes(item.blob.content) for item in version.files.select_related("blob")}
    verify_files(
        package=package.full_name,
        version=version.version,
        files=files,
        fingerprint=version.fingerprint,
        signature=version.signature,
        public_key_pem=signing.public_key_pem(),
    )
    return files


def _sections(body: str) -> dict[str, str]:
    """`## Heading` → text under it, lower-cased headings."""
    found: dict[str, str] = {}
    marks = list(SECTION.finditer(body))
    for index, mark in enumerate(marks):
        end = marks[index + 1].start() if index + 1 < len(marks) else len(body)
        found[mark.group(1).strip().lower()] = body[mark.end() : end].strip()
    return found


def _items(text: str) -> list[str]:
    lines = [re.sub(r"^\s*(?:[-*]|\d+[.)])\s+", "", line).strip() for line in text.splitlines()]
    return [line for line in lines if line]


def _pick(sections: dict[str, str], *names: str) -> str:
    return next((sections[name] for name in names if sections.get(name)), "")


def skill_detail(package: SkillPackage, version: SkillVersion, files, score, base_url) -> dict:
    text = files.get(SKILL_FILE, b"").decode("utf-8", "replace")
    document, _ = parse_skill_md(text)
    frontmatter = document.frontmatter if document else {}
    body = document.body if document else text
    sections = _sections(body)
    procedure = _pick(sections, "procedure", "steps", "instructions", "how to", "workflow")
    examples = _pick(sections, "examples", "example")
    download = reverse(
        "hub-skill-download", kwargs={"namespace": package.namespace.handle, "name": package.name}
    )
    return {
        "id": f"{package.full_name}@{version.version}",
        "skill_value": {
            "name": str(frontmatter.get("name") or package.name),
            "description": str(frontmatter.get("description") or package.summary or ""),
            "procedure": procedure or body.strip(),
            "experience": _items(_pick(sections, "experience", "lessons", "pitfalls")),
            "preference": _items(_pick(sections, "user preferences", "preferences")),
            "examples": [examples] if examples else [],
            "script": None,
            "others": None,
        },
        "skill_url": f"{base_url}{download}?version={version.version}",
        "skill_type": "SkillMemory",
        "skill_name": package.full_name,
        "skill_version": version.version,
        "fingerprint": version.fingerprint,
        "verified": True,
        "create_time": version.created_at.isoformat(),
        "update_time": (version.published_at or version.created_at).isoformat(),
        "conversation_id": "",
        "status": "activated",
        "confidence": 1.0,
        "tags": [],
        "relativity": round(min(max(float(score or 0.0), 0.0), 1.0), 4),
    }


def memos_skill_details(actor, query: str, *, limit: int, base_url: str) -> list[dict]:
    """Up to `limit` skills the actor may read, latest verified version each. A key without
    the Hub's read scope gets none (MemOS clients send include_skill on every search)."""
    if not actor.has("skill.view"):
        return []
    details = []
    # Lexical stages only: MemOS plugins ask on every turn, and the semantic stage would
    # load the embedding model into the request.
    for package, score in selectors.search(actor, query, limit=limit, semantic=False):
        try:
            version = selectors.resolve_version(package, "latest")
            files = verified_files(package, version)
        except (NotFound, IntegrityError):
            continue  # nothing published to install, or files that no longer match: left out
        details.append(skill_detail(package, version, files, score, base_url))
    return details
