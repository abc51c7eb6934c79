"""Credit movements. The balance changes only together with its ledger entry (a top-up, a refund, a request's
one charge), so it always equals the ledger's sum. A request's credit hold is not in the ledger: it is the
request's own generation row (status `in_progress`, `held`) plus the account's `reserved` (the sum of its open
holds). On PostgreSQL a hold opens in ONE statement (a key with a limit adds its row lock, in the same round
trip) and settles in ONE statement, so the account row, which every request of the account writes, is never
locked across a round trip; elsewhere (SQLite) the same steps run in a transaction. `balance >= reserved >= 0`
is a database constraint: no hold or charge overdraws, whatever races happen above it."""

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Context, Decimal
from typing import Any
from uuid import UUID

import psycopg
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction
from django.db.models import (
    BooleanField,
    Case,
    CharField,
    DecimalField,
    F,
    IntegerField,
    JSONField,
    Q,
    Sum,
    TextField,
    Value,
    When,
)
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone
from psycopg.types.json import Jsonb
from psycopg_pool import PoolTimeout

from gateway.accounts.models import Account, ApiKey, Member, Workspace
from gateway.billing.generations import OUTCOME_FIELDS, GenerationRecord, generation_id_new, generation_outcome
from gateway.billing.models import IN_PROGRESS, EntryKind, Generation, KeyUsageDay, LedgerEntry, UsageRollupMark
from gateway.billing.selectors import key_open_holds, key_usage_in_window, window_starts
from gateway.billing.settle_retry import DATABASE_UNREACHABLE, settle_later
from gateway.dbpool import prepared_cursor
from gateway.errors import GatewayError, PaymentRequired
from gateway.renderers import json_compact

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
    if connection.vendor != "postgresql":
        _hold_in_transaction(hold, check_limit=check_limit)
    elif check_limit:
        _hold_in_one_statement(HOLD_WITHIN_LIMIT_SQL, {**hold, **window_starts(), "lifetime": _LIFETIME})
    else:
        _hold_in_one_statement(HOLD_SQL, hold)


_OPEN_GENERATION = """
INSERT INTO billing_generation
    (id, account_id, api_key_id, workspace_id, requested_model, model, provider, endpoint_id, upstream_id, status,
     finish_reason, error_type, tokens_input, tokens_cached, tokens_cache_write, tokens_output, tokens_reasoning,
     cost, upstream_cost, held, is_byok, streamed, cancelled, latency_ms, ttft_ms, generation_time_ms, session_id,
     service_tier, provider_responses, usage_anomaly, guardrail_flags, created_at)
SELECT %(id)s, id, %(key)s, %(workspace)s, %(model)s, '', '', NULL, '', 'in_progress', '', '', 0, 0, 0, 0, 0,
       0, 0, %(amount)s, false, false, false, NULL, NULL, NULL, '', '', '[]', NULL, NULL, now()
FROM held"""

# A hold commits without waiting for its WAL to reach the disk (synchronous_commit off for its own transaction): a
# crash can lose only the holds of requests that die with it, and a settlement's commit, which waits, flushes the
# WAL of its hold with its own (the log is written in order). One fsync per request instead of two (0.13-0.2 ms
# of latency each here).
_NO_FLUSH_WAIT = "SELECT set_config('synchronous_commit', 'off', true)"

HOLD_SQL = f"""
WITH unflushed AS ({_NO_FLUSH_WAIT}),
held AS (
    UPDATE accounts_account SET reserved = reserved + %(amount)s
    WHERE id = %(account)s AND balance - reserved >= %(amount)s RETURNING id),
opened AS ({_OPEN_GENERATION} RETURNING id)
SELECT true, 0, NULL, (SELECT count(*) FROM opened) FROM unflushed
"""  # noqa: S608 (composed of constants: every value is a bound parameter)

# Two statements in one round trip (one implicit transaction): the key's row lock orders the holds of one key, and
# the hold statement's snapshot, taken after the lock, sees every hold and charge committed before it, so the limit
# is never overrun (one statement could not: its snapshot would predate the lock). NO KEY UPDATE: the foreign key
# checks of a concurrent settlement's ledger entry (KEY SHARE, taken while it holds the account row) pass it.
HOLD_WITHIN_LIMIT_SQL = f"""
SELECT id FROM accounts_apikey WHERE id = %(key)s FOR NO KEY UPDATE;
WITH unflushed AS ({_NO_FLUSH_WAIT}),
key AS (
    SELECT k."limit", k.include_byok_in_limit AS byok,
           CASE k.limit_reset WHEN 'daily' THEN %(daily)s WHEN 'weekly' THEN %(weekly)s
                              WHEN 'monthly' THEN %(monthly)s ELSE %(lifetime)s END AS since
    FROM (VALUES (1)) AS one LEFT JOIN accounts_apikey k ON k.id = %(key)s),
mark AS (
    SELECT coalesce((SELECT rolled_until FROM billing_usagerollupmark WHERE id = 1), %(lifetime)s) AS until),
used AS (
    SELECT coalesce((SELECT sum(d.spent + CASE WHEN key.byok THEN d.spent_byok ELSE 0 END) FROM billing_keyusageday d
                     WHERE d.api_key_id = %(key)s AND d.day >= (key.since AT TIME ZONE 'UTC')::date
                       AND d.day < (mark.until AT TIME ZONE 'UTC')::date), 0)
         + coalesce((SELECT -sum(e.amount) FROM billing_ledgerentry e
                     WHERE e.api_key_id = %(key)s AND e.kind = 'charge' AND (key.byok OR NOT e.is_byok)
                       AND e.created_at >= greatest(key.since, mark.until)), 0) AS total
    FROM key, mark),
open AS (
    SELECT coalesce(sum(held), 0) AS total FROM billing_generation
    WHERE api_key_id = %(key)s AND status = 'in_progress'),
allowed AS (
    SELECT key."limit" IS NULL OR used.total + open.total + %(amount)s <= key."limit" AS ok, used.total AS used,
           key."limit" FROM key, used, open),
held AS (
    UPDATE accounts_account SET reserved = reserved + %(amount)s
    WHERE id = %(account)s AND balance - reserved >= %(amount)s AND (SELECT ok FROM allowed) RETURNING id),
opened AS ({_OPEN_GENERATION} RETURNING id)
SELECT ok, used, "limit", (SELECT count(*) FROM opened) FROM allowed, unflushed
"""  # noqa: S608 (as HOLD_SQL)


def _hold_in_one_statement(sql: str, params: dict[str, Any]) -> None:
    """PostgreSQL: the account's `reserved` grows only while the spendable balance covers the hold, and the
    request's generation row opens, in one statement (concurrent holds on the account row re-check the condition
    on its newest version, so none overdraws) and one round trip."""
    # HOLD_SQL is one statement, prepared once per connection; the limit's pair of statements is sent as text.
    with prepared_cursor("hold") if sql is HOLD_SQL else connection.cursor() as cursor:
        cursor.execute(sql, params)
        while cursor.nextset():  # the hold's result is the last (the key lock's comes first)
            pass
        within_limit, used, limit, opened = cursor.fetchone()
    if not within_limit:
        raise PaymentRequired(MSG_KEY_LIMIT, metadata={"limit": float(limit), "usage": float(used)})
    if not opened:
        raise PaymentRequired(MSG_INSUFFICIENT, metadata={"required": float(params["amount"])})


def _hold_in_transaction(hold: dict[str, Any], *, check_limit: bool) -> None:
    """The same hold through the ORM, for databases other than PostgreSQL."""
    with transaction.atomic():
        if check_limit:
            _check_key_limit(api_key_id=hold["key"], amount=hold["amount"])
        balance, reserved = Account.objects.filter(pk=hold["account"]).values_list("balance", "reserved").get()
        if balance - reserved < hold["amount"]:
            raise PaymentRequired(MSG_INSUFFICIENT, metadata={"required": float(hold["amount"])})
        _account_set(hold["account"], reserved=reserved + hold["amount"])
        Generation.objects.create(
            id=hold["id"],
            account_id=hold["account"],
            api_key_id=hold["key"],
            workspace_id=hold["workspace"],
            requested_model=hold["model"],
            status=IN_PROGRESS,
            held=hold["amount"],
        )


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
    if connection.vendor == "postgresql":
        with prepared_cursor("settle") as cursor:
            cursor.execute(SETTLE_SQL, _settle_params(reservation.id, outcome=outcome, cost=cost))
            row = cursor.fetchone()
        return None if row is None else row[0]
    return _close_in_transaction(reservation, outcome=outcome, cost=cost)


def _settle_params(generation_id: str, *, outcome: dict[str, Any], cost: Decimal) -> dict[str, Any]:
    db = connections[DEFAULT_DB_ALIAS]  # once (`connection` looks it up again on every use)
    params: dict[str, Any] = {
        name: value
        if value is None or type(value) is _PLAIN_COLUMNS.get(name)
        else Jsonb(value, dumps=json_compact)
        if name in _JSON_COLUMNS
        else _OUTCOME_COLUMNS[name].get_db_prep_save(value, db)
        for name, value in outcome.items()
    }
    return {**params, "id": generation_id, "cost": cost}


NO_ROW = UUID(int=0)  # no account has it; no key has id 0, no generation "0" (generation_id_new)


def statements_prepare(conn: psycopg.Connection) -> None:
    """Prepare a request's hold and settlement statements on one of the pool's PostgreSQL connections, changing
    nothing (they name no existing account or generation): a new server process then has them planned and its
    tables' catalog entries loaded before the first burst of requests rather than during it (gateway/wsgi.py
    warm_up). The same statement text as the requests' own, with a JSON request's parameter types (psycopg
    prepares a variant per parameter types: an int's size, a None where a stream has a number)."""
    record = GenerationRecord(  # the values typed as a JSON request's are
        id="0",
        account_id=NO_ROW,
        api_key_id=0,
        workspace_id=NO_ROW,
        requested_model="",
        endpoint_id=0,
        latency_ms=0,
    )
    hold = {"id": "0", "account": NO_ROW, "key": 0, "workspace": NO_ROW, "model": "", "amount": _usd(Decimal(0))}
    settle = _settle_params("0", outcome=generation_outcome(record=record), cost=_usd(Decimal(0)))
    with psycopg.Cursor(conn) as cursor:
        for sql, params in ((HOLD_SQL, hold), (SETTLE_SQL, settle)):
            cursor.execute(sql, params, prepare=True)
            while cursor.nextset():
                pass


_OUTCOME_COLUMNS = {field.name: field for field in Generation._meta.concrete_fields if field.name in OUTCOME_FIELDS}
# JSON columns with the standard encoder (the field's default): their values are plain JSON values.
_JSON_COLUMNS = frozenset(
    name for name, column in _OUTCOME_COLUMNS.items() if isinstance(column, JSONField) and column.encoder is None
)
# Columns whose values psycopg takes as they are when of this exact type (JSON and decimal columns are prepared).
_PLAIN_COLUMNS: dict[str, type] = {
    name: str if isinstance(column, CharField | TextField) else bool if isinstance(column, BooleanField) else int
    for name, column in _OUTCOME_COLUMNS.items()
    if isinstance(column, CharField | TextField | IntegerField | BooleanField)
}


def _settle_sql() -> str:
    outcome = ", ".join(f"{_OUTCOME_COLUMNS[name].column} = %({name})s" for name in OUTCOME_FIELDS)
    return f"""
WITH hold AS (
    SELECT id, account_id, api_key_id, held FROM billing_generation
    WHERE id = %(id)s AND status = 'in_progress' FOR NO KEY UPDATE),
priced AS (
    SELECT h.id, h.account_id, h.api_key_id, h.held, LEAST(%(cost)s, a.balance - a.reserved + h.held) AS charged
    FROM accounts_account a JOIN hold h ON a.id = h.account_id FOR NO KEY UPDATE OF a),
paid AS (
    UPDATE accounts_account a SET balance = a.balance - p.charged, reserved = a.reserved - p.held
    FROM priced p WHERE a.id = p.account_id RETURNING a.id),
recorded AS (
    UPDATE billing_generation g SET {outcome}, cost = p.charged FROM priced p WHERE g.id = p.id RETURNING g.id),
ledger AS (
    INSERT INTO billing_ledgerentry (account_id, kind, amount, api_key_id, generation_id, is_byok, note, created_at)
    SELECT account_id, 'charge', -charged, api_key_id, id, %(is_byok)s, '', now() FROM priced WHERE charged > 0
    RETURNING id)
SELECT charged FROM priced
"""  # noqa: S608 (column names from the model: every value is a bound parameter)


# Locks the request's row, then its account's (the lock order of the sweep too); `priced` reads the account's
# newest version (the row lock waits for a concurrent settlement, then returns the row it committed).
SETTLE_SQL = _settle_sql()


def _close_in_transaction(reservation: ReservationHandle, *, outcome: dict[str, Any], cost: Decimal) -> Decimal | None:
    """The same settlement through the ORM, for databases other than PostgreSQL."""
    with transaction.atomic():
        # Claiming the row first (the status change) makes this the one close of the hold.
        if not Generation.objects.filter(pk=reservation.id, status=IN_PROGRESS).update(status=outcome["status"]):
            return None
        account_id, api_key_id, held = Generation.objects.values_list("account_id", "api_key_id", "held").get(
            pk=reservation.id
        )
        account = Account.objects.select_for_update().filter(pk=account_id)
        balance, reserved = account.values_list("balance", "reserved").get()
        charged = min(cost, balance - reserved + held)
        _account_set(account_id, balance=balance - charged, reserved=reserved - held)
        Generation.objects.filter(pk=reservation.id).update(**outcome, cost=charged)
        if charged:
            LedgerEntry.objects.create(
                account_id=account_id,
                kind=EntryKind.CHARGE,
                amount=-charged,
                api_key_id=api_key_id,
                generation_id=reservation.id,
                is_byok=outcome["is_byok"],
            )
    return charged


# A day is summed once it is this far behind: a settlement stamps its charge with its statement's start, so one still
# committing at midnight lands on the day before; none takes minutes.
ROLLUP_MARGIN = timedelta(minutes=10)


def key_usage_roll_up(*, now: datetime | None = None) -> int:
    """Sum each finished UTC day's charges per key into KeyUsageDay and move the rollup mark past it, a day per
    transaction (a key limit's check then reads a row per day instead of a row per request). From the day of the
    first charge on the first run; run it from the same cron job as the stale-hold sweep. Returns the days summed."""
    last = (now or timezone.now()) - ROLLUP_MARGIN
    today = last.replace(hour=0, minute=0, second=0, microsecond=0)
    days = 0
    while True:
        with transaction.atomic():
            mark = UsageRollupMark.objects.select_for_update().filter(pk=1).first()
            start = mark.rolled_until if mark else _first_charge_day()
            if start is None or start >= today:
                return days
            end = start + timedelta(days=1)
            charges = Q(kind=EntryKind.CHARGE, created_at__gte=start, created_at__lt=end, api_key__isnull=False)
            sums = (
                LedgerEntry.objects.filter(charges)
                .values("api_key_id")
                .annotate(
                    spent=Coalesce(
                        Sum("amount", filter=Q(is_byok=False)), Value(Decimal(0)), output_field=_MONEY_FIELD
                    ),
                    byok=Coalesce(Sum("amount", filter=Q(is_byok=True)), Value(Decimal(0)), output_field=_MONEY_FIELD),
                )
            )
            KeyUsageDay.objects.bulk_create(
                KeyUsageDay(
                    api_key_id=row["api_key_id"], day=start.date(), spent=-row["spent"], spent_byok=-row["byok"]
                )
                for row in sums
            )
            UsageRollupMark.objects.update_or_create(pk=1, defaults={"rolled_until": end})
            days += 1


def _first_charge_day() -> datetime | None:
    first = (
        LedgerEntry.objects.filter(kind=EntryKind.CHARGE).order_by("created_at").values_list("created_at", flat=True)
    )
    found = first.first()
    return found.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0) if found else None


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
    """Give a closed hold's amount back to the account's spendable balance (inside the caller's transaction)."""
    if connection.vendor == "postgresql":
        Account.objects.filter(pk=account_id).update(reserved=F("reserved") - held)
    else:
        reserved = Account.objects.filter(pk=account_id).values_list("reserved", flat=True).get()
        _account_set(account_id, reserved=reserved - held)


def _account_set(account_id: UUID, **amounts: Decimal) -> None:
    """Write an account's new balance and/or reserved amount whole, computed in Decimal under the transaction's
    lock (databases other than PostgreSQL: SQLite keeps decimals as floats, where `reserved - held` done in SQL
    can land a hair below zero, or below the balance, and trip the account's CHECK constraint)."""
    Account.objects.filter(pk=account_id).update(**{name: _usd(value) for name, value in amounts.items()})
