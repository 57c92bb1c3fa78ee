"""Tenancy background work: SAML identity providers' metadata refreshed from their URLs."""

from __future__ import annotations

from celery import shared_task

from cadre.tenancy.services import saml


@shared_task(autoretry_for=(ConnectionError,), retry_backoff=True, retry_jitter=True)
def saml_metadata_refresh() -> int:
    """Beat: read each SAML IdP's metadata again from its URL (new signing certificates and
    endpoints); metadata that is refused stores nothing. How many providers changed."""
    return saml.metadata_refresh_all()
