"""Drafting a template version from experience: documents and notes in, SOP / AGENT.md /
USER.md out, as a new draft an admin edits, reviews and publishes.

Text comes from md and txt files, docx (the document XML) and PDF text (content streams, plain
or Flate-compressed, Tj/TJ operators — enough for text PDFs; scanned or CID-font PDFs give
little, see docs/agents.md). With a real model the template's provider writes the draft; with
the offline provider the draft is built from the documents' headings and lists and says so.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import re
import zipfile
import zlib
from xml.etree import ElementTree

from django.db import transaction

from cadre.agents import providers, services
from cadre.agents.models import AgentTemplate, TemplateVersion
from cadre.errors import InvalidInput
from cadre.governance import audit
from cadre.governance.budgets import account_for_actor
from cadre.llm import BudgetExceeded, ProviderError, provider_for
from cadre.llm.metering import charged_to
from cadre.tenancy.actors import Actor

MAX_FILE_BYTES = 5 * 1024 * 1024
MAX_TEXT_CHARS = 60_000
OFFLINE_BANNER = (
    "> Offline draft: generated without a model from the uploaded documents' headings and "
    "lists. Review and edit before publishing."
)
_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


# --- text extraction ----------------------------------------------------------------------


def _docx_text(data: bytes) -> str:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            xml = archive.read("word/document.xml")
    except (zipfile.BadZipFile, KeyError):
        raise InvalidInput("That .docx file cannot be read.") from None
    root = ElementTree.fromstring(xml)  # noqa: S314 - a zip member we size-limit, no DTDs
    lines = []
    for paragraph in root.iter(f"{_W}p"):
        text = "".join(node.text or "" for node in paragraph.iter(f"{_W}t")).strip()
        if not text:
            continue
        style = paragraph.find(f"{_W}pPr/{_W}pStyle")
        style_name = style.get(f"{_W}val", "") if style is not None else ""
        level = re.search(r"Heading(\d)", style_name or "")
        if level:
            lines.append("#" * int(level[1]) + " " + text)
        elif paragraph.find(f"{_W}pPr/{_W}numPr") is not None or "List" in style_name:
            lines.append("- " + text)
        else:
            lines.append(text)
    return "\n".join(lines)


def _pdf_string(raw: bytes) -> str:
    raw = re.sub(
        rb"\\([nrtbf()\\])",
        lambda m: {b"n": b"\n", b"r": b"", b"t": b"\t", b"b": b"", b"f": b""}.get(m[1], m[1]),
        raw,
    )
    return raw.decode("latin-1")


def _pdf_text(data: bytes) -> str:
    chunks = []
    for match in re.finditer(rb"stream\r?\n(.*?)\r?\nendstream", data, re.S):
        content = match[1]
        with contextlib.suppress(zlib.error):
            content = zlib.decompress(content)
        line: list[str] = []
        for op in re.finditer(
            rb"\((?:\\.|[^\\)])*\)\s*Tj|\[(?:\\.|[^\]])*\]\s*TJ|T\*|Td|TD|ET", content
        ):
            token = op[0]
            if token.endswith(b"Tj"):
                line.append(_pdf_string(token[1 : token.rindex(b")")]))
            elif token.endswith(b"TJ"):
                line += [_pdf_string(part) for part in re.findall(rb"\(((?:\\.|[^\\)])*)\)", token)]
            elif line:
                chunks.append("".join(line))
                line = []
        if line:
            chunks.append("".join(line))
    return "\n".join(chunk.strip() for chunk in chunks if chunk.strip())


def extract_text(name: str, data: bytes) -> str:
    if len(data) > MAX_FILE_BYTES:
        raise InvalidInput(
            f"{name}: files are limited to {MAX_FILE_BYTES // 1024 // 1024} MB.",
            code="payload_too_large",
        )
    suffix = name.lower().rsplit(".", 1)[-1] if "." in name else ""
    if suffix in ("md", "markdown", "txt", "text"):
        return data.decode("utf-8", errors="replace")
    if suffix == "docx":
        return _docx_text(data)
    if suffix == "pdf":
        return _pdf_text(data)
    raise InvalidInput(
        f"{name}: only md, txt, docx and pdf files are accepted.", code="unsupported_file"
    )


# --- drafts -------------------------------------------------------------------------------

_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*$")
_ITEM = re.compile(r"^\s*(?:[-*+•]|\d+[.)、])\s+(.+)$")
_BOUNDARY = re.compile(r"never|do not|don't|must not|forbidden|boundar|禁止|不得|不要", re.I)


def outline(text: str) -> list[tuple[str, list[str]]]:
    """(heading, list items) pairs in document order; items before any heading go under ''."""
    sections: list[tuple[str, list[str]]] = [("", [])]
    for line in text.splitlines():
        heading = _HEADING.match(line.strip())
        if heading:
            sections.append((heading[2].strip(), []))
            continue
        item = _ITEM.match(line)
        if item:
            sections[-1][1].append(item[1].strip())
    return [(h, items) for h, items in sections if h or items]


def offline_draft(template_name: str, documents: list[tuple[str, str]], notes: str) -> dict:
    """A structured draft from headings and lists, clearly marked as produced offline."""
    sop = [f"# {template_name}: standard operating procedure", "", OFFLINE_BANNER, ""]
    boundaries: list[str] = []
    topics: list[str] = []
    for name, text in [*documents, *([("notes", notes)] if notes.strip() else [])]:
        sections = outline(text)
        sop.append(f"## From {name}")
        for heading, items in sections:
            if heading:
                sop.append(f"### {heading}")
                topics.append(heading)
            sop += [f"- {item}" for item in items]
            boundaries += [item for item in items if _BOUNDARY.search(item)]
        sop.append("")
    agent_md = "\n".join(
        [
            OFFLINE_BANNER,
            "",
            "# Persona",
            f"You are the {template_name} assistant of {{{{member.display_name}}}}.",
            "",
            "# Instructions",
            "- Follow the SOP step by step; say which step you are on.",
            *[f"- Be ready to help with: {topic}" for topic in dict.fromkeys(topics)][:12],
            "",
            "# Boundaries",
            *(
                [f"- {item}" for item in dict.fromkeys(boundaries)]
                or ["- (none found in the documents: add them before publishing)"]
            ),
        ]
    )
    user_md = "\n".join(
        [
            OFFLINE_BANNER,
            "",
            "# About {{member.display_name}}",
            "- Title: {{member.title}}",
            "- Department: {{member.department}}",
            *[
                f'- Their part in "{topic}": (filled in by the member)'
                for topic in list(dict.fromkeys(topics))[:6]
            ],
        ]
    )
    return {
        "sop": "\n".join(sop).strip() + "\n",
        "agent_md": agent_md + "\n",
        "user_md_template": user_md + "\n",
    }


_PROMPT = (
    "You write role templates for AI agents in a company. From the documents and notes, "
    "write three markdown documents and answer with JSON only: "
    '{"sop": "...", "agent_md": "...", "user_md_template": "..."}. The SOP lists the '
    "procedures step by step. AGENT.md has the sections Persona, Instructions and Boundaries. "
    "USER.md is a template of what the agent should know about its user, using placeholders "
    "{{member.display_name}}, {{member.title}}, {{member.department}}."
)


def model_draft(provider, template_name: str, documents: list[tuple[str, str]], notes: str) -> dict:
    corpus = "\n\n".join(f"=== {name} ===\n{text}" for name, text in documents)
    if notes.strip():
        corpus += f"\n\n=== notes ===\n{notes}"
    result = provider.chat(
        [
            {"role": "system", "content": _PROMPT},
            {"role": "user", "content": f"Role: {template_name}\n\n{corpus[:MAX_TEXT_CHARS]}"},
        ],
        [],
    )
    text = result.text.strip()
    text = re.sub(r"^```(?:json)?\s*|\s*```$", "", text)
    data = json.loads(text)
    if not all(isinstance(data.get(key), str) for key in ("sop", "agent_md", "user_md_template")):
        raise ValueError("the model's answer lacks sop, agent_md or user_md_template")
    return {key: data[key] for key in ("sop", "agent_md", "user_md_template")}


def template_generate(
    *, actor: Actor, template: AgentTemplate, documents: list[tuple[str, bytes]], notes: str = ""
) -> TemplateVersion:
    """A new draft version of `template` drafted from documents (see the module docs). The
    model is asked before the transaction that stores the draft (a model call holds no
    database transaction open), charged to the acting member and the template under
    `template.generate`; a hard budget refuses it (BudgetExceeded) and nothing is stored."""
    actor.require("template.manage", template)
    if not documents and not notes.strip():
        raise InvalidInput("Upload at least one document or write notes.")
    texts = [(name, extract_text(name, data)[:MAX_TEXT_CHARS]) for name, data in documents]
    latest = template.versions.order_by("-number").first()
    settings = latest.model_settings if latest else {}
    try:
        config, settings = providers.resolve(settings, template.organization_id)
    except providers.ProviderUnavailable:
        config, settings = None, {"provider": "offline"}
    provider = provider_for(settings, config)
    mode = "offline"
    draft = None
    if provider.kind != "offline":
        account = account_for_actor(actor, template_id=template.pk, purpose="template.generate")
        try:
            with charged_to(account):
                draft = model_draft(provider, template.name, texts, notes)
            mode = f"model:{provider.model}"
        except BudgetExceeded:
            raise  # the person is told why, not handed an offline draft instead
        except (ProviderError, ValueError) as error:
            mode = f"offline (the model failed: {str(error)[:200]})"
    if draft is None:
        draft = offline_draft(template.name, texts, notes)
    return _store_draft(
        actor=actor, template=template, documents=documents, notes=notes, draft=draft, mode=mode
    )


@transaction.atomic
def _store_draft(
    *,
    actor: Actor,
    template: AgentTemplate,
    documents: list[tuple[str, bytes]],
    notes: str,
    draft: dict,
    mode: str,
) -> TemplateVersion:
    version = services.version_draft(actor=actor, template=template)
    version = services.version_update(actor=actor, version=version, **draft)
    version.generated_from = {
        "mode": mode,
        "files": [
            {"name": name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
            for name, data in documents
        ],
        "notes": bool(notes.strip()),
    }
    version.save(update_fields=["generated_from"])
    audit.record(
        actor=actor,
        action="template.generate",
        target=version,
        changes={"mode": mode, "files": [name for name, _ in documents]},
    )
    return version
