"""Credit movements. Every change of `Account.balance` happens here, together with its ledger entry,
inside one transaction, so the balance always equals the ledger's sum and never goes negative."""

import uuid
from dataclasses import dataclass
from decimal import Decimal
from uuid import UUID

from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from gateway.accounts.models import Account, ApiKey
from gateway.billing.generations import GenerationRecord, generation_create
from gateway.billing.models import EntryKind, Generation, LedgerEntry, Reservation, ReservationStatus
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


def credits_reserve(
    *, account_id: UUID, amount: Decimal, api_key_id: int | None = None, key_has_limit: bool = True
) -> ReservationHandle:
    """Hold `amount` before an upstream call; 402 when the balance (or the key's limit) cannot cover it."""
    amount = max(amount, Decimal(0))
    if connection.vendor == "postgresql" and not (api_key_id is not None and key_has_limit):
        return _reserve_in_one_statement(account_id=account_id, amount=amount, api_key_id=api_key_id)
    with transaction.atomic():
        if api_key_id is not None and key_has_limit:
            # Lock order everywhere: account row, then key row.
            Account.objects.select_for_update().only("id").get(pk=account_id)
            _check_key_limit(api_key_id=api_key_id, amount=amount)
        # The balance row is the one every request of the account writes: touch it last, so its lock is
        # held only for the UPDATE and the COMMIT.
        reservation = Reservation.objects.create(account_id=account_id, api_key_id=api_key_id, amount=amount)
        LedgerEntry.objects.create(
            account_id=account_id,
            kind=EntryKind.RESERVE,
            amount=-amount,
            api_key_id=api_key_id,
            reservation=reservation,
        )
        debited = Account.objects.filter(pk=account_id, balance__gte=amount).update(balance=F("balance") - amount)
        if not debited:
            raise PaymentRequired(MSG_INSUFFICIENT, metadata={"required": float(amount)})  # rolls back the rows
    return ReservationHandle(id=reservation.id, account_id=account_id, api_key_id=api_key_id, amount=amount)


RESERVE_SQL = """
WITH debited AS (
    UPDATE accounts_account SET balance = balance - %(amount)s
    WHERE id = %(account)s AND balance >= %(amount)s RETURNING id),
held AS (
    INSERT INTO billing_reservation (id, account_id, api_key_id, amount, status, created_at, closed_at)
    SELECT %(reservation)s, id, %(key)s, %(amount)s, 'held', now(), NULL FROM debited RETURNING id)
INSERT INTO billing_ledgerentry
    (account_id, kind, amount, api_key_id, reservation_id, generation_id, is_byok, note, created_at)
SELECT %(account)s, 'reserve', -%(amount)s, %(key)s, id, '', false, '', now() FROM held
RETURNING reservation_id
"""


def _reserve_in_one_statement(*, account_id: UUID, amount: Decimal, api_key_id: int | None) -> ReservationHandle:
    """PostgreSQL: the debit, the hold and its ledger entry in one statement, so the account's balance row
    (written by every request of the account) is locked only while the server runs it, never across a
    client round trip. Same effect as the transaction below."""
    reservation_id = uuid.uuid4()
    with connection.cursor() as cursor:
        cursor.execute(
            RESERVE_SQL, {"amount": amount, "account": account_id, "reservation": reservation_id, "key": api_key_id}
        )
        if cursor.fetchone() is None:
            raise PaymentRequired(MSG_INSUFFICIENT, metadata={"required": float(amount)})
    return ReservationHandle(id=reservation_id, account_id=account_id, api_key_id=api_key_id, amount=amount)


def credits_settle(
    *, reservation: ReservationHandle, cost: Decimal, generation_id: str = "", is_byok: bool = False
) -> Settlement:
    """Release the hold and charge the actual cost, once. A cost above the balance is charged down to 0
    and the rest reported as `shortfall` (the balance never goes negative)."""
    cost = max(cost, Decimal(0))
    if connection.vendor == "postgresql":
        settled = _settle_in_one_statement(
            reservation=reservation, cost=cost, generation_id=generation_id, is_byok=is_byok
        )
        if settled is not None:
            return settled
    held = reservation.amount
    with transaction.atomic(savepoint=False):  # all-or-nothing with the caller's transaction, if any
        if not _close(reservation, ReservationStatus.SETTLED):
            return Settlement(reservation_id=reservation.id, charged=Decimal(0), shortfall=Decimal(0))
        account = Account.objects.filter(pk=reservation.account_id)
        # Common case in one statement: the hold plus the balance cover the cost.
        if account.filter(balance__gte=cost - held).update(balance=F("balance") + held - cost):
            charged = cost
        else:
            balance = account.select_for_update().values_list("balance", flat=True).get()
            charged = min(cost, balance + held)
            account.update(balance=F("balance") + held - charged)
        entries = [_entry(reservation, EntryKind.RELEASE, held, generation_id)]
        if charged:
            entries.append(_entry(reservation, EntryKind.CHARGE, -charged, generation_id, is_byok=is_byok))
        LedgerEntry.objects.bulk_create(entries)
    return Settlement(reservation_id=reservation.id, charged=charged, shortfall=cost - charged)


SETTLE_SQL = """
WITH target AS (
    SELECT id, account_id, api_key_id, amount FROM billing_reservation
    WHERE id = %(reservation)s AND status = 'held' FOR UPDATE),
paid AS (
    UPDATE accounts_account a SET balance = a.balance + t.amount - %(cost)s
    FROM target t WHERE a.id = t.account_id AND a.balance + t.amount >= %(cost)s
    RETURNING t.id, t.account_id, t.api_key_id, t.amount),
closed AS (
    UPDATE billing_reservation r SET status = 'settled', closed_at = now()
    FROM paid p WHERE r.id = p.id RETURNING r.id),
entries AS (
    INSERT INTO billing_ledgerentry
        (account_id, kind, amount, api_key_id, reservation_id, generation_id, is_byok, note, created_at)
    SELECT p.account_id, k.kind, CASE WHEN k.kind = 'release' THEN p.amount ELSE -%(cost)s END, p.api_key_id,
           p.id, %(generation)s, k.kind = 'charge' AND %(byok)s, '', now()
    FROM paid p CROSS JOIN (VALUES ('release'), ('charge')) AS k(kind)
    WHERE k.kind = 'release' OR %(cost)s > 0
    RETURNING id)
SELECT (SELECT count(*) FROM target), (SELECT count(*) FROM closed)
"""


def _settle_in_one_statement(
    *, reservation: ReservationHandle, cost: Decimal, generation_id: str, is_byok: bool
) -> Settlement | None:
    """PostgreSQL, the common case (the hold plus the balance cover the cost) in one statement, so the
    balance row is not locked across client round trips. None when the balance falls short: the caller
    then takes the general path, which changes nothing unless it settles."""
    with connection.cursor() as cursor:
        cursor.execute(
            SETTLE_SQL, {"reservation": reservation.id, "cost": cost, "generation": generation_id, "byok": is_byok}
        )
        held, closed = cursor.fetchone()
    if not held:
        return Settlement(reservation_id=reservation.id, charged=Decimal(0), shortfall=Decimal(0))
    if closed:
        return Settlement(reservation_id=reservation.id, charged=cost, shortfall=Decimal(0))
    return None


def generation_settle(*, reservation: ReservationHandle, record: GenerationRecord, charge: bool) -> Decimal:
    """The one way a request's billing ends (JSON or stream, served, failed, cut or cancelled): in ONE
    transaction, write its generation record and either charge `record.cost` against the hold (`charge`) or
    give the hold back. The record is written first: the settlement's balance update is the last statement,
    so the account row (written by every request of the account) stays locked as briefly as possible.
    Returns what was charged (less than `record.cost` when the balance could not cover it all)."""
    with transaction.atomic():
        generation_create(record=record)
        if not charge:
            credits_release(reservation=reservation)
            return Decimal(0)
        charged = credits_settle(
            reservation=reservation, cost=record.cost, generation_id=record.id, is_byok=record.is_byok
        ).charged
        if charged != record.cost:
            Generation.objects.filter(pk=record.id).update(cost=charged)
        return charged


def credits_release(*, reservation: ReservationHandle) -> None:
    """Give a hold back in full (the request was not served); a no-op when already closed."""
    with transaction.atomic():
        if not _close(reservation, ReservationStatus.RELEASED):
            return
        Account.objects.filter(pk=reservation.account_id).update(balance=F("balance") + reservation.amount)
        _entry(reservation, EntryKind.RELEASE, reservation.amount, "").save()


def _close(reservation: ReservationHandle, status: str) -> bool:
    """Mark a held reservation settled or released; False when it was already closed (no double charge)."""
    return bool(
        Reservation.objects.filter(pk=reservation.id, status=ReservationStatus.HELD).update(
            status=status, closed_at=timezone.now()
        )
    )


def _entry(
    reservation: ReservationHandle, kind: str, amount: Decimal, generation_id: str, is_byok: bool = False
) -> LedgerEntry:
    return LedgerEntry(
        account_id=reservation.account_id,
        kind=kind,
        amount=amount,
        api_key_id=reservation.api_key_id,
        reservation_id=reservation.id,
        generation_id=generation_id,
        is_byok=is_byok,
    )


def credits_release_stale(*, older_than_seconds: int) -> int:
    """Release holds left open by requests that never finished (a killed worker); returns how many."""
    from datetime import timedelta

    cutoff = timezone.now() - timedelta(seconds=older_than_seconds)
    released = 0
    for row in Reservation.objects.filter(status=ReservationStatus.HELD, created_at__lt=cutoff).iterator():
        handle = ReservationHandle(id=row.id, account_id=row.account_id, api_key_id=row.api_key_id, amount=row.amount)
        credits_release(reservation=handle)
        released += 1
    return released
