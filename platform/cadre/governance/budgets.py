"""Usage accounting and budgets: every metered model call is reserved, then settled.

The meter (registered on `cadre.llm.metering.METERS` in GovernanceConfig.ready) is the one
place model calls are counted — the agents' runs, their compaction, memory's extraction, dedup
judge and feedback all call `ModelProvider.chat` under `charged_to(account)`.

Exact enforcement under concurrency (see docs/budgets.md):

1. **reserve** (one transaction): lock the budgets that apply to the call's account
   (`SELECT … FOR UPDATE`, in primary-key order so two calls never deadlock), roll a budget
   into its current period if the period changed, and refuse the call if, for any hard budget,
   `used + reserved + estimate > limit`. Otherwise add the estimate to every budget's
   `reserved` and write the call's UsageRecord (`reserved`). The call is sent after commit.
2. **settle** (one transaction): lock the same budgets, move the record's reservation from
   `reserved` to its real usage in `used`, mark the record `settled` (or `released` when the
   call failed), and raise the 80 % / 100 % alerts once per period.

Because admission and the reservation happen under the same row locks, two concurrent calls
never both take the last headroom; a budget is passed only by what calls in flight use beyond
their estimate (none when the output is capped by the call's `max_tokens`).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

from django.db import transaction
from django.db.models import Q, Sum
from django.utils import timezone, translation
from django.utils.translation import gettext as _

from cadre.env import env_int
from cadre.errors import Conflict, InvalidInput, NotFound
from cadre.governance import audit
from cadre.governance.alerts import alert_open
from cadre.governance.models import Budget, UsageRecord
from cadre.llm import BudgetExceeded, Usage, estimate_tokens
from cadre.llm.metering import Account
from cadre.ports import Registry
from cadre.tenancy.models import Department, Organization, department_subtree_ids

logger = logging.getLogger(__name__)

ALERT_LEVELS = (80, 100)
# Per message, what the chat formats add around its content (role, separators).
MESSAGE_OVERHEAD_TOKENS = 4
ZERO = Decimal(0)

# Role templates live in agents (a higher layer); it registers "names":
# (organization id, template ids) -> {id: name} — the ids of that organization that exist.
TEMPLATES: Registry[Callable[[int, list[int]], dict[int, str]]] = Registry("budget templates")


def output_reserve() -> int:
    """Output tokens reserved for a call that sets no `max_tokens`."""
    return env_int("CADRE_BUDGET_OUTPUT_RESERVE", 1024, minimum=1)


def reservation_ttl() -> timedelta:
    """A reservation older than this belongs to a call whose worker died: it is released."""
    return timedelta(minutes=env_int("CADRE_BUDGET_RESERVATION_MINUTES", 30, minimum=1))


# --- periods ---------------------------------------------------------------------------------


def period_start(period: str, now: datetime, time_zone: str = "UTC") -> datetime:
    """The start of the day or month containing `now`, in the organization's time zone."""
    try:
        zone = ZoneInfo(time_zone or "UTC")
    except (KeyError, ValueError):
        zone = ZoneInfo("UTC")
    local = now.astimezone(zone)
    start = local.replace(hour=0, minute=0, second=0, microsecond=0)
    if period == Budget.Period.MONTHLY:
        start = start.replace(day=1)
    return start


def period_end(period: str, start: datetime) -> datetime:
    if period == Budget.Period.DAILY:
        return (start + timedelta(days=1, hours=2)).replace(hour=0)
    return (start.replace(day=28) + timedelta(days=4)).replace(day=1)


# --- which budgets apply ---------------------------------------------------------------------


def _department_ancestors(department_id: int | None) -> list[int]:
    found: list[int] = []
    while department_id is not None and department_id not in found and len(found) < 50:
        found.append(department_id)
        department_id = (
            Department.objects.filter(pk=department_id).values_list("parent_id", flat=True).first()
        )
    return found


def _applicable(account: Account):
    condition = Q(scope=Budget.Scope.ORGANIZATION)
    departments = _department_ancestors(account.department_id)
    if departments:
        condition |= Q(scope=Budget.Scope.DEPARTMENT, department_id__in=departments)
    if account.member_id is not None:
        condition |= Q(scope=Budget.Scope.MEMBER, member_id=account.member_id)
    if account.template_id is not None:
        condition |= Q(scope=Budget.Scope.TEMPLATE, template_id=account.template_id)
    return Budget.objects.filter(organization_id=account.organization_id, is_active=True).filter(
        condition
    )


def _ledger(budget: Budget):
    """The settled calls a budget counts in its current period."""
    records = UsageRecord.objects.filter(
        organization_id=budget.organization_id,
        status=UsageRecord.Status.SETTLED,
        created_at__gte=budget.period_start,
    )
    if budget.scope == Budget.Scope.DEPARTMENT:
        subtree = department_subtree_ids(budget.organization_id, {budget.department_id})
        records = records.filter(department_id__in=subtree)
    elif budget.scope == Budget.Scope.MEMBER:
        records = records.filter(member_id=budget.member_id)
    elif budget.scope == Budget.Scope.TEMPLATE:
        records = records.filter(template_id=budget.template_id)
    return records


def _roll(budget: Budget, now: datetime, time_zone: str) -> bool:
    """Move a (locked) budget into the period containing `now`; True if it changed."""
    start = period_start(budget.period, now, time_zone)
    if budget.period_start == start:
        return False
    budget.period_start = start
    totals = _ledger(budget).aggregate(
        tokens_in=Sum("input_tokens"), tokens_out=Sum("output_tokens"), cost=Sum("cost")
    )
    budget.used_tokens = (totals["tokens_in"] or 0) + (totals["tokens_out"] or 0)
    budget.used_cost = totals["cost"] or ZERO
    # Calls reserved in the previous period settle into it (their records say so).
    budget.reserved_tokens = 0
    budget.reserved_cost = ZERO
    budget.alerted_percent = 0
    return True


_COUNTERS = [
    "period_start",
    "used_tokens",
    "used_cost",
    "reserved_tokens",
    "reserved_cost",
    "alerted_percent",
]


# --- what budgets are called in messages -----------------------------------------------------


def subject_label(budget: Budget, template_name: str | None = None) -> str:
    """ "department Sales", "member Eve", "template Sales assistant", "the organization"
    (the department and member rows as loaded: select_related spares a query each)."""
    if budget.scope == Budget.Scope.ORGANIZATION:
        return _("the organization")
    if budget.scope == Budget.Scope.DEPARTMENT:
        name = budget.department.name if budget.department_id else "?"
        return _("department %(name)s") % {"name": name}
    if budget.scope == Budget.Scope.MEMBER:
        name = budget.member.display_name if budget.member_id else "?"
        return _("member %(name)s") % {"name": name}
    if template_name is None:
        template_name = template_names(budget.organization_id, [budget.template_id]).get(
            budget.template_id, str(budget.template_id)
        )
    return _("template %(name)s") % {"name": template_name}


def template_names(organization_id: int, ids: list[int]) -> dict[int, str]:
    lookup = TEMPLATES.get("names")
    return lookup(organization_id, [i for i in ids if i is not None]) if lookup else {}


def _amount(budget: Budget, value) -> str:
    if budget.metric == Budget.Metric.TOKENS:
        return _("%(count)s tokens") % {"count": f"{int(value):,}"}
    return f"{Decimal(value).quantize(Decimal('0.01'))}"


def _refusal_sentence(period: str, metric: str) -> str:
    sentences = {
        ("daily", "tokens"): _(
            "The daily tokens budget of %(subject)s would be exceeded: %(held)s of %(limit)s "
            "used or in use, this call needs about %(need)s. It resets on %(resets)s."
        ),
        ("daily", "cost"): _(
            "The daily cost budget of %(subject)s would be exceeded: %(held)s of %(limit)s "
            "used or in use, this call needs about %(need)s. It resets on %(resets)s."
        ),
        ("monthly", "tokens"): _(
            "The monthly tokens budget of %(subject)s would be exceeded: %(held)s of %(limit)s "
            "used or in use, this call needs about %(need)s. It resets on %(resets)s."
        ),
        ("monthly", "cost"): _(
            "The monthly cost budget of %(subject)s would be exceeded: %(held)s of %(limit)s "
            "used or in use, this call needs about %(need)s. It resets on %(resets)s."
        ),
    }
    return sentences.get((period, metric)) or _(
        "The %(period)s %(metric)s budget of %(subject)s would be exceeded: %(held)s of "
        "%(limit)s used or in use, this call needs about %(need)s. It resets on %(resets)s."
    )


def _refusal(budget: Budget, tokens: int, cost: Decimal) -> BudgetExceeded:
    need = tokens if budget.metric == Budget.Metric.TOKENS else cost
    held = (
        budget.used_tokens + budget.reserved_tokens
        if budget.metric == Budget.Metric.TOKENS
        else budget.used_cost + budget.reserved_cost
    )
    resets = period_end(budget.period, budget.period_start)
    message = _refusal_sentence(budget.period, budget.metric) % {
        "period": budget.period,
        "metric": budget.metric,
        "subject": subject_label(budget),
        "held": _amount(budget, held),
        "limit": _amount(budget, budget.limit),
        "need": _amount(budget, need),
        "resets": f"{resets:%Y-%m-%d}",
    }
    return BudgetExceeded(
        message,
        details={
            "budget": budget.pk,
            "scope": budget.scope,
            "period": budget.period,
            "metric": budget.metric,
            "limit": str(budget.limit),
            "used": str(held),
            "needed": str(need),
            "resets_at": resets.isoformat(),
        },
    )


# --- reserve and settle ----------------------------------------------------------------------


@dataclass(frozen=True)
class Estimate:
    tokens: int
    cost: Decimal


def estimate_call(provider, messages: list[dict], params: dict) -> Estimate:
    """What a call may use: its input (the platform's token estimator, on the safe side) and
    its output cap (`max_tokens`, else CADRE_BUDGET_OUTPUT_RESERVE)."""
    tokens_in = sum(
        estimate_tokens(str(message.get("content") or "")) + MESSAGE_OVERHEAD_TOKENS
        for message in messages
    )
    cap = params.get("max_tokens") or params.get("max_completion_tokens") or output_reserve()
    usage = Usage(input_tokens=tokens_in, output_tokens=int(cap))
    return Estimate(usage.total_tokens, usage.cost(provider.prices, provider.model))


def usage_reserve(
    *,
    account: Account,
    tokens: int,
    cost: Decimal,
    provider: str = "",
    model: str = "",
    now: datetime | None = None,
) -> UsageRecord:
    """Reserve a call's estimate against every budget that applies (BudgetExceeded if a hard
    one could be passed: nothing is written then) and record the call as `reserved`."""
    now = now or timezone.now()
    with transaction.atomic():
        budgets = list(_applicable(account).select_for_update().order_by("pk"))
        time_zone = ""
        if budgets:
            time_zone = (
                Organization.objects.filter(pk=account.organization_id)
                .values_list("time_zone", flat=True)
                .first()
                or "UTC"
            )
        for budget in budgets:
            _roll(budget, now, time_zone)
            if budget.enforcement != Budget.Enforcement.HARD:
                continue
            if budget.metric == Budget.Metric.TOKENS:
                over = budget.used_tokens + budget.reserved_tokens + tokens > budget.limit
            else:
                over = budget.used_cost + budget.reserved_cost + cost > budget.limit
            if over:
                raise _refusal(budget, tokens, cost)
        for budget in budgets:
            budget.reserved_tokens += tokens
            budget.reserved_cost += cost
            budget.save(update_fields=_COUNTERS)
        return UsageRecord.objects.create(
            organization_id=account.organization_id,
            member_id=account.member_id,
            department_id=account.department_id,
            template_id=account.template_id,
            run_id=account.run_id,
            purpose=account.purpose[:40],
            provider=provider[:150],
            model=model[:200],
            reserved_tokens=tokens,
            reserved_cost=cost,
            budgets={str(b.pk): b.period_start.isoformat() for b in budgets},
            created_at=now,
        )


def usage_admit(*, account: Account, tokens: int = 1, now: datetime | None = None) -> None:
    """Refuse up front (BudgetExceeded) work whose model calls a hard budget could not hold now
    (a replay that would be refused at its first call): read only, nothing is reserved — each
    call is still reserved and refused by the meter."""
    now = now or timezone.now()
    budgets = list(_applicable(account).filter(enforcement=Budget.Enforcement.HARD).order_by("pk"))
    if not budgets:
        return
    time_zone = (
        Organization.objects.filter(pk=account.organization_id)
        .values_list("time_zone", flat=True)
        .first()
        or "UTC"
    )
    for budget in budgets:
        _roll(budget, now, time_zone)  # in memory only: never saved here
        if budget.metric == Budget.Metric.TOKENS:
            over = budget.used_tokens + budget.reserved_tokens + tokens > budget.limit
        else:
            over = budget.used_cost + budget.reserved_cost >= budget.limit
        if over:
            raise _refusal(budget, tokens, ZERO)


def usage_settle(
    *, record: UsageRecord, usage: Usage | None, cost: Decimal = ZERO, model: str = ""
) -> UsageRecord:
    """The call came back (`usage`) or failed (None): its reservation becomes its real usage,
    or is released. Raises the 80 % / 100 % alerts of the budgets it reaches."""
    now = timezone.now()
    with transaction.atomic():
        held = {int(pk): start for pk, start in (record.budgets or {}).items()}
        budgets = list(Budget.objects.select_for_update().filter(pk__in=held).order_by("pk"))
        current = UsageRecord.objects.select_for_update().get(pk=record.pk)
        if current.status != UsageRecord.Status.RESERVED:
            return current  # settled already (or released as stale): never counted twice
        tokens = usage.total_tokens if usage is not None else 0
        for budget in budgets:
            if budget.period_start is None or budget.period_start.isoformat() != held[budget.pk]:
                continue  # the period rolled over since: the new one does not hold it
            budget.reserved_tokens = max(0, budget.reserved_tokens - current.reserved_tokens)
            budget.reserved_cost = max(ZERO, budget.reserved_cost - current.reserved_cost)
            budget.used_tokens += tokens
            budget.used_cost += cost
            _alert_levels(budget)
            budget.save(update_fields=_COUNTERS)
        if usage is None:
            current.status = UsageRecord.Status.RELEASED
        else:
            current.status = UsageRecord.Status.SETTLED
            current.input_tokens = usage.input_tokens
            current.cached_input_tokens = usage.cached_input_tokens
            current.cache_write_tokens = usage.cache_write_tokens
            current.output_tokens = usage.output_tokens
            current.cost = cost
            current.model = (model or current.model)[:200]
        current.settled_at = now
        current.save(
            update_fields=[
                "status",
                "input_tokens",
                "cached_input_tokens",
                "cache_write_tokens",
                "output_tokens",
                "cost",
                "model",
                "settled_at",
            ]
        )
        return current


def _alert_levels(budget: Budget) -> None:
    """Open an alert for each level (80, 100 %) the budget reached this period, once."""
    if budget.limit <= 0:
        return
    percent = Decimal(budget.used) * 100 / budget.limit
    for level in ALERT_LEVELS:
        if percent < level or budget.alerted_percent >= level:
            continue
        budget.alerted_percent = level
        with translation.override("en"):  # a stored title, written in one language
            label = subject_label(budget)
            used, limit = _amount(budget, budget.used), _amount(budget, budget.limit)
        alert_open(
            organization=budget.organization,
            fingerprint=hashlib.sha256(
                f"budget:{budget.pk}:{budget.period_start.isoformat()}:{level}".encode()
            ).hexdigest(),
            severity="critical" if level >= 100 else "warning",
            title=(
                f"{level} % of the {budget.period} {budget.metric} budget of {label} used "
                f"({used} of {limit})"
            ),
            details={
                "budget": budget.pk,
                "level": level,
                "scope": budget.scope,
                "period_start": budget.period_start.isoformat(),
                "used": str(budget.used),
                "limit": str(budget.limit),
                "enforcement": budget.enforcement,
            },
            label="budgets",
        )


def usage_release_stale(now: datetime | None = None) -> int:
    """Release the reservations of calls whose worker died mid-call (the beat task)."""
    cutoff = (now or timezone.now()) - reservation_ttl()
    released = 0
    for record in UsageRecord.objects.filter(
        status=UsageRecord.Status.RESERVED, created_at__lt=cutoff
    ).order_by("pk")[:500]:
        usage_settle(record=record, usage=None)
        released += 1
    return released


class BudgetMeter:
    """The meter `ModelProvider.chat` calls (see cadre.llm.metering); its handle is the
    call's record and the provider's prices."""

    def reserve(self, account: Account, *, provider, messages: list[dict], params: dict):
        estimate = estimate_call(provider, messages, params)
        record = usage_reserve(
            account=account,
            tokens=estimate.tokens,
            cost=estimate.cost,
            provider=provider.label,
            model=provider.model,
        )
        return record, provider.prices

    def settle(self, handle: tuple[UsageRecord, dict], result) -> None:
        record, prices = handle
        if result is None:
            usage_settle(record=record, usage=None)
            return
        usage_settle(
            record=record,
            usage=result.usage,
            # The configured model's prices: the answer may name a dated variant of it.
            cost=result.usage.cost(prices, record.model or result.model),
            model=result.model or record.model,
        )


# --- budgets: create, update, delete ---------------------------------------------------------


def _snapshot(budget: Budget) -> dict:
    return {
        "scope": budget.scope,
        "department": budget.department_id,
        "member": budget.member_id,
        "template": budget.template_id,
        "period": budget.period,
        "metric": budget.metric,
        "limit": str(budget.limit),
        "enforcement": budget.enforcement,
        "is_active": budget.is_active,
    }


def _check_subject(organization, scope: str, department, member, template_id) -> None:
    if scope not in Budget.Scope.values:
        raise InvalidInput(
            _("unknown scope %(scope)r") % {"scope": scope}, details={"scope": [_("unknown")]}
        )
    wanted = {
        Budget.Scope.ORGANIZATION: (),
        Budget.Scope.DEPARTMENT: ("department",),
        Budget.Scope.MEMBER: ("member",),
        Budget.Scope.TEMPLATE: ("template",),
    }[scope]
    given = {"department": department, "member": member, "template": template_id}
    for name, value in given.items():
        if name in wanted and value is None:
            raise InvalidInput(
                _("a %(scope)s budget needs its %(name)s") % {"scope": scope, "name": name},
                details={name: [_("This field is required.")]},
            )
        if name not in wanted and value is not None:
            raise InvalidInput(
                _("a %(scope)s budget has no %(name)s") % {"scope": scope, "name": name},
                details={name: [_("Not used by %(scope)s.") % {"scope": scope}]},
            )
    for row in (department, member):
        if row is not None and row.organization_id != organization.pk:
            raise NotFound(_("unknown department or member"))
    if template_id is not None and template_id not in template_names(
        organization.pk, [template_id]
    ):
        raise InvalidInput(_("unknown template"), details={"template": [_("Unknown template.")]})


def _check_values(period: str, metric: str, limit, enforcement: str) -> Decimal:
    if period not in Budget.Period.values:
        raise InvalidInput(
            _("unknown period %(period)r") % {"period": period}, details={"period": [_("unknown")]}
        )
    if metric not in Budget.Metric.values:
        raise InvalidInput(
            _("unknown metric %(metric)r") % {"metric": metric}, details={"metric": [_("unknown")]}
        )
    if enforcement not in Budget.Enforcement.values:
        raise InvalidInput(_("unknown enforcement"), details={"enforcement": [_("unknown")]})
    try:
        limit = Decimal(str(limit))
    except ArithmeticError:
        raise InvalidInput(
            _("limit is not a number"), details={"limit": [_("Not a number.")]}
        ) from None
    if not limit.is_finite() or limit <= 0:
        raise InvalidInput(_("limit must be above 0"), details={"limit": [_("Must be above 0.")]})
    if metric == Budget.Metric.TOKENS and limit != limit.to_integral_value():
        raise InvalidInput(
            _("a token limit is a whole number"),
            details={"limit": [_("A whole number of tokens.")]},
        )
    return limit


def _duplicate_check(budget: Budget) -> None:
    clash = Budget.objects.filter(
        organization_id=budget.organization_id,
        scope=budget.scope,
        department_id=budget.department_id,
        member_id=budget.member_id,
        template_id=budget.template_id,
        period=budget.period,
        metric=budget.metric,
    ).exclude(pk=budget.pk)
    if clash.exists():
        raise Conflict(
            _("A %(period)s %(metric)s budget for this %(scope)s exists.")
            % {"period": budget.period, "metric": budget.metric, "scope": budget.scope},
            code="duplicate",
        )


@transaction.atomic
def budget_create(
    *,
    actor,
    scope: str,
    period: str,
    metric: str,
    limit,
    enforcement: str = Budget.Enforcement.HARD,
    department=None,
    member=None,
    template_id: int | None = None,
    is_active: bool = True,
) -> Budget:
    actor.require("budget.manage")
    organization = actor.organization
    _check_subject(organization, scope, department, member, template_id)
    budget = Budget(
        organization=organization,
        scope=scope,
        department=department,
        member=member,
        template_id=template_id,
        period=period,
        metric=metric,
        limit=_check_values(period, metric, limit, enforcement),
        enforcement=enforcement,
        is_active=is_active,
    )
    _duplicate_check(budget)
    # The current period counts what was used before the budget was set.
    _roll(budget, timezone.now(), organization.time_zone)
    budget.save()
    audit.record(actor=actor, action="budget.create", target=budget, after=_snapshot(budget))
    # Set below what is used already: its alerts are due now, not at the next call.
    _alert_levels(budget)
    budget.save(update_fields=["alerted_percent"])
    return budget


@transaction.atomic
def budget_update(*, actor, budget: Budget, **changes) -> Budget:
    """Change a budget's limit, period, metric, enforcement or is_active."""
    actor.require("budget.manage")
    unknown = set(changes) - {"limit", "period", "metric", "enforcement", "is_active"}
    if unknown:
        raise InvalidInput(_("unknown field %(unknown)r") % {"unknown": sorted(unknown)[0]})
    budget = Budget.objects.select_for_update().get(pk=budget.pk, organization=actor.organization)
    before = _snapshot(budget)
    period = changes.get("period", budget.period)
    metric = changes.get("metric", budget.metric)
    budget.limit = _check_values(
        period,
        metric,
        changes.get("limit", budget.limit),
        changes.get("enforcement", budget.enforcement),
    )
    budget.enforcement = changes.get("enforcement", budget.enforcement)
    budget.is_active = bool(changes.get("is_active", budget.is_active))
    recount = period != budget.period or metric != budget.metric
    budget.period, budget.metric = period, metric
    _duplicate_check(budget)
    if recount:
        budget.period_start = None
        _roll(budget, timezone.now(), actor.organization.time_zone)
    budget.updated_at = timezone.now()
    _alert_levels(budget)  # a lowered limit may already be 80 % used
    budget.save()
    audit.record(
        actor=actor, action="budget.update", target=budget, before=before, after=_snapshot(budget)
    )
    return budget


@transaction.atomic
def budget_delete(*, actor, budget: Budget) -> None:
    actor.require("budget.manage")
    if budget.organization_id != actor.organization.pk:
        raise NotFound(_("unknown budget"))
    audit.record(actor=actor, action="budget.delete", target=budget, before=_snapshot(budget))
    budget.delete()


def account_for_member(member, *, template_id=None, run_id=None, purpose="run") -> Account:
    """The account a member's model calls are charged to."""
    return Account(
        organization_id=member.organization_id,
        member_id=member.pk,
        department_id=member.department_id,
        template_id=template_id,
        run_id=run_id,
        purpose=purpose,
    )


def account_for_actor(actor, *, template_id=None, purpose: str) -> Account:
    """The account the model calls an actor starts are charged to: their member when a person
    acts, else the organization (an API key, the system)."""
    if getattr(actor, "member", None) is not None:
        return account_for_member(actor.member, template_id=template_id, purpose=purpose)
    return Account(organization_id=actor.organization.pk, template_id=template_id, purpose=purpose)


METER = BudgetMeter()
