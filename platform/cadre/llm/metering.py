"""Who pays for a model call: the account it is charged to and the meter that reserves and settles.

Every model call goes through `ModelProvider.chat`, and every call names what it is charged to:
code runs it under `charged_to(account)` (an organization and a purpose, and the member,
department, template or run where there is one). A call with no account is refused
(`UnchargedModelCall`) before anything is sent, and so is a call made inside a database
transaction (`ModelCallInTransaction`): a model call takes seconds, and a transaction held
open meanwhile holds its locks and its pooled connection. With a meter registered
(governance's budgets, in its AppConfig.ready) the call is reserved before it is sent (a hard
budget that the call could exceed refuses it with `BudgetExceeded`, nothing reaches the model)
and settled with its real usage after. Only a provider's connection test (cadre.llm.probe)
sends without an account, and `uncharged()` lets the adapters' own tests do so.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any, Protocol

from django.db import connection

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


class UnchargedModelCall(RuntimeError):
    """A model call names no account: run it under `charged_to(Account(...))`."""


class ModelCallInTransaction(RuntimeError):
    """A model call inside a database transaction: ask the model first, then write."""


_uncharged: ContextVar[bool] = ContextVar("cadre_model_uncharged", default=False)


@contextmanager
def uncharged() -> Iterator[None]:
    """Calls inside the block may name no account (sent unmetered): the adapters' own tests.
    Product code never uses it (tests/governance/test_model_calls_metered.py)."""
    token = _uncharged.set(True)
    try:
        yield
    finally:
        _uncharged.reset(token)


def in_transaction() -> bool:
    """Whether the default database connection is inside a transaction this code opened (the
    ones a test case wraps every test in do not count: Django's own durable check skips them
    the same way)."""
    return connection.in_atomic_block and any(
        not getattr(block, "_from_testcase", False) for block in connection.atomic_blocks
    )


def check_call() -> Account | None:
    """The account of the call about to be sent; refuses a call with none or in a transaction."""
    if in_transaction():
        raise ModelCallInTransaction(
            "a model call inside a database transaction: call the model before (or after) "
            "the transaction that stores its result"
        )
    account = _current.get()
    if account is None and not _uncharged.get():
        raise UnchargedModelCall(
            "a model call that names no account: run it under "
            "cadre.llm.metering.charged_to(Account(organization_id=..., purpose=...))"
        )
    return account


def meter() -> Meter | None:
    """The registered meter (one at most), if a call is being charged to an account."""
    if _current.get() is None:
        return None
    for _, entry in METERS.items():
        return entry
    return None
