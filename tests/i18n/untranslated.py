"""Find English a Chinese reader would meet: visible text and the attributes people read.

`english_sentences(html)` lists the English phrases of a page outside code (<code>, <pre>,
<kbd>, <samp>, <script>, <style>, <svg>) and elements marked translate="no" (data: names,
identifiers); `english_sentences_in_text(text)` the same for plain text (IM messages, cards).
A phrase is two or more English words in a row, or one English word of a sentence ("Save");
product names, codes and units are allowed (ALLOWED)."""

from __future__ import annotations

import re
from html.parser import HTMLParser

# Names and terms that stay as they are in a Chinese interface.
ALLOWED = {
    # identity providers, model services and protocols named as their makers write them
    "Authing",
    "AgentId",
    "Shibboleth",
    "PingFederate",
    "IdP",
    "DashScope",
    "Kimi",
    "Zhipu",
    "LiteLLM",
    "OneAPI",
    "stdio",
    "Cadre",
    "Feishu",
    "Lark",
    "WeCom",
    "DingTalk",
    "Slack",
    "OpenAI",
    "MCP",
    "SCIM",
    "SSO",
    "OIDC",
    "SAML",
    "OpenClaw",
    "ClawHub",
    "Hub",
    "API",
    "JSON",
    "JSONL",
    "CSV",
    "OCSF",
    "SIEM",
    "URL",
    "HTTP",
    "HTTPS",
    "ID",
    "IP",
    "LLM",
    "AGENT.md",
    "USER.md",
    "SKILL.md",
    "SOP",
    "PII",
    "Mem0",
    "MemOS",
    "OpenTelemetry",
    "PostgreSQL",
    "Redis",
    "Celery",
    "OpenSSL",
    "UTC",
    "GMT",
    "Webhook",
    "webhook",
    "Bearer",
    "Agent",
    "Token",
    "token",
    "tokens",
    "Tokens",
    "English",
    "Markdown",
    "YAML",
    "SHA",
    "HMAC",
    "RSA",
    "JWT",
    "SKILL",
    "Entra",
    "Okta",
    "Keycloak",
    "Authentik",
    "Google",
    "Microsoft",
    "GitHub",
    "pgvector",
    "Chromium",
    "sk",
    "cURL",
    "curl",
    "Python",
    "Docker",
    "Kubernetes",
    "LDAP",
    "QPS",
    "p50",
    "p95",
    "ms",
    "KB",
    "MB",
    "GB",
    "min",
    "max",
    "RRF",
    "MMR",
    "BM25",
    "R@10",
    "USD",
    "CNY",
    "EUR",
    "am",
    "pm",
    "AM",
    "PM",
    "Ollama",
    "vLLM",
    "DeepSeek",
    "Qwen",
    "Claude",
    "GPT",
    "Anthropic",
    "Azure",
}
SKIP_TAGS = {"code", "pre", "kbd", "samp", "script", "style", "svg", "textarea", "template"}
ATTRIBUTES = ("title", "placeholder", "aria-label", "alt")
VOID = {
    "area",
    "base",
    "br",
    "col",
    "embed",
    "hr",
    "img",
    "input",
    "link",
    "meta",
    "source",
    "track",
    "wbr",
    "param",
}
WORD = r"[A-Za-z][A-Za-z'\u2019]*"
PHRASE = re.compile(rf"{WORD}(?:[ \t\-/,]+{WORD})*")
# Identifiers, addresses, paths and codes are not sentences; nor is a word with a capital after
# a small letter (camelCase, or a random token such as a generated password or public id).
NOT_WORDS = re.compile(
    r"\S+@\S+|https?://\S+|\S*[/\\]\S*|\S*_\S*|\S+\.\S+|\b[A-Z0-9]{2,}\b|\S*\d\S*"
    r"|(?<![\w-])[a-z0-9]+(?:-[a-z0-9]+)+(?![\w-])|\S*[a-z][A-Z]\S*"
)


# Names of more than one word (each word alone would be English).
TERMS = re.compile(
    r"OpenID Connect|Google Workspace|LM Studio|Streamable HTTP|Microsoft Entra(?: ID)?|Azure AD"
)


def english_sentences_in_text(text: str) -> list[str]:
    found = []
    for phrase in PHRASE.findall(NOT_WORDS.sub(" ", TERMS.sub(" ", text))):
        words = [w for w in re.findall(WORD, phrase) if w not in ALLOWED and len(w) > 1]
        if words:
            found.append(phrase.strip())
    return found


class _Visible(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, bool]] = []  # (tag, hidden-from-check)
        self.texts: list[str] = []

    def _skipped(self) -> bool:
        return any(hidden for _, hidden in self.stack)

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        hidden = tag in SKIP_TAGS or attributes.get("translate") == "no"
        if not hidden and not self._skipped():
            for name in ATTRIBUTES:
                if attributes.get(name):
                    self.texts.append(attributes[name])
            if tag == "input" and attributes.get("type") in ("submit", "button"):
                self.texts.append(attributes.get("value") or "")
        if tag not in VOID:
            self.stack.append((tag, hidden))

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in VOID and self.stack and self.stack[-1][0] == tag:
            self.stack.pop()

    def handle_endtag(self, tag):
        for index in range(len(self.stack) - 1, -1, -1):
            if self.stack[index][0] == tag:
                del self.stack[index:]
                return

    def handle_data(self, data):
        if not self._skipped() and data.strip():
            self.texts.append(data)


def english_sentences(html: str) -> list[str]:
    parser = _Visible()
    parser.feed(html)
    parser.close()
    found = []
    for text in parser.texts:
        found.extend(english_sentences_in_text(text))
    return found
