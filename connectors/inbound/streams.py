"""Long-connection (stream) workers: which connectors need one, and how one is run.

A platform that can deliver events over an outbound connection instead of HTTP callbacks, for
installs without a public URL, names the module that holds it (`Platform.stream_module`:
Feishu/Lark's long connection, DingTalk's Stream mode). Each such connector needs one process
holding its connection: `python manage.py connectors_stream <public id>`, which `cadre up`
starts and supervises for every connector `stream_workers()` lists.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from connectors.base import registry
from connectors.models import Connector

# `settings.mode` values that mean "no HTTP callbacks: hold a connection" (Feishu's console
# calls it a long connection, DingTalk's Stream mode).
STREAM_MODES = ("stream", "long_connection")


@dataclass(frozen=True)
class StreamWorker:
    """One connector that needs a long-connection process."""

    public_id: str
    name: str
    platform: str
    # Changes when the connector's settings or credentials change: the process must restart.
    fingerprint: str
    # Empty when the worker can run; else why not (the SDK extra is missing) and the fix.
    problem: str = ""
    fix: str = ""


def stream_platforms() -> list[str]:
    """The platforms that can hold a long connection (their `stream_module`)."""
    return [name for name, platform in registry().items() if platform.stream_module]


def uses_stream(connector: Connector) -> bool:
    """Does this connector receive its events over a long connection?"""
    return (
        connector.platform in stream_platforms()
        and (connector.settings or {}).get("mode") in STREAM_MODES
    )


def _fingerprint(connector: Connector) -> str:
    # Every settings change and credential rotation moves these (the services set them);
    # the secrets themselves stay out of it.
    parts = (
        connector.updated_at.isoformat() if connector.updated_at else "",
        connector.credentials_rotated_at.isoformat() if connector.credentials_rotated_at else "",
    )
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def stream_workers() -> list[StreamWorker]:
    """Every active connector in stream mode, in every organization (one process each)."""
    platforms = registry()
    workers = []
    connectors = Connector.objects.filter(
        status=Connector.Status.ACTIVE, platform__in=stream_platforms()
    ).order_by("pk")
    for connector in connectors:
        if not uses_stream(connector):
            continue
        platform = platforms[connector.platform]
        problem = fix = ""
        if not platform.extra_installed():
            problem = f"{platform.label} stream mode needs the {platform.extra_module} package"
            fix = f"pip install 'cadre[{platform.extra}]'"
        workers.append(
            StreamWorker(
                public_id=connector.public_id,
                name=connector.name,
                platform=connector.platform,
                fingerprint=_fingerprint(connector),
                problem=problem,
                fix=fix,
            )
        )
    return workers
