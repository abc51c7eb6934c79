"""Credit movements. Every change of `Account.balance` happens here, together with its ledger entry,
inside one transaction, so the balance always equals the ledger's sum and never goes negative."""

from dataclasses import dataclass
from decimal import Decimal
from uuid import UUID

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from gateway.accounts.models import Account, ApiKey
from gateway.billing.models import EntryKind, LedgerEntry, Reservation, ReservationStatus
from gateway.billing.selectors import key_usage_in_window
from gateway.errors import GatewayError, PaymentRequired

MSG_INSUFFICIENT = "Insufficient credits. Add more credits to your account to continue."
MSG_KEY_LIMIT = "This API key's credit limit is exhausted"


@dataclass(frozen=True)
class ReservationHandle:
    id: UUID
    account_id: UUID
    api_key_id: int | None
    amount: Decimal


@dataclass(frozen=True)
class Settlement:
    reservation_id: UUID
    charged: Decimal
    shortfall: Decimal


def credits_topup(*, account_id: UUID, amount: Decimal, note: str = "", kind: str = EntryKind.TOPUP) -> LedgerEntry:
    if kind not in (EntryKind.TOPUP, EntryKind.REFUND):
        raise GatewayError("Only top-ups and refunds add credits")
    if amount <= 0:
        raise GatewayError("amount: must be greater than 0")
    with transaction.atomic():
        updated = Account.objects.filter(pk=account_id).update(balance=F("balance") + amount)
        if not updated:
            raise GatewayError("Account not found", status=404)
        return LedgerEntry.objects.create(account_id=account_id, kind=kind, amount=amount, note=note)


def _check_key_limit(*, api_key_id: int, amount: Decimal) -> None:
    key = ApiKey.objects.select_for_update().only("limit", "limit_reset", "include_byok_in_limit").get(pk=api_key_id)
    if key.limit is None:
        return
    used = key_usage_in_window(key=key)
    held = sum(
        Reservation.objects.filter(api_key_id=api_key_id, status=ReservationStatus.HELD).values_list(
            "amount", flat=True
        ),
        Decimal(0),
    )
    if used + held + amount > key.limit:
        raise PaymentRequired(MSG_KEY_LIMIT, metadata={"limit": float(key.limit), "usage": float(used)})


def credits_reserve(*, account_id: UUID, amount: Decimal, api_key_id: int | None = None) -> ReservationHandle:
    """Hold `amount` before an upstream call; 402 when the balance (or the key's limit) cannot cover it."""
    amount = max(amount, Decimal(0))
    with transaction.atomic():
        if api_key_id is not None:
            # Lock order everywhere: account row, then key row.
            Account.objects.select_for_update().only("id").get(pk=account_id)
            _check_key_limit(api_key_id=api_key_id, amount=amount)
        debited = Account.objects.filter(pk=account_id, balance__gte=amount).update(balance=F("balance") - amount)
        if not debited:
            raise PaymentRequired(MSG_INSUFFICIENT, metadata={"required": float(amount)})
        reservation = Reservation.objects.create(account_id=account_id, api_key_id=api_key_id, amount=amount)
        LedgerEntry.objects.create(
            account_id=account_id, kind=EntryKind.RESERVE, amount=-amount, api_key_id=api_key_id,
            reservation=reservation,
        )
    return ReservationHandle(id=reservation.id, account_id=account_id, api_key_id=api_key_id, amount=amount)


def credits_settle(
    *, reservation_id: UUID, cost: Decimal, generation_id: str = "", is_byok: bool = False
) -> Settlement:
    """Release the hold and charge the actual cost, once. A cost above the balance is charged down to 0
    and the rest reported as `shortfall` (the balance never goes negative)."""
    cost = max(cost, Decimal(0))
    with transaction.atomic():
        reservation = Reservation.objects.select_for_update().get(pk=reservation_id)
        if reservation.status != ReservationStatus.HELD:
            return Settlement(reservation_id=reservation.id, charged=Decimal(0), shortfall=Decimal(0))
        account = Account.objects.select_for_update().only("balance").get(pk=reservation.account_id)
        available = account.balance + reservation.amount
        charged = min(cost, available)
        _close(reservation, ReservationStatus.SETTLED, generation_id)
        if charged:
            LedgerEntry.objects.create(
                account_id=reservation.account_id, kind=EntryKind.CHARGE, amount=-charged,
                api_key_id=reservation.api_key_id, reservation=reservation, generation_id=generation_id,
                is_byok=is_byok,
            )
        Account.objects.filter(pk=reservation.account_id).update(
            balance=F("balance") + reservation.amount - charged
        )
    return Settlement(reservation_id=reservation.id, charged=charged, shortfall=cost - charged)


def credits_release(*, reservation_id: UUID) -> None:
    """Give a hold back in full (the request was not served); a no-op when already closed."""
    with transaction.atomic():
        reservation = Reservation.objects.select_for_update().get(pk=reservation_id)
        if reservation.status != ReservationStatus.HELD:
            return
        _close(reservation, ReservationStatus.RELEASED, "")
        Account.objects.filter(pk=reservation.account_id).update(balance=F("balance") + reservation.amount)


def _close(reservation: Reservation, status: str, generation_id: str) -> None:
    reservation.status = status
    reservation.closed_at = timezone.now()
    reservation.save(update_fields=["status", "closed_at"])
    LedgerEntry.objects.create(
        account_id=reservation.account_id, kind=EntryKind.RELEASE, amount=reservation.amount,
        api_key_id=reservation.api_key_id, reservation=reservation, generation_id=generation_id,
    )
