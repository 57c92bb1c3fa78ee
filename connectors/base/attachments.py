"""Files and images sent to an agent: one attachment shape for every platform, lazy download.

Each platform's parser turns its file/image message into `Attachment`s (name, size, mime type,
the platform's file key, and what the download needs) stored with the inbound event; nothing is
downloaded when the message arrives. `attachment_download(event, index)` fetches one file
through the platform's API when it is needed (each platform's `files.py` says how), refusing
files over the connector's size cap before and while reading.

A connector takes file messages when its platform has the `file_messages` capability and its
`settings.file_messages` is not `false`; otherwise a file-only message is ignored and a caption
keeps only its text. The size cap is `settings.file_max_bytes` (default 20 MiB).
"""

from __future__ import annotations

import mimetypes
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from cadre import outbound
from connectors.base import platform_for
from connectors.base.transport import TransportError, destination_refused

if TYPE_CHECKING:
    from connectors.base import Platform
    from connectors.models import InboundEvent

DEFAULT_MAX_BYTES = 20 * 1024 * 1024
CHUNK = 64 * 1024


class AttachmentError(Exception):
    """The attachment cannot be fetched (no such attachment, disabled, too large)."""


class AttachmentTooLarge(AttachmentError):
    pass


@dataclass(frozen=True)
class Attachment:
    """A file or image on the platform, as stored with the inbound event."""

    kind: str  # file, image
    key: str  # the platform's file key / media id / download code / file id
    name: str = ""
    size: int = 0  # bytes; 0 when the platform does not say
    mime: str = ""
    # What the download needs besides the key (Feishu message id, Slack private URL, …).
    source: dict = field(default_factory=dict)

    @classmethod
    def of(
        cls, kind: str, key: str, *, name: str = "", size=0, mime: str = "", **source
    ) -> Attachment:
        name = str(name or "")
        if not mime and name:
            mime = mimetypes.guess_type(name)[0] or ""
        if not mime and kind == "image":
            mime = "image/*"
        try:
            size = max(0, int(size or 0))
        except (TypeError, ValueError):
            size = 0
        return cls(kind, str(key), name, size, mime, {k: str(v) for k, v in source.items() if v})

    def as_dict(self) -> dict:
        return asdict(self)


def file_messages_enabled(platform: Platform) -> bool:
    """The connector takes files: its platform can, and its settings do not say no."""
    return bool(platform.capabilities.file_messages) and (
        platform.settings.get("file_messages", True) not in (False, "false", "0", 0)
    )


def describe(attachments: list[Attachment]) -> str:
    """One line per attachment for the run's input text (the agent learns what was sent)."""
    lines = []
    for item in attachments:
        facts = [fact for fact in (item.mime, _size_text(item.size)) if fact]
        label = item.name or ("an image" if item.kind == "image" else "a file")
        lines.append(
            f"[Attached {item.kind}: {label}" + (f" ({', '.join(facts)})]" if facts else "]")
        )
    return "\n".join(lines)


def with_attachments(text: str, attachments: list[Attachment]) -> str:
    return "\n".join(part for part in (text, describe(attachments)) if part)


def _size_text(size: int) -> str:
    if not size:
        return ""
    for unit in ("bytes", "KB", "MB"):
        if size < 1024 or unit == "MB":
            return f"{size} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    return ""


@dataclass(frozen=True)
class Downloaded:
    name: str
    mime: str
    content: bytes


def max_bytes_for(platform: Platform) -> int:
    try:
        return int(platform.settings.get("file_max_bytes", DEFAULT_MAX_BYTES))
    except (TypeError, ValueError):
        return DEFAULT_MAX_BYTES


def attachment_download(
    event: InboundEvent, index: int = 0, *, max_bytes: int | None = None
) -> Downloaded:
    """Fetch one attachment of a stored message through the platform's API (size-capped).

    Raises AttachmentError (no such attachment, file messages off, too large) or the
    transport's TransportError (platform refused or unreachable; `retryable` says whether to
    try later).
    """
    platform = platform_for(event.connector)
    if not file_messages_enabled(platform):
        raise AttachmentError("this connector does not take file messages")
    stored = (event.payload or {}).get("attachments") or []
    if not 0 <= index < len(stored):
        raise AttachmentError(f"the message has no attachment {index}")
    attachment = Attachment(**stored[index])
    limit = max_bytes if max_bytes is not None else max_bytes_for(platform)
    if attachment.size and attachment.size > limit:
        raise AttachmentTooLarge(f"{attachment.name or 'the file'} is over {limit} bytes")
    transport = platform.transport()
    files = platform.part("files")
    method, url, request, auth = files.download_request(transport, attachment)
    content, mime = fetch_capped(transport, method, url, request, auth=auth, limit=limit)
    # Some platforms answer a refused download with a JSON error and status 200.
    refused = getattr(files, "download_error", lambda content: "")(content)
    if refused:
        raise TransportError(f"download refused: {refused}")
    return Downloaded(attachment.name, attachment.mime or mime, content)


def fetch_capped(
    transport, method: str, url: str, request: dict, *, auth: bool, limit: int
) -> tuple[bytes, str]:
    """Stream a file, stopping as soon as it passes `limit` bytes; (content, content type)."""
    request = dict(request)
    if auth:
        transport.authorize(request, transport.access_token())
    try:
        return _read_capped(transport, method, url, request, limit=limit)
    except outbound.OutboundRefused as refused:
        # A download URL (from the platform's answer, or a redirect) to a refused address.
        raise destination_refused(refused) from None


def _read_capped(transport, method: str, url: str, request: dict, *, limit: int):
    with transport.client.stream(method, transport.url(url), **request) as response:
        if response.status_code >= 400:
            raise TransportError(
                f"download failed: HTTP {response.status_code}",
                retryable=response.status_code == 429 or response.status_code >= 500,
                status=response.status_code,
            )
        content_type = response.headers.get("Content-Type", "").split(";")[0].strip()
        declared = response.headers.get("Content-Length")
        if declared and declared.isdigit() and int(declared) > limit:
            raise AttachmentTooLarge(f"the file is {declared} bytes, over {limit}")
        chunks, total = [], 0
        for chunk in response.iter_bytes(CHUNK):
            total += len(chunk)
            if total > limit:
                raise AttachmentTooLarge(f"the file is over {limit} bytes")
            chunks.append(chunk)
    return b"".join(chunks), content_type
