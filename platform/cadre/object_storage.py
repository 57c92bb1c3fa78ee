"""Object storage for what a request or a task needs on any machine: export bundles and the
signed audit digests ("anchors"), through Django's STORAGES ("exports", "audit_anchors").

With CADRE_S3_BUCKET set they are S3 objects (django-storages); without it, files under
CADRE_DATA_DIR, for a single machine (`make up`). The anchors' storage is write-once: a name
is written once and never overwritten or deleted by Cadre (on S3 a conditional PutObject,
`If-None-Match: *`, so two writers cannot both win), see docs/audit.md.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from django.conf import settings
from django.core.files.storage import FileSystemStorage, Storage


class AlreadyWritten(FileExistsError):
    """A write-once storage already holds an object of that name: nothing was written."""


class DataDirStorage(FileSystemStorage):
    """Files under settings.DATA_DIR, read at each use (so a changed DATA_DIR applies)."""

    @property
    def base_location(self):
        return str(settings.DATA_DIR)

    @property
    def location(self):
        return os.path.abspath(self.base_location)


class WriteOnceFileSystemStorage(FileSystemStorage):
    """Files written once: a taken name is refused (not renamed), nothing is deleted."""

    def __init__(self, **options):
        super().__init__(**{**options, "allow_overwrite": False})

    def get_available_name(self, name, max_length=None):
        if self.exists(name):
            raise AlreadyWritten(name)
        return name

    def delete(self, name):
        raise PermissionError(f"{name}: the audit anchors are write-once, never deleted")


try:
    from botocore.exceptions import ClientError
    from storages.backends.s3 import S3Storage
    from storages.utils import clean_name
except ImportError:  # pragma: no cover - django-storages[s3] is a main dependency
    S3Storage = None
else:

    class WriteOnceS3Storage(S3Storage):
        """Objects written once with a conditional PutObject (If-None-Match: *): S3 refuses
        the second write of a name, even from another machine at the same moment. A bucket
        with Object Lock applies its default retention to each new object."""

        file_overwrite = False

        def get_available_name(self, name, max_length=None):
            return clean_name(name)

        def _save(self, name, content):
            cleaned = clean_name(name)
            key = self._normalize_name(cleaned)
            params = self._get_write_parameters(key, content)
            content.seek(0)
            try:
                self.connection.meta.client.put_object(
                    Bucket=self.bucket_name, Key=key, Body=content.read(), IfNoneMatch="*", **params
                )
            except ClientError as error:
                code = error.response.get("Error", {}).get("Code")
                if code in ("PreconditionFailed", "ConditionalRequestConflict"):
                    raise AlreadyWritten(cleaned) from None
                raise
            return cleaned

        def delete(self, name):
            raise PermissionError(f"{name}: the audit anchors are write-once, never deleted")


def is_local(storage: Storage) -> bool:
    """True when the storage is one machine's disk (lost with it, unseen by the others)."""
    return isinstance(storage, FileSystemStorage)


def describe(storage: Storage) -> str:
    """Where a storage keeps its objects, for messages: a directory or s3://bucket/prefix."""
    if isinstance(storage, FileSystemStorage):
        return str(storage.location)
    bucket = getattr(storage, "bucket_name", None)
    if bucket:
        location = (getattr(storage, "location", "") or "").strip("/")
        return f"s3://{bucket}/{location + '/' if location else ''}"
    return type(storage).__name__


def iter_chunks(storage: Storage, name: str, chunk_size: int = 1 << 20) -> Iterator[bytes]:
    """An object's bytes in chunks, streamed: S3Storage.open would first copy the whole
    object into a temporary file on this machine."""
    if S3Storage is not None and isinstance(storage, S3Storage):
        key = storage._normalize_name(clean_name(name))
        body = storage.connection.meta.client.get_object(Bucket=storage.bucket_name, Key=key)
        yield from body["Body"].iter_chunks(chunk_size)
        return
    with storage.open(name, "rb") as handle:
        while chunk := handle.read(chunk_size):
            yield chunk
