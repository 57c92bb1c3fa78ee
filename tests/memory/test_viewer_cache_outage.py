"""The Memory Viewer's cache invalidation is best effort: Redis away fails no write.

Found by bench/cluster.py: a Redis restart while a run recorded its context made the run fail,
from the viewer's cache version bump in the run's bookkeeping.
"""

from __future__ import annotations

import pytest
import redis

from cadre.viewer import cache as viewer_cache


@pytest.mark.django_db
def test_a_cache_outage_does_not_fail_the_write_it_follows(monkeypatch, caplog):
    attempts = []

    def unreachable(*args, **kwargs):
        attempts.append(args[0])
        raise redis.exceptions.ConnectionError("Connection reset by peer")

    monkeypatch.setattr(viewer_cache.cache, "set", unreachable)

    viewer_cache.writes_changed(4242)  # raised ConnectionError before

    assert attempts == ["memory-viewer:v:4242"]
    assert "not renewed" in caplog.text
