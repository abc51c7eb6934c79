"""A request's hold and its settlement, each defined once as a chain of steps (billing.services runs them).

Each step is a statement that reads the rows of the steps before it by their names. On PostgreSQL the chain is
composed into ONE statement (each step a CTE of the next): one round trip, and the account row, which every request
of the account writes, is never locked across a round trip. SQLite cannot modify tables inside a WITH, so there each
step runs as its own statement in one transaction (IMMEDIATE: the settings), the rows the earlier steps returned
given back to it under the same names (`WITH hold AS (SELECT ? AS id, ...)`): the same rules, the same text, the
same order. A step that returns no row ends the chain, as on PostgreSQL where every later step would read none.

The dialects differ only in what `Dialect` words: row locks (SQLite's transaction holds the whole database's write
lock), LEAST, the time, and money arithmetic. SQLite keeps decimals as doubles, so there every amount a statement
computes is rounded to the money columns' 12 places (what Django stores for a Decimal), and `balance >= reserved >= 0`
is never tripped by a double's last bit."""

# ruff: noqa: S608 (composed of constants and the model's column names: every value is a bound parameter)

from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any
from uuid import UUID

import psycopg
from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.models import BooleanField, CharField, IntegerField, JSONField, TextField
from django.utils import timezone
from psycopg.types.json import Jsonb

from gateway.billing.generations import OUTCOME_FIELDS, GenerationRecord, generation_outcome
from gateway.billing.models import Generation
from gateway.dbpool import prepared_cursor
from gateway.renderers import json_compact

PLACES = 12  # the money columns' scale


@dataclass(frozen=True, slots=True)
class Dialect:
    postgresql: bool

    def lock(self, clause: str) -> str:
        """A row lock (PostgreSQL); SQLite's IMMEDIATE transaction already holds the database's write lock."""
        return clause if self.postgresql else ""

    def money(self, expression: str) -> str:
        return expression if self.postgresql else f"ROUND({expression}, {PLACES})"

    def least(self, a: str, b: str) -> str:
        return f"LEAST({a}, {b})" if self.postgresql else self.money(f"MIN({a}, {b})")

    def returned(self, alias: str, column: str) -> str:
        """A RETURNING column of an aliased table (SQLite's RETURNING names only the table changed, unqualified)."""
        return f"{alias}.{column}" if self.postgresql else column

    @property
    def now(self) -> str:
        """The statement's time: the transaction's start on PostgreSQL; a bound value on SQLite (as Django writes)."""
        return "now()" if self.postgresql else "%(now)s"


POSTGRESQL = Dialect(postgresql=True)
SQLITE = Dialect(postgresql=False)


@dataclass(frozen=True, slots=True)
class Step:
    name: str
    sql: str
    columns: tuple[str, ...]  # the row it hands the later steps (its RETURNING or SELECT list, by name)


@dataclass(frozen=True, slots=True)
class Chain:
    steps: tuple[Step, ...]
    result: str  # the one row the composed statement answers, from the steps' rows (PostgreSQL)


def compose(chain: Chain, *, prefix: str = "") -> str:
    """The chain as one PostgreSQL statement."""
    ctes = ", ".join(f"{step.name} AS ({step.sql})" for step in chain.steps)
    return f"WITH {prefix}{ctes}\n{chain.result}"


def run_in_steps(chain: Chain, params: dict[str, Any]) -> dict[str, tuple[Any, ...]] | None:
    """The chain on SQLite: each step in turn, in one transaction; the rows by step name, or None when a step
    returned no row (the hold not taken, the settlement already made)."""
    db = connections[DEFAULT_DB_ALIAS]
    bound = {name: _sqlite_value(value) for name, value in params.items()}
    bound["now"] = db.ops.adapt_datetimefield_value(timezone.now())
    rows: dict[str, tuple[Any, ...]] = {}
    with transaction.atomic(), db.cursor() as cursor:
        for step in chain.steps:
            earlier = [
                f"{done.name} AS (SELECT "
                + ", ".join(f"%({done.name}__{column})s AS {column}" for column in done.columns)
                + ")"
                for done in chain.steps
                if done.name in rows
            ]
            cursor.execute(f"WITH {', '.join(earlier)} {step.sql}" if earlier else step.sql, bound)
            row = cursor.fetchone()
            if row is None and step is not chain.steps[-1]:
                if rows:  # never expected (each step reads the one before): no half a hold or settlement stays
                    transaction.set_rollback(True)
                return None
            if row is None:
                return rows
            rows[step.name] = row
            bound.update({f"{step.name}__{column}": value for column, value in zip(step.columns, row, strict=True)})
    return rows


def _sqlite_value(value: Any) -> Any:
    """A parameter as SQLite compares it with the columns: a decimal as a number (Django binds it as text, which
    SQLite orders after every number), a UUID as Django stores it."""
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, UUID):
        return value.hex
    return value


def money_value(value: Any) -> Decimal:
    """An amount a statement returned (SQLite answers a double, already rounded to the columns' places)."""
    return value if isinstance(value, Decimal) else Decimal(str(value)).quantize(Decimal(1).scaleb(-PLACES))


# The hold: the account's `reserved` grows only while the spendable balance covers it (concurrent holds on the
# account row re-check the condition on its newest version, so none overdraws) and `allowed` (a key limit's check,
# on PostgreSQL), and the request's generation row opens with it.
def hold_chain(d: Dialect, *, allowed: str = "true", result: str = "") -> Chain:
    held = Step(
        "held",
        f"UPDATE accounts_account SET reserved = {d.money('reserved + %(amount)s')}"
        f" WHERE id = %(account)s AND {d.money('balance - reserved')} >= %(amount)s AND {allowed} RETURNING id",
        ("id",),
    )
    opened = Step(
        "opened",
        f"""INSERT INTO billing_generation
    (id, account_id, api_key_id, workspace_id, requested_model, model, provider, endpoint_id, upstream_id, status,
     finish_reason, error_type, tokens_input, tokens_cached, tokens_cache_write, tokens_output, tokens_reasoning,
     cost, upstream_cost, held, is_byok, streamed, cancelled, latency_ms, ttft_ms, generation_time_ms, session_id,
     service_tier, provider_responses, usage_anomaly, guardrail_flags, created_at)
SELECT %(id)s, id, %(key)s, %(workspace)s, %(model)s, '', '', NULL, '', 'in_progress', '', '', 0, 0, 0, 0, 0,
       0, 0, %(amount)s, false, false, false, NULL, NULL, NULL, '', '', '[]', NULL, NULL, {d.now}
FROM held RETURNING id""",
        ("id",),
    )
    return Chain(steps=(held, opened), result=result)


# The settlement: locks the request's row, then its account's (the lock order of the sweep too); `priced` reads the
# account's newest version (the row lock waits for a concurrent settlement, then returns the row it committed). The
# charge is the cost, down to what the balance can reach (the spendable balance plus this hold).
def _settle_chain(d: Dialect) -> Chain:
    outcome = ", ".join(f"{_OUTCOME_COLUMNS[name].column} = %({name})s" for name in OUTCOME_FIELDS)
    steps = (
        Step(
            "hold",
            "SELECT id, account_id, api_key_id, held FROM billing_generation"
            f" WHERE id = %(id)s AND status = 'in_progress' {d.lock('FOR NO KEY UPDATE')}",
            ("id", "account_id", "api_key_id", "held"),
        ),
        Step(
            "priced",
            "SELECT h.id, h.account_id, h.api_key_id, h.held,"
            f" {d.least('%(cost)s', 'a.balance - a.reserved + h.held')} AS charged"
            f" FROM accounts_account a JOIN hold h ON a.id = h.account_id {d.lock('FOR NO KEY UPDATE OF a')}",
            ("id", "account_id", "api_key_id", "held", "charged"),
        ),
        Step(
            "paid",
            f"UPDATE accounts_account AS a SET balance = {d.money('a.balance - p.charged')},"
            f" reserved = {d.money('a.reserved - p.held')} FROM priced p WHERE a.id = p.account_id"
            f" RETURNING {d.returned('a', 'id')}",
            ("id",),
        ),
        Step(
            "recorded",
            f"UPDATE billing_generation AS g SET {outcome}, cost = p.charged FROM priced p WHERE g.id = p.id"
            f" RETURNING {d.returned('g', 'id')}",
            ("id",),
        ),
        Step(
            "ledger",
            "INSERT INTO billing_ledgerentry"
            " (account_id, kind, amount, api_key_id, generation_id, is_byok, note, created_at)"
            f" SELECT account_id, 'charge', -charged, api_key_id, id, %(is_byok)s, '', {d.now} FROM priced"
            " WHERE charged > 0 RETURNING id",
            ("id",),
        ),
    )
    return Chain(steps=steps, result="SELECT charged FROM priced")


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

# A hold commits without waiting for its WAL to reach the disk (synchronous_commit off for its own transaction): a
# crash can lose only the holds of requests that die with it, and a settlement's commit, which waits, flushes the
# WAL of its hold with its own (the log is written in order). One fsync per request instead of two (0.13-0.2 ms
# of latency each here).
NO_FLUSH_WAIT = "unflushed AS (SELECT set_config('synchronous_commit', 'off', true)), "

HOLD_CHAIN = hold_chain(SQLITE)
# The result's columns: within the key's limit, its usage, its limit, whether the hold was taken.
HOLD_SQL = compose(
    hold_chain(POSTGRESQL, result="SELECT true, 0, NULL, (SELECT count(*) FROM opened) FROM unflushed"),
    prefix=NO_FLUSH_WAIT,
)

# A key limit's hold on PostgreSQL: two statements in one round trip (one implicit transaction): the key's row lock
# orders the holds of one key, and the hold statement's snapshot, taken after the lock, sees every hold and charge
# committed before it, so the limit is never overrun (one statement could not: its snapshot would predate the lock).
# NO KEY UPDATE: the foreign key checks of a concurrent settlement's ledger entry (KEY SHARE, taken while it holds the
# account row) pass it. The usage counted is selectors.key_usage_in_window's (SQLite's check, in its transaction).
_KEY_LOCK = "SELECT id FROM accounts_apikey WHERE id = %(key)s FOR NO KEY UPDATE;\n"
_KEY_LIMIT = """key AS (
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
"""
HOLD_WITHIN_LIMIT_SQL = _KEY_LOCK + compose(
    hold_chain(
        POSTGRESQL,
        allowed="(SELECT ok FROM allowed)",
        result='SELECT ok, used, "limit", (SELECT count(*) FROM opened) FROM allowed, unflushed',
    ),
    prefix=NO_FLUSH_WAIT + _KEY_LIMIT,
)


def hold_run(sql: str, params: dict[str, Any]) -> tuple[bool, Decimal, Decimal | None, int]:
    """A hold on PostgreSQL (HOLD_SQL, or HOLD_WITHIN_LIMIT_SQL): whether the key's limit allowed it, the key's
    usage, its limit, and whether it was taken."""
    # HOLD_SQL is one statement, prepared once per connection; the limit's pair of statements is sent as text (a
    # prepared statement is one statement).
    with prepared_cursor() if sql is HOLD_SQL else connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute(sql, params)
        while cursor.nextset():  # the hold's result is the last (the key lock's comes first)
            pass
        return cursor.fetchone()


SETTLE_CHAIN = _settle_chain(SQLITE)
SETTLE_SQL = compose(_settle_chain(POSTGRESQL))


def settle_params(generation_id: str, *, outcome: dict[str, Any], cost: Decimal) -> dict[str, Any]:
    """The settlement's parameters as the database takes them (on PostgreSQL, plain values as they are: psycopg
    adapts them itself)."""
    db = connections[DEFAULT_DB_ALIAS]  # once (`connection` looks it up again on every use)
    prepare: Callable[[str, Any], Any] = (
        (lambda name, value: _OUTCOME_COLUMNS[name].get_db_prep_save(value, db))
        if db.vendor != "postgresql"
        else lambda name, value: (
            value
            if value is None or type(value) is _PLAIN_COLUMNS.get(name)
            else Jsonb(value, dumps=json_compact)
            if name in _JSON_COLUMNS
            else _OUTCOME_COLUMNS[name].get_db_prep_save(value, db)
        )
    )
    params = {name: prepare(name, value) for name, value in outcome.items()}
    return {**params, "id": generation_id, "cost": cost}


def settle_run(params: dict[str, Any]) -> Decimal | None:
    """The settlement: what was charged, or None when the hold was already closed."""
    if connections[DEFAULT_DB_ALIAS].vendor != "postgresql":
        rows = run_in_steps(SETTLE_CHAIN, params)
        return None if rows is None else money_value(rows["priced"][-1])
    with prepared_cursor() as cursor:
        cursor.execute(SETTLE_SQL, params)
        row = cursor.fetchone()
    return None if row is None else row[0]


NO_ROW = UUID(int=0)  # no account has it; no key has id 0, no generation "0" (generation_id_new)


def statements_prepare(conn: psycopg.Connection) -> None:
    """Run a request's hold and settlement statements once on one of the pool's PostgreSQL connections, changing
    nothing (they name no existing account or generation): psycopg prepares them as the connection's
    prepare_threshold says (as for a request's), and a new server process has them planned and its tables' catalog
    entries loaded before the first burst of requests rather than during it (gateway/wsgi.py warm_up). The same
    statement text as the requests' own, with a JSON request's parameter types (psycopg prepares a variant per
    parameter types: an int's size, a None where a stream has a number)."""
    record = GenerationRecord(  # the values typed as a JSON request's are
        id="0",
        account_id=NO_ROW,
        api_key_id=0,
        workspace_id=NO_ROW,
        requested_model="",
        endpoint_id=0,
        latency_ms=0,
    )
    zero = Decimal(0).quantize(Decimal(1).scaleb(-PLACES))
    hold = {"id": "0", "account": NO_ROW, "key": 0, "workspace": NO_ROW, "model": "", "amount": zero}
    settle = settle_params("0", outcome=generation_outcome(record=record), cost=zero)
    # psycopg's Cursor binds on the server, as gateway/dbpool.py's does (a client-binding cursor is never prepared)
    with psycopg.Cursor(conn) as cursor:
        for sql, params in ((HOLD_SQL, hold), (SETTLE_SQL, settle)):
            cursor.execute(sql, params)
            while cursor.nextset():
                pass
