"""Security scan of every uploaded skill version: findings (file, line, rule, excerpt) + verdict.

Verdicts, mildest first: pass (nothing found) → review (reach a reviewer should know about:
network calls, file writes) → warn (suspicious: obfuscation, prompt-injection phrasing, access
to sensitive paths) → block (download-and-execute, decode-and-execute, hard-coded credentials).
A blocked version never publishes. Credentials are found by the masking engine's `SECRET`
recognizers (one detector set for the whole platform); excerpts never show the secret itself.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass

from cadre.governance.masking.engine import analyze

VERDICTS = ("pass", "review", "warn", "block")
MAX_EXCERPT = 160


@dataclass(frozen=True)
class Finding:
    file: str
    line: int
    rule: str
    severity: str  # review | warn | block
    message: str
    excerpt: str

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class ScanResult:
    verdict: str
    findings: list[Finding]

    def as_dict(self) -> dict:
        return {"verdict": self.verdict, "findings": [f.as_dict() for f in self.findings]}


@dataclass(frozen=True)
class Rule:
    name: str
    severity: str
    message: str
    pattern: re.Pattern
    scope: str = "all"  # "all" files, "scripts" (code files), or "skill_md"


def _r(pattern: str) -> re.Pattern:
    return re.compile(pattern, re.IGNORECASE)


_SHELLS = r"(?:sudo\s+)?(?:ba|z|k|da|fi)?sh|python[23]?|perl|ruby|node"

RULES: tuple[Rule, ...] = (
    Rule(
        "download_execute",
        "block",
        "Downloads code and runs it straight away.",
        _r(
            rf"\b(?:curl|wget|fetch)\b[^\n|;]*\|\s*(?:{_SHELLS})\b"
            rf"|(?:{_SHELLS})\s+<\(\s*(?:curl|wget)\b"
            r"|\b(?:ba|z)?sh\s+-c\s+[\"']?\$\(\s*(?:curl|wget)\b"
            r"|\b(?:iwr|irm|invoke-webrequest|invoke-restmethod)\b[^\n]*\|\s*(?:iex|invoke-expression)\b"
            r"|\b(?:exec|eval)\s*\(\s*(?:urllib\.request\.urlopen|requests\.get|urlopen)\s*\("
        ),
    ),
    Rule(
        "decode_execute",
        "block",
        "Decodes a hidden payload and executes it.",
        _r(
            r"base64\s+(?:-d|--decode|-D)\b[^\n]*\|\s*(?:" + _SHELLS + r")\b"
            r"|\b(?:exec|eval)\s*\(\s*(?:base64\.b64decode|codecs\.decode|bytes\.fromhex"
            r"|zlib\.decompress|marshal\.loads|__import__\(\s*['\"]base64)"
            r"|\beval\s*\(\s*(?:atob|Buffer\.from)\s*\("
        ),
    ),
    Rule(
        "encoded_blob",
        "warn",
        "Contains a long encoded blob (base64 or hex escapes) that reviewers cannot read.",
        re.compile(r"[A-Za-z0-9+/]{200,}={0,2}|(?:\\x[0-9a-fA-F]{2}){40,}"),
    ),
    Rule(
        "obfuscated_code",
        "warn",
        "Builds code at run time in a way that hides what it does.",
        _r(
            r"\bchr\s*\(\s*\d+\s*\)\s*\+\s*chr\s*\(|String\.fromCharCode\s*\((?:\s*\d+\s*,){8,}"
            r"|\bexec\s*\(\s*compile\s*\("
        ),
        scope="scripts",
    ),
    Rule(
        "sensitive_path",
        "warn",
        "Reaches credential stores or system files.",
        _r(
            r"~/\.ssh\b|\.ssh/id_|~/\.aws\b|\.aws/credentials|/etc/(?:passwd|shadow|sudoers)"
            r"|~/\.kube/config|\.netrc\b|\.git-credentials|\brm\s+-[a-z]*r[a-z]*f?\s+(?:/|~)(?:\s|$)"
            r"|\bchmod\s+(?:-R\s+)?777\b|\bcrontab\b"
        ),
    ),
    Rule(
        "network_reach",
        "review",
        "Makes network calls.",
        _r(
            r"\b(?:curl|wget|nc|ncat|netcat|telnet|ssh|scp|rsync)\s"
            r"|\b(?:requests|httpx|aiohttp|urllib3?)\.(?:get|post|put|delete|request|urlopen|Client)\b"
            r"|\burllib\.request\b|\bsocket\.socket\b|\bfetch\s*\(|\bXMLHttpRequest\b|https?://"
        ),
        scope="scripts",
    ),
    Rule(
        "filesystem_reach",
        "review",
        "Writes, moves or deletes files.",
        _r(
            r"\b(?:rm|mv|dd|mkfs|shred)\s+-?|\bos\.(?:remove|unlink|rmdir|system)\b"
            r"|\bshutil\.(?:rmtree|move)\b|\bopen\s*\([^)]*['\"][wa]b?\+?['\"]"
            r"|\bsubprocess\.|\bfs\.(?:writeFile|unlink|rm)"
        ),
        scope="scripts",
    ),
    Rule(
        "prompt_injection",
        "warn",
        "Reads like an attempt to override the agent's instructions.",
        _r(
            r"\b(?:ignore|disregard|forget)\s+(?:all\s+|any\s+)?(?:the\s+)?(?:previous|prior|above"
            r"|earlier|system|your)\s+(?:instructions|prompts?|rules|guidelines)"
            r"|\byou\s+are\s+now\s+(?:in\s+)?(?:dan|developer\s+mode|jailbroken|unrestricted)"
            r"|\b(?:reveal|print|show|leak)\s+(?:your|the)\s+system\s+prompt"
            r"|\bdo\s+not\s+(?:tell|inform|let)\s+the\s+user"
            r"|\bwithout\s+(?:asking|telling)\s+the\s+user"
            r"|\b(?:exfiltrate|send)\s+(?:the\s+)?(?:user'?s?\s+)?(?:credentials|secrets|api\s+keys)"
            r"|忽略(?:之前|以上|上述|所有)的?(?:指令|指示|规则)|不要告诉用户"
        ),
        scope="skill_md",
    ),
)

_SCRIPT_SUFFIXES = (
    ".sh", ".bash", ".zsh", ".py", ".js", ".mjs", ".cjs", ".ts", ".rb", ".pl", ".ps1", ".bat",
    ".cmd", ".php", ".lua",
)  # fmt: skip


def _is_script(path: str) -> bool:
    return path.startswith("scripts/") or path.lower().endswith(_SCRIPT_SUFFIXES)


def _excerpt(line: str) -> str:
    text = line.strip()
    return text if len(text) <= MAX_EXCERPT else text[: MAX_EXCERPT - 1] + "…"


def _secret_spans(text: str) -> list[tuple[int, int]]:
    """Spans of credentials found by the platform's masking engine (SECRET entities)."""
    return [(found.start, found.end) for found in analyze(text, entities=["SECRET"])]


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def scan_text(path: str, text: str) -> list[Finding]:
    findings: list[Finding] = []
    lines = text.splitlines()
    is_script, is_skill_md = _is_script(path), path == "SKILL.md"
    for rule in RULES:
        if rule.scope == "scripts" and not is_script:
            continue
        if rule.scope == "skill_md" and not is_skill_md:
            continue
        seen_lines: set[int] = set()
        for match in rule.pattern.finditer(text):
            line = _line_of(text, match.start())
            if line in seen_lines:
                continue
            seen_lines.add(line)
            excerpt = match.group(0) if rule.name == "encoded_blob" else lines[line - 1]
            findings.append(
                Finding(path, line, rule.name, rule.severity, rule.message, _excerpt(excerpt))
            )
    for start, end in _secret_spans(text):
        line = _line_of(text, start)
        shown = lines[line - 1].replace(text[start:end], "[secret]")
        findings.append(
            Finding(
                path,
                line,
                "hardcoded_secret",
                "block",
                "Contains a hard-coded credential; read it from the environment instead.",
                _excerpt(shown),
            )
        )
    return findings


def verdict_of(findings: Iterable[Finding]) -> str:
    worst = 0
    for finding in findings:
        worst = max(worst, VERDICTS.index(finding.severity))
    return VERDICTS[worst]


def scan_files(files: Iterable[tuple[str, bytes]]) -> ScanResult:
    """Scan every text file; binary files are listed only when they are executable formats."""
    findings: list[Finding] = []
    for path, content in files:
        if content[:4] in (b"\x7fELF", b"MZ\x90\x00") or content[:2] == b"MZ":
            findings.append(
                Finding(path, 1, "binary_executable", "warn", "Ships a compiled executable.", "")
            )
            continue
        try:
            text = content.decode("utf-8")
        except UnicodeDecodeError:
            continue
        findings.extend(scan_text(path, text))
    findings.sort(key=lambda f: (-VERDICTS.index(f.severity), f.file, f.line))
    return ScanResult(verdict_of(findings), findings)
