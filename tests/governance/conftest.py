"""Governance fixtures: an empty anchor storage of the test's own."""

from __future__ import annotations

import pytest


@pytest.fixture
def anchor_dir(settings, tmp_path):
    """The signed audit digests of this test only: a fresh directory for the "audit_anchors"
    storage, and no digest log of an earlier release."""
    directory = tmp_path / "audit-anchors"
    settings.STORAGES = {
        **settings.STORAGES,
        "audit_anchors": {
            "BACKEND": "cadre.object_storage.WriteOnceFileSystemStorage",
            "OPTIONS": {"location": str(directory)},
        },
    }
    settings.AUDIT_DIGEST_LOG = tmp_path / "audit-digests.jsonl"
    return directory


def anchor_files(directory) -> list:
    """The digest objects under `directory`, oldest first."""
    return sorted(directory.glob("org-*/*/*.json"))
