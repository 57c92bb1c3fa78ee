"""Who pays for a model call: the account it is charged to and the meter that reserves and settles.

Every model call goes through `ModelProvider.chat`. When code runs under `charged_to(account)`
and a meter is registered (governance's budgets, in its AppConfig.ready), the call is
reserved before it is sent (a hard budget that the call could exceed refuses it with
`BudgetExceeded`, nothing reaches the model) and settled with its real usage after. A call
outside any account, or with no meter registered, is sent unmetered (a connection test).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any, Protocol

from cadre.ports import Registry


@dataclass(frozen=True)
class Account:
    """What a model call is charged to. Ids only: the kernel knows no tenancy rows."""

    organization_id: int
    member_id: int | None = None
    department_id: int | None = None
    template_id: int | None = None
    run_id: int | None = None
    # run, compaction, memory.extraction, memory.dedup, memory.feedback, skills.drafting, ...
    purpose: str = "run"


class Meter(Protocol):
    def reserve(self, account: Account, *, provider: Any, messages: list[dict], params: dict):
        """Reserve the call's estimated usage (raises BudgetExceeded); returns a handle."""

    def settle(self, handle: Any, result: Any) -> None:
        """Replace the reservation by the result's usage (None: the call failed, release)."""


METERS: Registry[Meter] = Registry("model call meters")

_current: ContextVar[Account | None] = ContextVar("cadre_model_account", default=None)


def current_account() -> Account | None:
    return _current.get()


@contextmanager
def charged_to(account: Account | None) -> Iterator[Account | None]:
    """Model calls inside the block are charged to `account` (None: unmetered)."""
    token = _current.set(account)
    try:
        yield account
    finally:
        _current.reset(token)


@contextmanager
def purpose(name: str) -> Iterator[Account | None]:
    """Calls inside the block are charged to the current account under purpose `name`."""
    account = _current.get()
    with charged_to(replace(account, purpose=name) if account is not None else None) as inner:
        yield inner


def meter() -> Meter | None:
    """The registered meter (one at most), if a call is being charged to an account."""
    if _current.get() is None:
        return None
    for _, entry in METERS.items():
        return entry
    return None
