"""The BYOK fee (spec rule 9): 5% of what the request would cost on shared capacity, after a monthly free
allowance measured in list-price inference cost of the account's BYOK requests in the calendar month."""

from collections.abc import Iterable
from decimal import Decimal
from uuid import UUID

from django.db.models import Sum

from gateway.accounts.models import Plan
from gateway.billing.models import Generation
from gateway.billing.selectors import window_starts

BYOK_FEE_RATE = Decimal("0.05")
BYOK_MONTHLY_ALLOWANCE: dict[str, Decimal] = {Plan.PAY_AS_YOU_GO: Decimal(25_000), Plan.ENTERPRISE: Decimal(200_000)}


def byok_month_to_date(*, account_id: UUID) -> Decimal:
    total = Generation.objects.filter(
        account_id=account_id, is_byok=True, created_at__gte=window_starts()["monthly"]
    ).aggregate(s=Sum("upstream_cost"))["s"]
    return total or Decimal(0)


def byok_fee(*, list_cost: Decimal, month_to_date: Decimal, plan: str) -> Decimal:
    """The fee for a BYOK request of `list_cost`, given the month's BYOK list cost so far: only the part
    above the allowance is charged, at 5%."""
    allowance = BYOK_MONTHLY_ALLOWANCE.get(plan, BYOK_MONTHLY_ALLOWANCE[Plan.PAY_AS_YOU_GO])
    above_after = max(Decimal(0), month_to_date + list_cost - allowance)
    above_before = max(Decimal(0), month_to_date - allowance)
    return (above_after - above_before) * BYOK_FEE_RATE


def hold_amount(list_costs: Iterable[tuple[Decimal, bool]], *, plan: str, month_to_date: Decimal | None) -> Decimal:
    """The worst case over a request's candidates, each (its list cost, whether it runs on a BYOK key): the list
    price on shared capacity, the BYOK fee on a key. `month_to_date` None: the list price everywhere (what a budget
    counting BYOK spends)."""
    worst = Decimal(0)
    for list_cost, is_byok in list_costs:
        cost = list_cost
        if is_byok and month_to_date is not None:
            cost = byok_fee(list_cost=list_cost, month_to_date=month_to_date, plan=plan)
        worst = max(worst, cost)
    return worst
