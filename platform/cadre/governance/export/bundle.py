"""Writing a bundle: the files with their hashes, the signed manifest, the tar download."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import posixpath
import shutil
import tarfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from django.core.files import File
from django.core.files.storage import Storage, storages
from django.utils import timezone

from cadre import object_storage, signing
from cadre.governance import audit_digest
from cadre.governance.export.formats import FILE_NAMES, FORMATS, csv_line, json_line, ocsf_event
from cadre.governance.export.rows import COLUMNS, TextMasker, iso, masked
from cadre.governance.models import AuditChainHead

MANIFEST, SIGNATURE = "manifest.json", "manifest.sig"
DIGESTS = "digests.jsonl"
BUNDLE_FORMAT = "cadre-audit-export"
BLOCK_LINES = 1000  # block hashes pinpoint tampering in a file to a 1,000-line block
PROGRESS_EVERY = 20_000


class HashedWriter:
    """Writes lines to a file while keeping its SHA-256, line count and 1,000-line block hashes."""

    def __init__(self, path: Path, name: str, fmt: str):
        self.name, self.format = name, fmt
        self.handle = open(path, "wb", buffering=1 << 20)  # noqa: SIM115 - closed in close()
        self.sha = hashlib.sha256()
        self.block = hashlib.sha256()
        self.blocks: list[str] = []
        self.lines = 0
        self.size = 0

    def write(self, data: bytes) -> None:
        self.handle.write(data)
        self.sha.update(data)
        self.block.update(data)
        self.size += len(data)
        self.lines += 1
        if self.lines % BLOCK_LINES == 0:
            self.blocks.append(self.block.hexdigest())
            self.block = hashlib.sha256()

    def close(self) -> dict:
        self.handle.close()
        if self.lines % BLOCK_LINES:
            self.blocks.append(self.block.hexdigest())
        return {
            "name": self.name,
            "format": self.format,
            "lines": self.lines,
            "bytes": self.size,
            "sha256": self.sha.hexdigest(),
            "block_lines": BLOCK_LINES,
            "block_sha256": self.blocks,
        }


@dataclass
class BundleResult:
    rows: int
    manifest: dict
    directory: Path


def write_bundle(
    directory: Path,
    rows: Iterable[dict],
    *,
    formats: Iterable[str],
    organization,
    mask: bool = True,
    description: dict | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> BundleResult:
    """Write the files, the manifest and its signature into `directory` (created)."""
    formats = [fmt for fmt in FORMATS if fmt in set(formats)]
    directory.mkdir(parents=True, exist_ok=True)
    writers: dict[str, HashedWriter] = {}
    if "csv" in formats:
        writers["csv"] = HashedWriter(directory / FILE_NAMES["csv"], FILE_NAMES["csv"], "csv")
        writers["csv"].write(",".join(COLUMNS).encode() + b"\n")
        writers["csv"].lines = 0  # the header is not a row
        writers["csv"].block = hashlib.sha256(b",".join(c.encode() for c in COLUMNS) + b"\n")
    for fmt in ("jsonl", "ocsf"):
        if fmt in formats:
            writers[fmt] = HashedWriter(directory / FILE_NAMES[fmt], FILE_NAMES[fmt], fmt)
    masker = TextMasker(organization) if mask else None
    count, first, last = 0, None, None
    contiguous = True
    try:
        for row in rows:
            if first is None:
                first = row
            elif row["sequence"] != last["sequence"] + 1:
                contiguous = False
            last = row
            out = masked(row, masker) if masker is not None else row
            if "jsonl" in writers:
                writers["jsonl"].write(json_line(out))
            if "csv" in writers:
                writers["csv"].write(csv_line(out))
            if "ocsf" in writers:
                writers["ocsf"].write(json_line(ocsf_event(out)))
            count += 1
            if on_progress is not None and count % PROGRESS_EVERY == 0:
                on_progress(count)
    finally:
        files = [writers[fmt].close() for fmt in formats]
    files.append(_write_digests(directory, organization))
    head = AuditChainHead.objects.filter(organization=organization).first()
    manifest = {
        "format": BUNDLE_FORMAT,
        "version": 1,
        "generated_at": iso(timezone.now()),
        "organization": {"id": organization.pk, "slug": organization.slug},
        **(description or {}),
        "masked": mask,
        "rows": count,
        "chain": {
            "first": (
                {
                    "sequence": first["sequence"],
                    "prev_hash": first["prev_hash"],
                    "hash": first["hash"],
                }
                if first
                else None
            ),
            "last": {"sequence": last["sequence"], "hash": last["hash"]} if last else None,
            "contiguous": contiguous,
            "head_at_export": (
                {"sequence": head.sequence, "hash": head.hash} if head is not None else None
            ),
        },
        "files": files,
        "signing": {
            "algorithm": "Ed25519",
            "key_id": signing.key_id(),
            "public_key_pem": signing.public_key_pem(),
        },
    }
    data = json.dumps(manifest, ensure_ascii=False, indent=2, sort_keys=True).encode("utf-8")
    (directory / MANIFEST).write_bytes(data)
    (directory / SIGNATURE).write_text(signing.sign(data) + "\n", encoding="ascii")
    if on_progress is not None:
        on_progress(count)
    return BundleResult(rows=count, manifest=manifest, directory=directory)


def _write_digests(directory: Path, organization) -> dict:
    """The organization's signed chain-head digests, one per line: a verifier checks
    the exported rows against them (a chain rewritten after a digest no longer matches it)."""
    writer = HashedWriter(directory / DIGESTS, DIGESTS, "digests")
    try:
        for _where, text in audit_digest.read_lines(organization.pk):
            writer.write(text.encode("utf-8") + b"\n")
    finally:
        entry = writer.close()
    return entry


@dataclass
class StoredBundle:
    """A finished bundle in the "exports" storage: its files are objects under `key`/."""

    key: str  # exports/<organization>/<export id>
    storage: Storage

    @property
    def name(self) -> str:
        return posixpath.basename(self.key)

    def files(self) -> list[str]:
        try:
            _dirs, names = self.storage.listdir(self.key)
        except FileNotFoundError:
            return []
        return sorted(names)

    def exists(self) -> bool:
        return self.storage.exists(f"{self.key}/{MANIFEST}")


def exports_storage() -> Storage:
    return storages["exports"]


def store_bundle(directory: Path, key: str) -> StoredBundle:
    """Copy a bundle written in a local directory to the "exports" storage under `key`, then
    remove the directory: the bundle is read from the storage on whichever machine serves the
    download. The manifest goes last, so a bundle with one is whole."""
    bundle = StoredBundle(key=key, storage=exports_storage())
    remove_bundle(bundle)  # a previous attempt's objects, if a worker died mid-copy
    paths = sorted(p for p in directory.iterdir() if p.is_file())
    paths.sort(key=lambda path: path.name == MANIFEST)
    try:
        for path in paths:
            with open(path, "rb") as handle:
                bundle.storage.save(f"{key}/{path.name}", File(handle, name=path.name))
    except BaseException:
        remove_bundle(bundle)
        raise
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return bundle


def tar_stream(bundle: StoredBundle, *, chunk_size: int = 1 << 20) -> Iterator[bytes]:
    """The bundle's files as an uncompressed tar, generated on the fly (for the download):
    each file's header, its bytes streamed from the storage, padding — no copy on disk."""
    for file_name in bundle.files():
        name = f"{bundle.key}/{file_name}"
        size = bundle.storage.size(name)
        info = tarfile.TarInfo(f"{bundle.name}/{file_name}")
        info.size, info.mode = size, 0o644
        info.mtime = int(bundle.storage.get_modified_time(name).timestamp())
        yield info.tobuf(format=tarfile.PAX_FORMAT)
        yield from object_storage.iter_chunks(bundle.storage, name, chunk_size)
        if size % tarfile.BLOCKSIZE:
            yield b"\0" * (tarfile.BLOCKSIZE - size % tarfile.BLOCKSIZE)
    yield b"\0" * (2 * tarfile.BLOCKSIZE)


def tar_bundle(bundle: StoredBundle, target: Path) -> Path:
    """Write the streamed tar to a file (offline copies, tests)."""
    with open(target, "wb") as handle:
        for chunk in tar_stream(bundle):
            handle.write(chunk)
    return target


def remove_bundle(bundle: StoredBundle) -> None:
    """Delete the bundle's objects from the storage (and its emptied folder on a disk)."""
    for file_name in bundle.files():
        bundle.storage.delete(f"{bundle.key}/{file_name}")
    if object_storage.is_local(bundle.storage):
        with contextlib.suppress(OSError):
            os.rmdir(bundle.storage.path(bundle.key))
