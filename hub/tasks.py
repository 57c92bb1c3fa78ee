"""Hub background work: embedding a package for semantic search after `latest` changes, an
approved skill reaching the templates that taught it, and the periodic cleanup of expired
upload tickets (beat: `hub-upload-tickets-purge`)."""

from __future__ import annotations

from celery import shared_task

from hub import distribution, semantic, uploads
from hub.models import SkillPackage


@shared_task(
    name="hub.tasks.package_embed",
    autoretry_for=(ConnectionError, TimeoutError),
    retry_backoff=True,
    retry_jitter=True,
    max_retries=5,
)
def package_embed(package_id: int) -> bool:
    """Idempotent: re-embeds only when the package's text changed."""
    package = SkillPackage.objects.filter(pk=package_id).first()
    return semantic.package_embed(package) if package is not None else False


@shared_task(
    name="hub.tasks.approved_skill_reach",
    autoretry_for=(ConnectionError, TimeoutError),
    retry_backoff=True,
    retry_jitter=True,
    max_retries=5,
)
def approved_skill_reach(version_id: int) -> list[dict]:
    """Idempotent: a template that already runs the version is left as it is."""
    return distribution.approved_skill_reach(version_id=version_id)


@shared_task(name="hub.tasks.upload_tickets_purge", ignore_result=True)
def upload_tickets_purge() -> int:
    """Beat: delete expired (abandoned) upload tickets and their staged bytes; idempotent."""
    return uploads.upload_tickets_purge()
