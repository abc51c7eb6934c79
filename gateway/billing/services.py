"""Credit movements. The balance changes only together with its ledger entry (a top-up, a refund, a request's
one charge), so it always equals the ledger's sum. A request's credit hold is not in the ledger: it is the
request's own generation row (status `in_progress`, `held`) plus the account's `reserved` (the sum of its open
holds). The hold and the settlement are defined once (billing.statements): on PostgreSQL each is ONE statement
(a key with a limit adds its row lock, in the same round trip), so the account row, which every request of the
account writes, is never locked across a round trip; on SQLite the same steps run in a transaction.
`balance >= reserved >= 0` is a database constraint: no hold or charge overdraws, whatever races happen above it."""

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Context, Decimal
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Case, DecimalField, F, Q, Sum, Value, When
from django.db.models.functions import Greatest, Round
from django.utils import timezone
from psycopg_pool import PoolTimeout

from gateway.accounts.models import Account, ApiKey, Member, Workspace
from gateway.billing import statements
from gateway.billing.generations import GenerationRecord, generation_id_new, generation_outcome
from gateway.billing.models import IN_PROGRESS, EntryKind, Generation, LedgerEntry
from gateway.billing.selectors import key_open_holds, key_usage_in_window, window_starts
from gateway.billing.settle_retry import DATABASE_UNREACHABLE, settle_later
from gateway.errors import GatewayError, PaymentRequired

MSG_INSUFFICIENT = "Insufficient credits. Add more credits to your account to continue."
MSG_KEY_LIMIT = "This API key's credit limit is exhausted"
# What a stale hold's age adds to the longest request and the settlement retries' window (stale_hold_seconds).
STALE_HOLD_MARGIN_SECONDS = 900


def longest_request_seconds() -> float:
    """The longest a live request keeps its hold: its longest upstream deadline (a whole stream, a whole
    non-streaming answer, a stream's first byte; routing/http.py enforces them). The sweep never releases a hold
    younger than this."""
    return max(
        settings.UPSTREAM_STREAM_MAX_SECONDS, settings.UPSTREAM_TOTAL_TIMEOUT, settings.UPSTREAM_FIRST_BYTE_TIMEOUT
    )


def stale_hold_seconds() -> int:
    """A hold older than this is a killed worker's, or one whose settlement the database never took (retried for
    SETTLE_RETRY_SECONDS after the request: settle_retry), never a live request's: the sweep's default age
    (release_stale_reservations) and a 402's. The margin covers the waits before a request's last attempt (a
    first attempt's timeout before a fallback)."""
    return math.ceil(longest_request_seconds() + settings.SETTLE_RETRY_SECONDS + STALE_HOLD_MARGIN_SECONDS)


STALE_HOLD_SECONDS = stale_hold_seconds()
HOLD_EXPIRED = "hold_expired"  # the error_type of a generation whose hold expired unsettled
_LIFETIME = datetime(1970, 1, 1, tzinfo=UTC)  # the start of a lifetime limit's window
_PLACES = Decimal("1e-12")  # the money columns' scale
_MONEY_FIELD = DecimalField(max_digits=24, decimal_places=12)
_WIDE = Context(prec=100)  # room for any amount a request could ask for: one beyond the balance is a 402, not a 500
_COLUMN_LIMIT = Decimal("1e12")  # numeric(24, 12) holds less than this


def _usd(amount: Decimal) -> Decimal:
    """An amount as the money columns store it (12 places, not negative): the balance, the ledger entry and the
    record then change by exactly the same number, with no rounding of their own."""
    return max(amount, Decimal(0)).quantize(_PLACES, context=_WIDE)


@dataclass(frozen=True)
class ReservationHandle:
    """An open hold. `id` is the request's generation id: its row is the hold."""

    id: str
    account_id: UUID
    api_key_id: int | None
    amount: Decimal


@dataclass(frozen=True)
class Settlement:
    generation_id: str
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


@dataclass(frozen=True, slots=True)
class SpendCap:
    """A budget the hold must fit in, set by the caller's policy (a guardrail): what the key spent (or, with
    `member_user_id`, every key that member created; or, with `pool`, the generations it selects) since `since`
    (None: ever), plus their open holds, plus this hold, at most `limit`. BYOK requests count at their list price
    only with `include_byok`."""

    source: str  # named in the refusal: 'guardrail "Team policy"'
    limit: Decimal
    since: datetime | None
    resets_at: datetime | None
    include_byok: bool = False
    member_user_id: str | None = None  # a member's budget; else the key's
    # A budget shared by many keys (a workspace's default guardrail): the account's generations it counts, and
    # the workspace whose row the check locks, so that the holds of all those keys take turns.
    pool: Q | None = None
    pool_workspace_id: UUID | None = None


class SpendCapExceeded(GatewayError):
    status = 403


def credits_reserve(
    *,
    account_id: UUID,
    amount: Decimal,
    api_key_id: int | None = None,
    key_has_limit: bool = True,
    generation_id: str = "",
    requested_model: str = "",
    workspace_id: UUID | None = None,
    caps: tuple[SpendCap, ...] = (),
    cap_amount: Decimal | None = None,
    replacing: tuple[ReservationHandle, ...] = (),
) -> ReservationHandle:
    """Hold `amount` before an upstream call by opening the request's generation record (a new id unless given);
    402 when the spendable balance (or the key's limit) cannot cover it, 403 (SpendCapExceeded) when a cap cannot.
    A 402 first expires the account's stale holds and tries once more, so a killed worker's holds never block an
    account, cron or not. `replacing`: holds this one takes over (the side calls' a request made before its own
    hold: a fusion panel's), given back in the same transaction, so the new hold is checked without them and no
    other request can take what they held in between; refused, they stay open."""
    hold: dict[str, Any] = {
        "id": generation_id or generation_id_new(),
        "account": account_id,
        "key": api_key_id,
        "workspace": workspace_id,
        "model": requested_model,
        "amount": _usd(amount),
    }
    # What caps counting BYOK at list price hold the request to (a BYOK hold is only its fee).
    cap_hold = max(hold["amount"], _usd(cap_amount)) if cap_amount is not None else hold["amount"]
    if hold["amount"] >= _COLUMN_LIMIT:  # no balance covers it (and the columns could not hold it)
        raise PaymentRequired(MSG_INSUFFICIENT, metadata={"required": float(hold["amount"])})
    check_limit = api_key_id is not None and key_has_limit
    try:
        try:
            _hold_within(caps, hold, check_limit=check_limit, cap_hold=cap_hold, replacing=replacing)
        except PaymentRequired:
            if not holds_expire(older_than_seconds=STALE_HOLD_SECONDS, account_id=account_id):
                raise
            _hold_within(caps, hold, check_limit=check_limit, cap_hold=cap_hold, replacing=replacing)
    except DATABASE_UNREACHABLE as exc:
        # The hold may have been taken without its answer arriving (a statement given up on the client side, its
        # commit run by the server once it thaws: gateway/pgwait.py): released once the database answers. Not when
        # no connection was had (the pool's timeout: nothing ran), which would fill the retries in a long outage.
        if not isinstance(exc.__cause__, PoolTimeout):
            settle_later(hold["id"], lambda: _expire(hold["id"]))
        raise
    return ReservationHandle(id=hold["id"], account_id=account_id, api_key_id=api_key_id, amount=hold["amount"])


def _hold_within(
    caps: tuple[SpendCap, ...],
    hold: dict[str, Any],
    *,
    check_limit: bool,
    cap_hold: Decimal | None = None,
    replacing: tuple[ReservationHandle, ...] = (),
) -> None:
    """The hold, inside the caller's spend caps when it has any: then one transaction that first locks the rows
    the caps are counted under (the key's; a member's), so concurrent requests of one assignee check in turn and
    together never pass a cap by more than one request's hold... which the check includes: they never pass it.
    The holds it replaces are given back after those locks (the lock order of every hold: key, then the generation
    rows, then the account), before anything is counted."""
    if not caps and not replacing:
        _hold(hold, check_limit=check_limit)
        return
    with transaction.atomic():
        if hold["key"] is not None:
            ApiKey.objects.select_for_update(no_key=True).filter(pk=hold["key"]).values_list("pk").first()
        for cap in caps:
            if cap.member_user_id is not None:
                members = Member.objects.filter(account_id=hold["account"], user_id=cap.member_user_id)
                members.select_for_update(no_key=True).values_list("pk").first()
            if cap.pool_workspace_id is not None:
                pool = Workspace.objects.filter(pk=cap.pool_workspace_id)
                pool.select_for_update(no_key=True).values_list("pk").first()
        for replaced in replacing:
            hold_drop(replaced)
        for cap in caps:
            spent = _cap_spend(cap, account_id=hold["account"], api_key_id=hold["key"])
            amount = cap_hold if cap.include_byok and cap_hold is not None else hold["amount"]
            if spent + amount > cap.limit:
                raise SpendCapExceeded(_cap_message(cap, spent))
        _hold(hold, check_limit=check_limit)
        if cap_hold is not None and cap_hold > hold["amount"]:  # open holds count at it (see _cap_spend)
            Generation.objects.filter(pk=hold["id"], status=IN_PROGRESS).update(upstream_cost=cap_hold)


def spend_caps_check(caps: tuple[SpendCap, ...], *, account_id: UUID, api_key_id: int | None) -> None:
    """SpendCapExceeded when a cap has nothing left for any request (spent or held up to its limit): asked before a
    request's paid checks run (an entity model, a moderation engine, OCR), so that a spent budget does not buy
    them while its hold is refused. No lock: the hold checks again, with its amount."""
    for cap in caps:
        spent = _cap_spend(cap, account_id=account_id, api_key_id=api_key_id)
        if spent >= cap.limit:
            raise SpendCapExceeded(_cap_message(cap, spent))


def _cap_message(cap: SpendCap, spent: Decimal) -> str:
    resets = f"; it resets at {cap.resets_at.isoformat()}" if cap.resets_at else ""
    return (
        f"Request blocked by {cap.source}: its budget of ${cap.limit.normalize():f} is spent"
        f" (${spent.normalize():f} used or held){resets}"
    )


def _cap_spend(cap: SpendCap, *, account_id: UUID, api_key_id: int | None) -> Decimal:
    """Spent since the cap's start (BYOK at list price when counted) plus what is held now, for its assignee."""
    rows = Generation.objects.filter(account_id=account_id)
    if cap.pool is not None:
        rows = rows.filter(cap.pool)
    elif cap.member_user_id is not None:
        rows = rows.filter(api_key__creator__user_id=cap.member_user_id)
    else:
        rows = rows.filter(api_key_id=api_key_id)
    if cap.since is not None:
        rows = rows.filter(created_at__gte=cap.since)
    byok_cost = F("upstream_cost") if cap.include_byok else Value(Decimal(0))
    totals = rows.aggregate(
        spent=Sum(Case(When(is_byok=True, then=byok_cost), default=F("cost"), output_field=_MONEY_FIELD)),
        # an open BYOK hold is only its fee: its list-price worst case is on upstream_cost until settlement
        held=Sum(Greatest("held", "upstream_cost") if cap.include_byok else F("held"), filter=Q(status=IN_PROGRESS)),
    )
    return (totals["spent"] or Decimal(0)) + (totals["held"] or Decimal(0))


def _hold(hold: dict[str, Any], *, check_limit: bool) -> None:
    """Take the hold (billing.statements): one statement on PostgreSQL, with the key's limit when it has one."""
    if connection.vendor != "postgresql":
        with transaction.atomic():
            if check_limit:
                _check_key_limit(api_key_id=hold["key"], amount=hold["amount"])
            if statements.run_in_steps(statements.HOLD_CHAIN, hold) is None:
                raise PaymentRequired(MSG_INSUFFICIENT, metadata={"required": float(hold["amount"])})
        return
    if check_limit:
        params = {**hold, **window_starts(), "lifetime": _LIFETIME}
        within_limit, used, limit, opened = statements.hold_run(statements.HOLD_WITHIN_LIMIT_SQL, params)
    else:
        within_limit, used, limit, opened = statements.hold_run(statements.HOLD_SQL, hold)
    if not within_limit and limit is not None:  # (only a key with a limit is refused by it)
        raise PaymentRequired(MSG_KEY_LIMIT, metadata={"limit": float(limit), "usage": float(used)})
    if not opened:
        raise PaymentRequired(MSG_INSUFFICIENT, metadata={"required": float(hold["amount"])})


def _check_key_limit(*, api_key_id: int, amount: Decimal) -> None:
    key = ApiKey.objects.select_for_update().only("limit", "limit_reset", "include_byok_in_limit").get(pk=api_key_id)
    if key.limit is None:
        return
    used = key_usage_in_window(key=key)
    if used + key_open_holds(key_id=api_key_id) + amount > key.limit:
        raise PaymentRequired(MSG_KEY_LIMIT, metadata={"limit": float(key.limit), "usage": float(used)})


# Called with each settled request's record and what was charged (None: it was already closed); registered at
# startup by gateway.console (metrics and the request log line). An observer must not raise.
SETTLED_OBSERVERS: list[Callable[[GenerationRecord, Decimal | None], None]] = []


def generation_settle(
    *,
    reservation: ReservationHandle,
    record: GenerationRecord,
    charge: bool,
    replacing: tuple[ReservationHandle, ...] = (),
) -> Decimal:
    """The one way a request's billing ends (JSON or stream, served, failed, cut or cancelled): complete its
    generation row with `record`, close its hold and charge `record.cost` (`charge`) or nothing: one statement on
    PostgreSQL, one ledger row at most (none for a failure or a zero cost). Once: a second settlement, or one after
    the hold expired, changes nothing and returns 0. Returns what was charged: a cost above the balance the hold
    can reach (the spendable balance plus the hold) is charged down to it, never below 0. `replacing`: holds taken
    for the request's own side calls (a gateway:fusion panel's), given back in the same transaction, so that the
    cost they covered is charged in full, never down to what the balance had left beside them."""
    if record.id != reservation.id:
        raise ValueError(f"the record {record.id} is not the hold {reservation.id}")
    cost = _usd(record.cost) if charge else Decimal(0)
    outcome = generation_outcome(record=record)

    def settle() -> Decimal | None:
        if not replacing:  # a plain request: one statement, no transaction of its own
            return _close(reservation, outcome=outcome, cost=cost)
        with transaction.atomic():
            # The request's row first, then the side holds' rows, then the account: the order of every settlement.
            Generation.objects.select_for_update(no_key=True).filter(pk=reservation.id).values_list("pk").first()
            for held in replacing:
                _drop(held)
            return _close(reservation, outcome=outcome, cost=cost)

    try:
        charged = settle()
    except DATABASE_UNREACHABLE:
        # The database did not answer (down, stalled): the same settlement runs again once it does, charging the
        # usage known now (or releasing the hold), once (settle_retry), rather than the sweep releasing it later.
        # With the side holds it takes over, in one transaction again: without them the charge could be cut down to
        # the balance beside them, and they would stay open. Once: every step changes only a hold still open.
        settle_later(reservation.id, lambda: _observed(record, settle()))
        raise
    return _observed(record, charged)


def _observed(record: GenerationRecord, charged: Decimal | None) -> Decimal:
    for observe in SETTLED_OBSERVERS:
        observe(record, charged)
    return charged or Decimal(0)


def credits_settle(*, reservation: ReservationHandle, cost: Decimal, is_byok: bool = False) -> Settlement:
    """Charge `cost` against a hold and close it, with no record of a served request (the generation is marked
    completed and keeps what it had). The part of the cost the balance could not cover is the `shortfall`."""
    record = GenerationRecord(
        id=reservation.id,
        account_id=reservation.account_id,
        api_key_id=reservation.api_key_id,
        workspace_id=None,
        requested_model="",
        cost=cost,
        is_byok=is_byok,
    )
    charged = _close(reservation, outcome=generation_outcome(record=record), cost=_usd(cost))
    if charged is None:  # already closed
        return Settlement(generation_id=reservation.id, charged=Decimal(0), shortfall=Decimal(0))
    return Settlement(generation_id=reservation.id, charged=charged, shortfall=_usd(cost) - charged)


def _close(reservation: ReservationHandle, *, outcome: dict[str, Any], cost: Decimal) -> Decimal | None:
    """Close an open hold, charging at most `cost`; None when it was already closed."""
    return statements.settle_run(statements.settle_params(reservation.id, outcome=outcome, cost=cost))


def holds_expire(*, older_than_seconds: int, account_id: UUID | None = None) -> int:
    """Release holds left open by requests that never settled (a killed worker): the generation is marked failed
    (`hold_expired`) and charged nothing. Each closes in its own transaction, claimed by the same status change a
    settlement makes, so of a late settlement and the sweep exactly one closes a hold. Returns how many."""
    stale = Generation.objects.filter(
        status=IN_PROGRESS, created_at__lt=timezone.now() - timedelta(seconds=older_than_seconds)
    )
    if account_id is not None:
        stale = stale.filter(account_id=account_id)
    return sum(_expire(generation_id) for generation_id in stale.values_list("pk", flat=True))


def hold_drop(reservation: ReservationHandle) -> bool:
    """Give back a hold that was never a request of its own (a fusion panel's, covering its cost until the
    request's own hold does) and remove its row: nothing is charged, nothing stays in the request log. Once: a
    hold already closed (the stale-hold sweep) is left as it is. Returns whether it was dropped. When the database
    does not answer, dropped once it does (settle_retry)."""
    try:
        return _drop(reservation)
    except DATABASE_UNREACHABLE:
        settle_later(reservation.id, lambda: _drop(reservation))
        raise


def holds_drop(reservations: Iterable[ReservationHandle]) -> None:
    """`hold_drop` for each hold: every one the database does not take is queued for when it answers (one failing
    must not leave the next ones out), then the first such error is raised."""
    unreachable: Exception | None = None
    for reservation in reservations:
        try:
            hold_drop(reservation)
        except DATABASE_UNREACHABLE as exc:
            unreachable = unreachable or exc
    if unreachable is not None:
        raise unreachable


def _drop(reservation: ReservationHandle) -> bool:
    with transaction.atomic():
        found = (
            Generation.objects.select_for_update()
            .filter(pk=reservation.id, status=IN_PROGRESS)
            .values_list("account_id", "held")
            .first()
        )
        if found is None:
            return False
        account_id, held = found
        Generation.objects.filter(pk=reservation.id).delete()
        _unreserve(account_id, held)
    return True


def _expire(generation_id: str) -> bool:
    with transaction.atomic():
        if not Generation.objects.filter(pk=generation_id, status=IN_PROGRESS).update(
            status="failed", error_type=HOLD_EXPIRED
        ):
            return False  # settled meanwhile
        account_id, held = Generation.objects.values_list("account_id", "held").get(pk=generation_id)
        _unreserve(account_id, held)
    return True


def _unreserve(account_id: UUID, held: Decimal) -> None:
    """Give a closed hold's amount back to the account's spendable balance (inside the caller's transaction). Rounded
    to the money columns' places: SQLite keeps decimals as doubles, where `reserved - held` could land a hair below
    zero and trip the account's CHECK constraint (on PostgreSQL's numeric it changes nothing)."""
    Account.objects.filter(pk=account_id).update(reserved=Round(F("reserved") - held, statements.PLACES))
