"""Database outages (issue 28, item 6): a settlement the database did not take is run again once it answers (the
usage known then charged, once; a request without usage has its hold released), and the stale-hold sweep's default
age is the longest request deadline plus a margin, not 6 hours. The outage here is a statement that fails as a lost
connection does (an execute wrapper); tests/gateway/test_db_outage_live.py cuts a real gateway's database."""

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import OperationalError, connection
from django.utils import timezone
from psycopg_pool import PoolTimeout

from gateway.billing import settle_retry
from gateway.billing.generations import GenerationRecord
from gateway.billing.models import IN_PROGRESS, EntryKind, Generation, LedgerEntry
from gateway.billing.services import (
    HOLD_EXPIRED,
    ReservationHandle,
    credits_reserve,
    generation_settle,
    hold_drop,
    holds_drop,
    longest_request_seconds,
    stale_hold_seconds,
)
from tests.billing.books import assert_books


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def retries(monkeypatch) -> Iterator[tuple[settle_retry.SettlementRetries, Clock]]:
    """The process's retry queue, run by the test (no thread) on a clock it moves."""
    clock = Clock()
    queue = settle_retry.SettlementRetries(max_pending=100, window_seconds=600, clock=clock, autostart=False)
    monkeypatch.setattr(settle_retry, "RETRIES", queue)
    yield queue, clock


@contextmanager
def database_down(*, after_running: bool = False) -> Iterator[None]:
    """Every statement fails as on a lost connection: before it runs, or (`after_running`) once it ran, its answer
    lost on the way back."""

    def lost(execute, sql, params, many, context):
        if after_running:
            execute(sql, params, many, context)
        raise OperationalError("server closed the connection unexpectedly")

    with connection.execute_wrapper(lost):
        yield


def served(hold: ReservationHandle, *, cost: str) -> GenerationRecord:
    return GenerationRecord(
        id=hold.id,
        account_id=hold.account_id,
        api_key_id=hold.api_key_id,
        workspace_id=None,
        requested_model="standin/echo",
        status="completed",
        tokens_input=10,
        tokens_output=20,
        cost=Decimal(cost),
    )


def failed(hold: ReservationHandle) -> GenerationRecord:
    return GenerationRecord(
        id=hold.id,
        account_id=hold.account_id,
        api_key_id=hold.api_key_id,
        workspace_id=None,
        requested_model="standin/echo",
        status="failed",
        error_type="server_error",
    )


def charges(generation_id: str) -> int:
    return LedgerEntry.objects.filter(generation_id=generation_id, kind=EntryKind.CHARGE).count()


def test_a_settlement_the_database_did_not_take_is_charged_once_it_answers(alice, retries):
    queue, clock = retries
    # Given a request's hold, and its settlement (usage known) failing: the database is down
    hold = credits_reserve(account_id=alice.account_id, amount=Decimal("2"))
    with database_down(), pytest.raises(OperationalError):
        generation_settle(reservation=hold, record=served(hold, cost="0.75"), charge=True)
    assert Generation.objects.get(pk=hold.id).status == IN_PROGRESS
    # When it is retried while still down, then after it answers again
    clock.now += 1
    with database_down():
        queue.run_due()
    assert Generation.objects.get(pk=hold.id).status == IN_PROGRESS and len(queue) == 1
    clock.now += 10
    queue.run_due()
    # Then the usage known at the time is charged, once, and the hold is closed
    generation = Generation.objects.get(pk=hold.id)
    assert (generation.status, generation.cost, generation.tokens_output) == ("completed", Decimal("0.75"), 20)
    assert charges(hold.id) == 1 and len(queue) == 0
    account = assert_books(alice.account_id)
    assert (account.balance, account.reserved) == (Decimal("9.25"), 0)


def test_a_settlement_whose_answer_was_lost_is_not_charged_twice(alice, retries):
    queue, clock = retries
    # Given a settlement that ran, but whose answer never came back (the connection died after the commit)
    hold = credits_reserve(account_id=alice.account_id, amount=Decimal("2"))
    with database_down(after_running=True), pytest.raises(OperationalError):
        generation_settle(reservation=hold, record=served(hold, cost="0.75"), charge=True)
    # When its retry runs
    clock.now += 10
    queue.run_due()
    # Then it is charged once (the retry found the hold closed)
    assert charges(hold.id) <= 1 and len(queue) == 0
    generation_settle(reservation=hold, record=served(hold, cost="0.75"), charge=True)  # and a late one: nothing
    assert charges(hold.id) == 1
    account = assert_books(alice.account_id)
    assert (account.balance, account.reserved) == (Decimal("9.25"), 0)


def test_the_hold_of_a_request_without_usage_is_released_once_the_database_answers(alice, retries):
    queue, clock = retries
    hold = credits_reserve(account_id=alice.account_id, amount=Decimal("2"))
    with database_down(), pytest.raises(OperationalError):
        generation_settle(reservation=hold, record=failed(hold), charge=False)
    clock.now += 10
    queue.run_due()
    generation = Generation.objects.get(pk=hold.id)
    assert (generation.status, generation.error_type, generation.cost) == ("failed", "server_error", 0)
    assert charges(hold.id) == 0
    account = assert_books(alice.account_id)
    assert (account.balance, account.reserved) == (Decimal("10"), 0)


def test_the_first_settlement_of_a_request_is_the_one_retried(alice, retries):
    queue, clock = retries
    # Given a settlement with usage that failed, then the failure handler's release of the same hold failing too
    hold = credits_reserve(account_id=alice.account_id, amount=Decimal("2"))
    with database_down():
        with pytest.raises(OperationalError):
            generation_settle(reservation=hold, record=served(hold, cost="0.5"), charge=True)
        with pytest.raises(OperationalError):
            generation_settle(reservation=hold, record=failed(hold), charge=False)
    assert len(queue) == 1
    clock.now += 10
    queue.run_due()
    # Then the usage is charged (the release changes nothing)
    assert Generation.objects.get(pk=hold.id).status == "completed" and charges(hold.id) == 1
    assert assert_books(alice.account_id).balance == Decimal("9.5")


def test_a_side_calls_hold_the_database_did_not_drop_is_dropped_once_it_answers(alice, retries):
    queue, clock = retries
    # Given a fusion panel's hold (a hold of its own, not a request), its drop failing: the database is down
    panel = credits_reserve(account_id=alice.account_id, amount=Decimal("1.5"))
    with database_down(), pytest.raises(OperationalError):
        hold_drop(panel)
    assert assert_books(alice.account_id).reserved == Decimal("1.5")
    # When the database answers again, then the hold is given back and its row removed
    clock.now += 10
    queue.run_due()
    assert not Generation.objects.filter(pk=panel.id).exists()
    assert assert_books(alice.account_id).reserved == 0


def test_every_side_hold_the_database_did_not_drop_is_queued_not_only_the_first(alice, retries):
    queue, clock = retries
    # Given three side calls' holds of a request (a panel, a moderation engine, an entity model) given back while the
    # database is down (a settlement's `finally`, a refused request's charge)
    holds = [credits_reserve(account_id=alice.account_id, amount=Decimal("1")) for _ in range(3)]
    with database_down(), pytest.raises(OperationalError):
        holds_drop(holds)
    # Then every one of them waits for the database, not only the first (the loop went on past its error)
    assert len(queue) == 3
    # When it answers again, then all three are given back
    clock.now += 10
    queue.run_due()
    assert not Generation.objects.filter(pk__in=[hold.id for hold in holds]).exists()
    assert assert_books(alice.account_id).reserved == 0


def test_a_hold_whose_answer_was_lost_is_released_once_the_database_answers(alice, retries):
    queue, clock = retries
    # Given a request's hold that the database took but whose answer never came back (a statement the client gave
    # up on, gateway/pgwait.py, run by the server once it thawed): the request is answered 503, it never settles
    with database_down(after_running=True), pytest.raises(OperationalError):
        credits_reserve(account_id=alice.account_id, amount=Decimal("2"), generation_id="lost-hold")
    # When the database answers again, then the hold is released (had it not been taken, nothing changes)
    clock.now += 10
    queue.run_due()
    assert not Generation.objects.filter(pk="lost-hold", status=IN_PROGRESS).exists() and len(queue) == 0
    assert charges("lost-hold") == 0
    account = assert_books(alice.account_id)
    assert (account.balance, account.reserved) == (Decimal("10"), 0)


def test_a_hold_that_got_no_connection_is_not_queued(alice, retries):
    queue, _ = retries

    def no_connection(execute, sql, params, many, context):
        raise OperationalError("couldn't get a connection after 5.00 sec") from PoolTimeout("pool timeout")

    # Given a request that got no connection from the pool (its hold never ran), then nothing waits to release it
    with connection.execute_wrapper(no_connection), pytest.raises(OperationalError):
        credits_reserve(account_id=alice.account_id, amount=Decimal("2"), generation_id="no-connection")
    assert len(queue) == 0 and assert_books(alice.account_id).reserved == 0


def test_retries_stop_after_their_window_and_leave_the_hold_to_the_sweep(alice, retries):
    queue, clock = retries
    hold = credits_reserve(account_id=alice.account_id, amount=Decimal("2"))
    with database_down():
        with pytest.raises(OperationalError):
            generation_settle(reservation=hold, record=served(hold, cost="0.5"), charge=True)
        for _ in range(200):  # backing off: at most every 5 s
            clock.now += 5
            queue.run_due()
    assert len(queue) == 0  # given up after 600 s
    assert Generation.objects.get(pk=hold.id).status == IN_PROGRESS
    assert assert_books(alice.account_id).reserved == Decimal("2")


def test_the_retry_queue_is_bounded(alice, retries):
    queue, _ = retries
    queue.max_pending = 2
    assert [settle_retry.settle_later(str(n), lambda: None) for n in range(3)] == [True, True, False]
    assert len(queue) == 2


def test_the_sweep_by_default_releases_holds_older_than_the_longest_request_plus_a_margin(alice):
    # Given the defaults: 30-minute streams, settlements retried for 10 minutes
    assert longest_request_seconds() == 1800 and stale_hold_seconds() == 1800 + 600 + 900
    # And a hold stranded an hour ago (a killed worker), and one of a request still streaming (40 minutes old)
    stranded = credits_reserve(account_id=alice.account_id, amount=Decimal("3"))
    streaming = credits_reserve(account_id=alice.account_id, amount=Decimal("2"))
    Generation.objects.filter(pk=stranded.id).update(created_at=timezone.now() - timedelta(hours=1))
    Generation.objects.filter(pk=streaming.id).update(created_at=timezone.now() - timedelta(minutes=40))
    # When the sweep runs with its default age
    out = StringIO()
    call_command("release_stale_reservations", stdout=out)
    # Then the stranded hold is released, the live one kept
    assert "released 1 stale holds" in out.getvalue()
    assert Generation.objects.get(pk=stranded.id).error_type == HOLD_EXPIRED
    assert Generation.objects.get(pk=streaming.id).status == IN_PROGRESS
    assert assert_books(alice.account_id).reserved == Decimal("2")


def test_the_sweep_refuses_an_age_that_would_release_live_requests(alice):
    live = credits_reserve(account_id=alice.account_id, amount=Decimal("2"))
    Generation.objects.filter(pk=live.id).update(created_at=timezone.now() - timedelta(minutes=20))
    with pytest.raises(CommandError, match="would release the holds of live requests"):
        call_command("release_stale_reservations", "--older-than-minutes", "10", stdout=StringIO())
    assert Generation.objects.get(pk=live.id).status == IN_PROGRESS


def test_a_settlement_that_takes_over_a_side_calls_hold_is_retried_with_it(alice, retries):
    queue, clock = retries
    # Given a request that ran a fusion tool (its panel held 6 of alice's 10 USD) and holds 3 itself, so the
    # balance beside the two holds is 1 USD; its settlement (7.5 USD: the panel's 5.5 and its own 2, which the two
    # holds together cover) fails: the database is down
    panel = credits_reserve(account_id=alice.account_id, amount=Decimal("6"))
    hold = credits_reserve(account_id=alice.account_id, amount=Decimal("3"))
    with database_down(), pytest.raises(OperationalError):
        generation_settle(reservation=hold, record=served(hold, cost="7.5"), charge=True, replacing=(panel,))
    # When the database answers again and the settlement is retried
    clock.now += 10
    queue.run_due()
    # Then it is charged in full (the panel's hold given back in the same transaction, not charged down to the
    # balance beside it), and the panel's hold is closed with it
    assert Generation.objects.get(pk=hold.id).cost == Decimal("7.5") and charges(hold.id) == 1
    assert not Generation.objects.filter(pk=panel.id).exists() and len(queue) == 0
    account = assert_books(alice.account_id)
    assert (account.balance, account.reserved) == (Decimal("2.5"), 0)
    # And settling again (a late settlement, a second retry) charges and gives back nothing more
    assert generation_settle(reservation=hold, record=served(hold, cost="7.5"), charge=True, replacing=(panel,)) == 0
    queue.run_due()
    assert charges(hold.id) == 1
    assert (assert_books(alice.account_id).balance, assert_books(alice.account_id).reserved) == (Decimal("2.5"), 0)


def test_a_side_calls_settlement_cut_midway_is_retried_whole(alice, retries):
    queue, clock = retries
    # Given a settlement taking over a panel's hold whose connection died after its first statement ran (the
    # transaction rolled back: nothing of it stays, the panel's hold is not given back alone)
    panel = credits_reserve(account_id=alice.account_id, amount=Decimal("6"))
    hold = credits_reserve(account_id=alice.account_id, amount=Decimal("3"))
    with database_down(after_running=True), pytest.raises(OperationalError):
        generation_settle(reservation=hold, record=served(hold, cost="7.5"), charge=True, replacing=(panel,))
    assert Generation.objects.filter(pk=panel.id, status=IN_PROGRESS).exists()
    # When its retry runs, then it is charged once, in full, and the panel's hold given back with it
    clock.now += 10
    queue.run_due()
    assert charges(hold.id) == 1 and len(queue) == 0
    account = assert_books(alice.account_id)
    assert (account.balance, account.reserved) == (Decimal("2.5"), 0)
