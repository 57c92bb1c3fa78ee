"""Drafting a template version from experience: documents and notes in, SOP / AGENT.md /
USER.md out, as a new draft an admin edits, reviews and publishes.

Text comes from md and txt files, docx (the document XML) and PDF text (content streams, plain
or Flate-compressed, Tj/TJ operators — enough for text PDFs; scanned or CID-font PDFs give
little, see docs/agents.md). With a real model the template's provider writes the draft; with
the offline provider the draft keeps the documents' own headings, paragraphs and lists and says
so. A template's open draft (a new template's v1 included) is filled in; otherwise a new draft
is started from the newest version.
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
from django.utils.translation import gettext

from cadre.agents import providers, services
from cadre.agents.models import AgentTemplate, TemplateVersion
from cadre.errors import Conflict, InvalidInput
from cadre.governance import audit
from cadre.governance.budgets import account_for_actor
from cadre.llm import BudgetExceeded, ProviderError, provider_for
from cadre.llm.metering import charged_to
from cadre.tenancy.actors import Actor

MAX_FILE_BYTES = 5 * 1024 * 1024
MAX_TEXT_CHARS = 60_000
OFFLINE_BANNER = (
    "> Offline draft: generated without a model from the uploaded documents' own text "
    "(headings, paragraphs and lists). Review and edit before publishing."
)
_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


# --- text extraction ----------------------------------------------------------------------


def _docx_text(data: bytes) -> str:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            xml = archive.read("word/document.xml")
    except (zipfile.BadZipFile, KeyError):
        raise InvalidInput(gettext("That .docx file cannot be read.")) from None
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
            gettext("%(name)s: files are limited to %(value)s MB.")
            % {"name": name, "value": MAX_FILE_BYTES // 1024 // 1024},
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
        gettext("%(name)s: only md, txt, docx and pdf files are accepted.") % {"name": name},
        code="unsupported_file",
    )


# --- drafts -------------------------------------------------------------------------------

_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*$")
_SETEXT = re.compile(r"^(=+|-{3,})\s*$")
_ITEM = re.compile(r"^\s*(?:([-*+•])\s+|(\d+)[.)]\s+|(\d+)、\s*)(.+)$")
_BOUNDARY = re.compile(
    r"never|do not|don't|must not|forbidden|boundar|禁止|不得|不要|不能|严禁", re.I
)
# A label line of a plain-text document ("Purpose:", or with a full-width colon) heads the lines
# after it.
_LABEL = re.compile(r"^(.{1,60}?)\s*[:\uff1a]$")
# Headings whose paragraphs say what the role is for: they become the persona's brief.
_PURPOSE = re.compile(
    r"purpose|goal|objective|mission|role|overview|about|summary|scope|"
    r"目的|目标|宗旨|职责|角色|概述|简介|定位|使命",
    re.I,
)
# A template name already ending in one of these is the role ("Marketing assistant", "销售助手"):
# the persona adds no second "assistant".
_ROLE_WORD = re.compile(
    r"(?:\b(?:assistant|agent|bot|chatbot|helper|copilot|co-pilot|advisor|adviser|concierge)"
    r"|助手|助理|顾问|机器人|智能体|客服)\s*$",
    re.I,
)
# Headings of rules: what they hold that is no boundary is an instruction.
_RULES = re.compile(r"rule|boundar|limit|guideline|do's|policy|边界|规则|红线|要求|注意", re.I)
_CJK = re.compile(r"[\u3000-\u30ff\u3400-\u9fff\uf900-\ufaff\uff00-\uffef]")


def _joined(lines: list[str]) -> str:
    # Lines of one paragraph: a space between words, none between CJK characters.
    text = ""
    for line in lines:
        if text and not (_CJK.match(text[-1]) and _CJK.match(line[0])):
            text += " "
        text += line
    return text


def outline(text: str) -> list[tuple[str, list[tuple[str, str]]]]:
    """(heading, blocks) pairs in document order; a block is ("item", "- text" or "1. text")
    or ("text", a paragraph). Content before any heading goes under ''. Markdown headings
    (# and underlined), list items and paragraphs are kept; a plain-text label line ending in
    a colon heads what follows it."""
    sections: list[tuple[str, list[tuple[str, str]]]] = [("", [])]
    paragraph: list[str] = []

    def close() -> None:
        if paragraph:
            sections[-1][1].append(("text", _joined(paragraph)))
            paragraph.clear()

    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("```") or line.startswith("<!--"):
            close()
            continue
        if _SETEXT.match(line) and len(paragraph) == 1:
            heading_text = paragraph.pop()
            sections.append((heading_text, []))
            continue
        heading = _HEADING.match(line)
        if heading:
            close()
            sections.append((heading[2].strip(), []))
            continue
        item = _ITEM.match(raw)
        if item and item[4].strip():
            close()
            number = item[2] or item[3]
            marker = f"{number}." if number else "-"
            sections[-1][1].append(("item", f"{marker} {item[4].strip()}"))
            continue
        label = _LABEL.match(line)
        if label and not paragraph:
            sections.append((label[1].strip(), []))
            continue
        paragraph.append(line.lstrip("> ").strip() or line)
    close()
    return [(heading, blocks) for heading, blocks in sections if heading or blocks]


def _bare(block: str) -> str:
    return re.sub(r"^(?:-|\d+\.)\s+", "", block)


def _persona(template_name: str) -> str:
    name = template_name.strip()
    if _CJK.search(name):
        role = name if _ROLE_WORD.search(name) else f"{name}助手"
        return f"你是{{{{member.display_name}}}}的{role}。"
    role = name if _ROLE_WORD.search(name) else f"{name} assistant"
    return f"You are the {role} of {{{{member.display_name}}}}."


def offline_draft(template_name: str, documents: list[tuple[str, str]], notes: str) -> dict:
    """A draft keeping the documents' content — headings as sections, paragraphs as text,
    lists as lists — clearly marked as produced offline: the SOP holds all of it, AGENT.md the
    persona, the purpose paragraphs, the topics and the boundaries found."""
    sop = [f"# {template_name}: standard operating procedure", "", OFFLINE_BANNER, ""]
    boundaries: list[str] = []
    rules: list[str] = []
    topics: list[str] = []
    purpose: list[str] = []
    for name, text in [*documents, *([("notes", notes)] if notes.strip() else [])]:
        sections = outline(text)
        sop += [f"## From {name}", ""]
        for heading, blocks in sections:
            if heading:
                sop += [f"### {heading}", ""]
                # A heading with nothing of its own (a document's title) is no topic.
                if blocks and not (
                    _PURPOSE.search(heading)
                    or _RULES.search(heading)
                    or _BOUNDARY.search(heading)
                    or heading.casefold() == template_name.strip().casefold()
                ):
                    topics.append(heading)
            previous = None
            for kind, block in blocks:
                if previous is not None and (kind == "text" or previous == "text"):
                    sop.append("")
                sop.append(block)
                previous = kind
                if kind == "text" and (
                    (heading and _PURPOSE.search(heading)) or (not heading and not purpose)
                ):
                    purpose.append(block)
                for sentence in [_bare(block)] if kind == "item" else _sentences(block):
                    if _BOUNDARY.search(sentence):
                        boundaries.append(sentence)
                    elif heading and _RULES.search(heading):
                        rules.append(sentence)
            if blocks:
                sop.append("")
    agent_md = "\n".join(
        [
            OFFLINE_BANNER,
            "",
            "# Persona",
            _persona(template_name),
            *[line for paragraph in dict.fromkeys(purpose) for line in ("", paragraph)][:12],
            "",
            "# Instructions",
            "- Follow the SOP step by step; say which step you are on.",
            *[f"- {rule}" for rule in dict.fromkeys(rules)][:20],
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


def _sentences(paragraph: str) -> list[str]:
    parts = re.split(r"(?<=[.!?\u3002\uff01\uff1f])\s*", paragraph)
    return [part.strip() for part in parts if part.strip()]


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
    """`template`'s open draft — or a new one — drafted from documents (see the module docs):
    its SOP, AGENT.md and USER.md template are replaced, the rest of the draft is kept. The
    model is asked before the transaction that stores the draft (a model call holds no
    database transaction open), charged to the acting member and the template under
    `template.generate`; a hard budget refuses it (BudgetExceeded) and nothing is stored."""
    actor.require("template.manage", template)
    if not documents and not notes.strip():
        raise InvalidInput(gettext("Upload at least one document or write notes."))
    _open_version(template)  # refused before any model is asked
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


def _open_version(template: AgentTemplate, *, lock: bool = False) -> TemplateVersion | None:
    """The template's open draft to fill, or None (a new draft is started); one in review is
    refused: its reviewers are reading it."""
    versions = template.versions.select_for_update() if lock else template.versions
    version = versions.exclude(status=TemplateVersion.Status.PUBLISHED).order_by("-number").first()
    if version is not None and version.status != TemplateVersion.Status.DRAFT:
        raise Conflict(
            gettext("v%(number)s is in review: withdraw it to draft first, then generate into it.")
            % {"number": version.number},
            code="not_draft",
        )
    return version


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
    version = _open_version(template, lock=True)
    if version is None:
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
