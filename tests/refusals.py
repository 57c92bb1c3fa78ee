"""A refused request stores, starts and sends nothing: `nothing_changes` checks it in one line."""

from __future__ import annotations

from contextlib import contextmanager

from django.db.models import Model, QuerySet
from django.forms.models import model_to_dict
from django.test import TestCase

from cadre.governance.models import AuditEvent


def _label(watched) -> str:
    if isinstance(watched, QuerySet):
        return f"{watched.model.__name__} (filtered)"
    if isinstance(watched, Model):
        return f"{type(watched).__name__} #{watched.pk}"
    return watched.__name__


def _state(watched):
    """Row count of a model or queryset; all field values of one saved object."""
    if isinstance(watched, QuerySet):
        return watched.count()
    if isinstance(watched, Model):
        fresh = type(watched)._base_manager.filter(pk=watched.pk).first()
        return None if fresh is None else model_to_dict(fresh)
    return watched._base_manager.count()


@contextmanager
def nothing_changes(*watched, audit: bool = True, enqueued: bool = True):
    """Assert the block leaves `watched` as it found it.

    `watched` are models (their row counts), querysets (their counts) or saved objects (all
    their field values). The audit log is watched too unless `audit` is False (for refusals
    that are audited by design, which the test then asserts itself). Unless `enqueued` is
    False, the block must not queue work for after the commit either: that is how services
    start runs and tasks and send deliveries (`transaction.on_commit`).
    """
    watched = [*watched, *([AuditEvent] if audit else [])]
    before = [_state(item) for item in watched]
    with TestCase.captureOnCommitCallbacks(execute=False) as callbacks:
        yield
    changed = {
        _label(item): (old, new)
        for item, old, new in zip(watched, before, [_state(item) for item in watched], strict=True)
        if old != new
    }
    assert not changed, f"a refused request changed {changed}"
    if enqueued:
        assert not callbacks, (
            f"a refused request queued {[getattr(c, '__qualname__', repr(c)) for c in callbacks]}"
        )
