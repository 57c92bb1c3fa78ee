"""Safe skill bundles: read a zip or tar.gz upload into memory under strict limits.

Nothing from an upload touches the disk while it is checked: members are read with bounded
reads, so zip-slip, absolute paths, links, devices, duplicate paths and decompression bombs
are refused with a clear `UnsafeBundle` error before any file is written. `Bundle.extract()`
then writes the already-checked files under a directory the caller owns (a temp dir).

The fingerprint is ClawHub's: SHA-256 of the `path:sha256` lines sorted as JavaScript's
`localeCompare` sorts them (ICU root collation), joined with `\\n`; dot-paths are skipped.
"""

from __future__ import annotations

import hashlib
import io
import mimetypes
import os
import stat
import tarfile
import tempfile
import unicodedata
import zipfile
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from django.utils.translation import gettext

from cadre.errors import InvalidInput

MiB = 1024 * 1024


@dataclass(frozen=True)
class BundleLimits:
    max_files: int = 256
    max_file_bytes: int = 1 * MiB
    max_total_bytes: int = 8 * MiB
    max_archive_bytes: int = 10 * MiB
    # A member expanding more than this many times its compressed size is a bomb.
    max_ratio: int = 200
    max_path_length: int = 255
    max_depth: int = 12


LIMITS = BundleLimits()


class UnsafeBundle(InvalidInput):
    """A bundle refused for safety or size; `details` says which member and why."""

    code = "unsafe_bundle"


def _refuse(message: str, *, reason: str, path: str | None = None) -> UnsafeBundle:
    details: dict = {"reason": reason}
    if path is not None:
        details["path"] = path
    return UnsafeBundle(message, details=details)


@dataclass(frozen=True)
class BundleFile:
    path: str
    content: bytes = field(repr=False)

    @property
    def size(self) -> int:
        return len(self.content)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.content).hexdigest()

    @property
    def content_type(self) -> str:
        return content_type_for(self.path)


@dataclass
class Bundle:
    files: list[BundleFile]
    folder_name: str | None = None  # the single top folder the archive wrapped its files in
    ignored: list[str] = field(default_factory=list)  # dot-paths and OS junk left out

    def __post_init__(self) -> None:
        self.files = sorted(self.files, key=lambda item: collation_key(item.path))

    @property
    def total_bytes(self) -> int:
        return sum(item.size for item in self.files)

    @property
    def fingerprint(self) -> str:
        return fingerprint((item.path, item.sha256) for item in self.files)

    def get(self, path: str) -> BundleFile | None:
        return next((item for item in self.files if item.path == path), None)

    def extract(self, target: str | os.PathLike) -> Path:
        """Write the files under `target` (which must exist); never outside it."""
        root = Path(target).resolve()
        for item in self.files:
            destination = (root / item.path).resolve()
            if not destination.is_relative_to(root):  # checked on read; kept as a last guard
                raise _refuse(
                    gettext("A path escapes the bundle."), reason="path_escape", path=item.path
                )
            destination.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(destination, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            with os.fdopen(fd, "wb") as handle:
                handle.write(item.content)
        return root


@contextmanager
def extracted(bundle: Bundle, folder_name: str | None = None) -> Iterator[Path]:
    """The bundle written into a fresh temp dir (inside a folder named like the skill)."""
    with tempfile.TemporaryDirectory(prefix="cadre-skill-") as temp:
        folder = Path(temp) / (folder_name or bundle.folder_name or "skill")
        folder.mkdir()
        yield bundle.extract(folder)


# --- content types and fingerprint ------------------------------------------------------

_TEXT_TYPES = {
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".txt": "text/plain",
    ".py": "text/x-python",
    ".sh": "application/x-sh",
    ".js": "text/javascript",
    ".ts": "text/typescript",
    ".json": "application/json",
    ".yaml": "text/yaml",
    ".yml": "text/yaml",
    ".toml": "application/toml",
    ".csv": "text/csv",
    ".html": "text/html",
    ".svg": "image/svg+xml",
}


def content_type_for(path: str) -> str:
    suffix = PurePosixPath(path).suffix.lower()
    if suffix in _TEXT_TYPES:
        return _TEXT_TYPES[suffix]
    guessed, _ = mimetypes.guess_type(path, strict=False)
    return guessed or "application/octet-stream"


# ICU root collation order of printable ASCII (what JavaScript's localeCompare uses).
_ICU_ASCII = " _-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$0123456789abcdefghijklmnopqrstuvwxyz"
_PRIMARY = {char: index for index, char in enumerate(_ICU_ASCII)}


def collation_key(text: str) -> tuple:
    """Sort key matching `a.localeCompare(b)` for ASCII paths (primary, then case)."""
    primary = tuple(_PRIMARY.get(char.lower(), 1000 + ord(char.lower())) for char in text)
    tertiary = tuple(1 if char.isupper() else 0 for char in text)
    return (primary, tertiary)


def has_dot_segment(path: str) -> bool:
    return any(part.startswith(".") for part in path.split("/"))


def fingerprint(entries: Iterable[tuple[str, str]]) -> str:
    """SHA-256 over `path:sha256` lines sorted like ClawHub sorts them; dot-paths skipped."""
    lines = sorted(
        (
            (path, digest)
            for path, digest in entries
            if path and digest and not has_dot_segment(path)
        ),
        key=lambda entry: collation_key(entry[0]),
    )
    payload = "\n".join(f"{path}:{digest}" for path, digest in lines)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


# --- paths ------------------------------------------------------------------------------


def safe_path(raw: str, limits: BundleLimits = LIMITS) -> str:
    """The member's relative POSIX path, or UnsafeBundle (absolute, traversal, odd bytes)."""
    try:
        raw.encode("utf-8")
    except UnicodeEncodeError:
        # tarfile decodes a name that is not UTF-8 to lone surrogates (surrogateescape), and a
        # JSON path may spell one: no fingerprint, column or JSON answer can hold such a name.
        shown = raw[:200].encode("utf-8", "backslashreplace").decode("utf-8")
        raise _refuse(
            gettext("'%(shown)s' is not a valid UTF-8 name.") % {"shown": shown},
            reason="bad_name",
            path=shown,
        ) from None
    shown = raw[:200]
    if "\x00" in raw or any(unicodedata.category(char) == "Cc" for char in raw):
        raise _refuse(
            gettext("'%(shown)r' has control characters in its name.") % {"shown": shown},
            reason="bad_name",
            path=shown,
        )
    if "\\" in raw:
        raise _refuse(
            gettext("'%(shown)s' uses backslashes; bundle paths use '/'.") % {"shown": shown},
            reason="bad_name",
            path=shown,
        )
    if raw.startswith("/") or (len(raw) > 1 and raw[1] == ":"):
        raise _refuse(
            gettext("'%(shown)s' is an absolute path.") % {"shown": shown},
            reason="absolute_path",
            path=shown,
        )
    parts = [part for part in raw.split("/") if part not in ("", ".")]
    if any(part == ".." for part in parts):
        raise _refuse(
            gettext("'%(shown)s' climbs out of the bundle with '..' (zip-slip).")
            % {"shown": shown},
            reason="path_traversal",
            path=shown,
        )
    path = "/".join(parts)
    if not path:
        raise _refuse(gettext("A member has an empty name."), reason="bad_name", path=shown)
    if len(path) > limits.max_path_length:
        raise _refuse(
            gettext("'%(shown)s' is longer than %(max_path_length)s characters.")
            % {"shown": shown, "max_path_length": limits.max_path_length},
            reason="path_too_long",
            path=shown,
        )
    if len(parts) > limits.max_depth:
        raise _refuse(
            gettext("'%(shown)s' is nested deeper than %(max_depth)s folders.")
            % {"shown": shown, "max_depth": limits.max_depth},
            reason="path_too_deep",
            path=shown,
        )
    return unicodedata.normalize("NFC", path)


def _is_junk(path: str) -> bool:
    return path.split("/")[0] == "__MACOSX" or has_dot_segment(path)


# --- reading ----------------------------------------------------------------------------


class _Collector:
    """Accumulates members, enforcing counts, sizes and path uniqueness."""

    def __init__(self, limits: BundleLimits):
        self.limits = limits
        self.files: dict[str, BundleFile] = {}
        self.folded: dict[str, str] = {}
        self.ignored: list[str] = []
        self.total = 0

    def check_declared(self, path: str, size: int) -> None:
        if size > self.limits.max_file_bytes:
            raise _refuse(
                gettext("'%(path)s' is %(size)s bytes; the limit per file is %(max_file_bytes)s.")
                % {"path": path, "size": size, "max_file_bytes": self.limits.max_file_bytes},
                reason="file_too_large",
                path=path,
            )
        if self.total + size > self.limits.max_total_bytes:
            raise _refuse(
                gettext("The bundle unpacks to more than %(max_total_bytes)s bytes.")
                % {"max_total_bytes": self.limits.max_total_bytes},
                reason="bundle_too_large",
                path=path,
            )

    def add(self, path: str, content: bytes) -> None:
        if _is_junk(path):
            self.ignored.append(path)
            return
        if path in self.files:
            raise _refuse(
                gettext("'%(path)s' appears twice in the bundle.") % {"path": path},
                reason="duplicate_path",
                path=path,
            )
        folded = path.casefold()
        if folded in self.folded:
            raise _refuse(
                gettext("'%(path)s' and '%(folded)s' differ only in case.")
                % {"path": path, "folded": self.folded[folded]},
                reason="duplicate_path",
                path=path,
            )
        if len(self.files) >= self.limits.max_files:
            raise _refuse(
                gettext("The bundle has more than %(max_files)s files.")
                % {"max_files": self.limits.max_files},
                reason="too_many_files",
            )
        self.check_declared(path, len(content))
        self.total += len(content)
        self.folded[folded] = path
        self.files[path] = BundleFile(path=path, content=content)


def _read_zip(data: bytes, limits: BundleLimits) -> _Collector:
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        infos = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError) as error:
        raise _refuse(
            gettext("The zip file cannot be read: %(error)s.") % {"error": error},
            reason="corrupt_archive",
        ) from None
    if len(infos) > limits.max_files * 2:
        raise _refuse(
            gettext("The bundle has more than %(max_files)s files.")
            % {"max_files": limits.max_files},
            reason="too_many_files",
        )
    collector = _Collector(limits)
    for info in infos:
        path = safe_path(info.filename, limits)
        mode = info.external_attr >> 16
        kind = stat.S_IFMT(mode) if info.create_system == 3 else 0
        if kind == stat.S_IFLNK:
            raise _refuse(
                gettext("'%(path)s' is a symbolic link.") % {"path": path},
                reason="symlink",
                path=path,
            )
        if kind and kind not in (stat.S_IFREG, stat.S_IFDIR):
            raise _refuse(
                gettext("'%(path)s' is not a regular file.") % {"path": path},
                reason="special_file",
                path=path,
            )
        if info.is_dir():
            continue
        if info.flag_bits & 0x1:
            raise _refuse(
                gettext("'%(path)s' is encrypted.") % {"path": path}, reason="encrypted", path=path
            )
        collector.check_declared(path, info.file_size)
        if info.file_size > 64 * 1024 and info.file_size > limits.max_ratio * max(
            info.compress_size, 1
        ):
            raise _refuse(
                gettext("'%(path)s' expands %(value)s times (a zip bomb?).")
                % {"path": path, "value": info.file_size // max(info.compress_size, 1)},
                reason="compression_ratio",
                path=path,
            )
        try:
            with archive.open(info) as member:
                content = member.read(limits.max_file_bytes + 1)
                extra = member.read(1)
        except (zipfile.BadZipFile, NotImplementedError, zlib.error, EOFError, ValueError) as error:
            raise _refuse(
                gettext("'%(path)s' cannot be read: %(error)s.") % {"path": path, "error": error},
                reason="corrupt_archive",
                path=path,
            ) from None
        if len(content) != info.file_size or extra:
            raise _refuse(
                gettext("'%(path)s' declares %(file_size)s bytes but holds more or less.")
                % {"path": path, "file_size": info.file_size},
                reason="size_mismatch",
                path=path,
            )
        collector.add(path, content)
    return collector


def _gunzip(data: bytes, limits: BundleLimits) -> bytes:
    # Headers add 512 bytes per member (two for long names) plus the end blocks and padding.
    cap = limits.max_total_bytes + (limits.max_files * 2 + 32) * 1536 + 20 * 1024
    decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = decompressor.decompress(data, cap + 1)
    except zlib.error as error:
        raise _refuse(
            gettext("The gzip stream cannot be read: %(error)s.") % {"error": error},
            reason="corrupt_archive",
        ) from None
    if len(out) > cap or decompressor.unconsumed_tail:
        raise _refuse(
            gettext("The archive unpacks to more than %(cap)s bytes (a decompression bomb?).")
            % {"cap": cap},
            reason="compression_ratio",
        )
    if not decompressor.eof:
        raise _refuse(gettext("The gzip stream is truncated."), reason="corrupt_archive")
    return out


def _read_tar(data: bytes, limits: BundleLimits) -> _Collector:
    raw = _gunzip(data, limits) if data[:2] == b"\x1f\x8b" else data
    try:
        with tarfile.open(fileobj=io.BytesIO(raw), mode="r:") as archive:
            return _collect_tar(archive, limits)
    except (tarfile.TarError, EOFError) as error:
        raise _refuse(
            gettext("The tar archive cannot be read: %(error)s.") % {"error": error},
            reason="corrupt_archive",
        ) from None


def _collect_tar(archive: tarfile.TarFile, limits: BundleLimits) -> _Collector:
    members = archive.getmembers()
    if len(members) > limits.max_files * 2:
        raise _refuse(
            gettext("The bundle has more than %(max_files)s files.")
            % {"max_files": limits.max_files},
            reason="too_many_files",
        )
    collector = _Collector(limits)
    for member in members:
        path = safe_path(member.name, limits)
        if member.issym():
            raise _refuse(
                gettext("'%(path)s' is a symbolic link.") % {"path": path},
                reason="symlink",
                path=path,
            )
        if member.islnk():
            raise _refuse(
                gettext("'%(path)s' is a hard link.") % {"path": path}, reason="hardlink", path=path
            )
        if member.isdir():
            continue
        if not member.isreg():
            raise _refuse(
                gettext("'%(path)s' is a device, FIFO or other special file.") % {"path": path},
                reason="special_file",
                path=path,
            )
        collector.check_declared(path, member.size)
        handle = archive.extractfile(member)
        content = handle.read() if handle is not None else b""
        if len(content) != member.size:
            raise _refuse(
                gettext("'%(path)s' is truncated.") % {"path": path},
                reason="corrupt_archive",
                path=path,
            )
        collector.add(path, content)
    return collector


def _strip_single_folder(files: dict[str, BundleFile]) -> tuple[dict[str, BundleFile], str | None]:
    """`my-skill/SKILL.md, my-skill/x` → `SKILL.md, x` with folder name `my-skill`."""
    if not files or "SKILL.md" in files:
        return files, None
    tops = {path.split("/", 1)[0] for path in files}
    if len(tops) != 1 or any("/" not in path for path in files):
        return files, None
    top = tops.pop()
    stripped = {
        path.split("/", 1)[1]: BundleFile(path=path.split("/", 1)[1], content=item.content)
        for path, item in files.items()
    }
    return stripped, top


def detect_format(data: bytes) -> str:
    if data[:4] in (b"PK\x03\x04", b"PK\x05\x06"):
        return "zip"
    if data[:2] == b"\x1f\x8b":
        return "tar.gz"
    if len(data) >= 262 and data[257:262] == b"ustar":
        return "tar"
    raise _refuse(
        gettext("The upload is not a zip or tar.gz archive."), reason="unsupported_format"
    )


def read_bundle(data: bytes, *, limits: BundleLimits = LIMITS) -> Bundle:
    """Check and read an uploaded archive; raises UnsafeBundle with the reason."""
    if len(data) > limits.max_archive_bytes:
        raise _refuse(
            gettext("The archive is %(data)s bytes; the limit is %(max_archive_bytes)s.")
            % {"data": len(data), "max_archive_bytes": limits.max_archive_bytes},
            reason="archive_too_large",
        )
    kind = detect_format(data)
    collector = _read_zip(data, limits) if kind == "zip" else _read_tar(data, limits)
    files, folder = _strip_single_folder(collector.files)
    if not files:
        raise _refuse(gettext("The bundle has no files."), reason="empty")
    return Bundle(files=list(files.values()), folder_name=folder, ignored=collector.ignored)


def bundle_from_files(
    files: dict[str, bytes], *, folder_name: str | None = None, limits: BundleLimits = LIMITS
) -> Bundle:
    """A bundle from path → bytes (uploads through ClawHub's per-file publish flow)."""
    collector = _Collector(limits)
    for raw, content in files.items():
        collector.add(safe_path(raw, limits), content)
    if not collector.files:
        raise _refuse(gettext("The bundle has no files."), reason="empty")
    return Bundle(
        files=list(collector.files.values()), folder_name=folder_name, ignored=collector.ignored
    )


def bundle_from_directory(root: str | os.PathLike, *, limits: BundleLimits = LIMITS) -> Bundle:
    """A bundle from a skill folder on disk (the CLI); symlinks are refused, not followed."""
    base = Path(root)
    files: dict[str, bytes] = {}
    for current, directories, names in os.walk(base, followlinks=False):
        directories[:] = sorted(d for d in directories if d not in (".git", "node_modules"))
        for name in sorted(names + [d for d in directories if (Path(current) / d).is_symlink()]):
            full = Path(current) / name
            relative = full.relative_to(base).as_posix()
            if full.is_symlink():
                raise _refuse(
                    gettext("'%(relative)s' is a symbolic link.") % {"relative": relative},
                    reason="symlink",
                    path=relative,
                )
            if not full.is_file():
                raise _refuse(
                    gettext("'%(relative)s' is not a regular file.") % {"relative": relative},
                    reason="special_file",
                    path=relative,
                )
            if full.stat().st_size > limits.max_file_bytes:
                raise _refuse(
                    gettext(
                        "'%(relative)s' is %(st_size)s bytes; "
                        "the limit per file is %(max_file_bytes)s."
                    )
                    % {
                        "relative": relative,
                        "st_size": full.stat().st_size,
                        "max_file_bytes": limits.max_file_bytes,
                    },
                    reason="file_too_large",
                    path=relative,
                )
            files[relative] = full.read_bytes()
    return bundle_from_files(files, folder_name=base.resolve().name, limits=limits)


def write_zip(bundle: Bundle) -> bytes:
    """A deterministic ZIP with relative paths at its root (what ClawHub's download gives)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for item in bundle.files:
            info = zipfile.ZipInfo(item.path, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = (stat.S_IFREG | 0o644) << 16
            info.create_system = 3
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, item.content)
    return buffer.getvalue()
