"""A short-lived cache of the viewer's figures per organization, actor and request, its key
versioned by the organization's memory writes so a write shows on the next request."""

from __future__ import annotations

import hashlib
import json
import logging
import uuid

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.db.models.signals import post_delete, post_save
from django.utils import translation

from cadre.memory.models import ContextRecord, Memory, MemoryMap

logger = logging.getLogger(__name__)

PREFIX = "memory-viewer"
VERSION_SECONDS = 24 * 3600


def _version_key(organization_id: int) -> str:
    return f"{PREFIX}:v:{organization_id}"


def _seconds() -> int:
    return int(getattr(settings, "MEMORY_VIEWER_CACHE_SECONDS", 30))


def data_version(organization_id: int) -> str:
    """The organization's current memory-data version (a new one after every write)."""
    key = _version_key(organization_id)
    version = cache.get(key)
    if version is None:
        version = uuid.uuid4().hex
        # Outlives entries by far (an expired version would start every entry anew); entries
        # carry the organization's creation time, so a recreated database reusing the id
        # never meets them.
        if not cache.add(key, version, VERSION_SECONDS):
            version = cache.get(key) or version
    return version


def writes_changed(organization_id: int) -> None:
    """The organization's cached figures are no longer served."""
    key = _version_key(organization_id)

    def renew():
        # A cache must not fail the write it follows (a run's bookkeeping, a memory write):
        # with Redis briefly away the figures stay cached one lifetime at most.
        try:
            cache.set(key, uuid.uuid4().hex, VERSION_SECONDS)
        except Exception:
            logger.warning(
                "memory viewer cache of organization %s not renewed", organization_id, exc_info=True
            )

    # Now, so this transaction's own next read computes; and after the commit, so what a
    # concurrent request cached meanwhile (before the write was visible) is not served.
    renew()
    transaction.on_commit(renew)


def cached(actor, name: str, params: dict, compute):
    """`compute()`'s result for this actor (kind, id and permissions: what it may read) and
    these parameters, computed at most once per version and lifetime."""
    seconds = _seconds()
    if seconds <= 0 or actor.organization is None:
        return compute()
    organization = actor.organization
    who = [actor.kind, actor.actor_id, sorted(actor.permissions)]
    # The organization's creation time as well as its id: a recreated (test) database reuses
    # ids, and must never be served another database's cached figures.
    where = [organization.pk, organization.created_at.timestamp()]
    # Figures carry words (names, definitions, notes) in the reader's language.
    where.append(translation.get_language() or "")
    digest = hashlib.sha256(
        json.dumps([name, where, who, params], sort_keys=True, default=str).encode()
    ).hexdigest()
    key = f"{PREFIX}:{data_version(organization.pk)}:{digest}"
    result = cache.get(key)
    if result is None:
        result = compute()
        cache.set(key, result, seconds)
    return result


def _changed(sender, instance, **kwargs) -> None:
    writes_changed(instance.organization_id)


def run_rated(*, run, **kwargs) -> None:
    """A rated run changes the quality figures (the recall hit rate counts ratings)."""
    writes_changed(run.organization_id)


def connect_signals() -> None:
    """Saves and deletes of memories (every version comes with its memory's save), context
    records (their items are bulk-created with them) and maps bump the version. Other bulk
    writes (`update`) send no signal: they call `writes_changed` or stay stale one lifetime."""
    for model in (Memory, ContextRecord, MemoryMap):
        post_save.connect(_changed, sender=model, dispatch_uid=f"viewer-cache-{model.__name__}")
        post_delete.connect(_changed, sender=model, dispatch_uid=f"viewer-cache-d{model.__name__}")
