"""One billing service for both paths: a request's hold is its generation row, opened in one statement, and its
end is one settlement that completes that row and writes at most one ledger entry (the charge), in one statement
on PostgreSQL: a successful request writes exactly 2 rows, a failed one 1 (its record) and no ledger entry."""

from decimal import Decimal

import pytest
from django.conf import settings
from django.db import DatabaseError, connection
from django.test.utils import CaptureQueriesContext

from gateway.billing import services
from gateway.billing.generations import GenerationRecord
from gateway.billing.models import IN_PROGRESS, EntryKind, Generation, LedgerEntry
from gateway.billing.services import credits_reserve, generation_settle
from gateway.billing.statements import statements_prepare
from tests.billing.books import assert_books, rows
from tests.support import point_provider

PROVIDERS = ["standin-chat", "standin-responses", "standin-anthropic"]


def ask(client, *, stream=False):
    payload = {"model": "standin/echo", "input": "Hello", "provider": {"sort": "price"}, "stream": stream}
    response = client.post("/api/v1/responses", payload, format="json")
    if response.streaming:
        response.raw = b"".join(response.streaming_content)  # the settlement runs as the stream ends
    return response


def settlements(generation_id: str) -> list[str]:
    return sorted(LedgerEntry.objects.filter(generation_id=generation_id).values_list("kind", flat=True))


@pytest.fixture
def billing_statements(monkeypatch) -> dict[str, list[int]]:
    """The SQL statements each billing call of a request ran, by call ("hold", "settle")."""
    counted: dict[str, list[int]] = {"hold": [], "settle": []}

    def counting(name, function):
        def wrapper(**kwargs):
            with CaptureQueriesContext(connection) as queries:
                result = function(**kwargs)
            counted[name].append(len(queries))
            return result

        return wrapper

    monkeypatch.setattr(services, "credits_reserve", counting("hold", services.credits_reserve))
    monkeypatch.setattr(services, "generation_settle", counting("settle", services.generation_settle))
    return counted


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_a_successful_request_writes_two_rows(alice, standin_catalog, billing_statements, stream):
    before = rows()
    response = ask(alice.client(), stream=stream)
    assert response.status_code == 200
    gen_id = response["X-Generation-Id"]
    # Then two rows: its generation record and one charge, nothing else in the ledger
    assert rows() - before == 2
    record = Generation.objects.get(pk=gen_id)
    assert settlements(gen_id) == [EntryKind.CHARGE]
    charge = LedgerEntry.objects.get(generation_id=gen_id)
    assert -charge.amount == record.cost > 0 and record.status == "completed" and record.streamed is stream
    assert 0 < record.cost <= record.held
    if not stream:
        assert response.json()["usage"]["cost"] == float(record.cost)
    account = assert_books(alice.account_id)
    assert (account.balance, account.reserved) == (Decimal(10) - record.cost, 0)
    # And, on PostgreSQL, one statement to hold and one to settle
    if connection.vendor == "postgresql":
        assert billing_statements == {"hold": [1], "settle": [1]}


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_a_failed_request_releases_its_hold_and_writes_no_ledger_entry(alice, standin_catalog, stream):
    for slug in PROVIDERS:
        point_provider(slug, standin_catalog, "status=500")
    before = rows()
    response = ask(alice.client(), stream=stream)
    assert response.status_code == 502  # before the first byte: a stream fails as JSON does
    record = Generation.objects.get(pk=response["X-Generation-Id"])
    assert (record.status, record.cost) == ("failed", 0) and record.held > 0
    assert rows() - before == 1 and settlements(record.id) == []
    account = assert_books(alice.account_id)
    assert (account.balance, account.reserved) == (Decimal(10), 0)


def test_a_cut_stream_settles_once_with_its_record(alice, standin_catalog):
    for slug in PROVIDERS:
        point_provider(slug, standin_catalog, "cut_after=3,chunks=6,text=abcdefghijklmnopqrstuvwxyz0123456789")
    response = ask(alice.client(), stream=True)
    assert b"response.failed" in response.raw
    gen_id = response["X-Generation-Id"]
    record = Generation.objects.get(pk=gen_id)
    assert record.status == "failed" and record.tokens_output > 0
    assert settlements(gen_id) == [EntryKind.CHARGE]
    assert -LedgerEntry.objects.get(generation_id=gen_id, kind=EntryKind.CHARGE).amount == record.cost > 0
    assert Generation.objects.filter(account_id=alice.account_id).count() == 1
    assert assert_books(alice.account_id).reserved == 0


FAIL_AT_COMMIT = """
CREATE OR REPLACE FUNCTION pipeline_test_refuse() RETURNS trigger AS $$
BEGIN RAISE EXCEPTION 'record refused'; END $$ LANGUAGE plpgsql;
CREATE CONSTRAINT TRIGGER pipeline_test_refuse AFTER UPDATE ON billing_generation
DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION pipeline_test_refuse();
"""


@pytest.mark.django_db(transaction=True)
def test_a_failed_record_write_rolls_the_settlement_back(alice):
    if connection.vendor != "postgresql":
        pytest.skip("a deferred trigger is PostgreSQL's")
    reservation = credits_reserve(account_id=alice.account_id, amount=Decimal("1"))
    record = GenerationRecord(
        id=reservation.id,
        account_id=alice.account_id,
        api_key_id=None,
        workspace_id=None,
        requested_model="standin/echo",
        cost=Decimal("0.25"),
    )
    with connection.cursor() as cursor:
        cursor.execute(FAIL_AT_COMMIT)  # fails at commit: after the settlement's statement ran
    try:
        with pytest.raises(DatabaseError, match="record refused"):
            generation_settle(reservation=reservation, record=record, charge=True)
    finally:
        with connection.cursor() as cursor:
            cursor.execute(
                "DROP TRIGGER pipeline_test_refuse ON billing_generation; DROP FUNCTION pipeline_test_refuse();"
            )
    assert Generation.objects.get(pk=record.id).status == IN_PROGRESS
    assert settlements(record.id) == []
    account = assert_books(alice.account_id)
    assert (account.balance, account.reserved) == (Decimal("10"), Decimal("1"))  # still held, nothing charged

    charged = generation_settle(reservation=reservation, record=record, charge=True)
    assert charged == Decimal("0.25") and Generation.objects.get(pk=record.id).cost == charged
    assert settlements(record.id) == [EntryKind.CHARGE]
    account = assert_books(alice.account_id)
    assert (account.balance, account.reserved) == (Decimal("9.75"), 0)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="prepared statements are PostgreSQL's")
def test_the_hold_and_the_settlement_run_as_prepared_statements(alice, standin_catalog):
    # Given two requests on one connection
    for _ in range(2):
        assert ask(alice.client()).status_code == 200
    # Then PostgreSQL holds one prepared statement for the hold and one for the settlement, parsed once each
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        prepared = [row[0] for row in cursor.fetchall()]
    assert sum("SET reserved = reserved +" in text for text in prepared) == 1
    assert sum("INSERT INTO billing_ledgerentry" in text for text in prepared) == 1


@pytest.mark.skipif(connection.vendor != "postgresql", reason="prepared statements are PostgreSQL's")
def test_a_workers_warm_up_prepares_the_statements_requests_then_use_and_changes_nothing(alice, standin_catalog):
    def prepared() -> list[str]:
        with connection.cursor() as cursor:
            cursor.execute("SELECT statement FROM pg_prepared_statements")
            return [row[0] for row in cursor.fetchall()]

    # Given a connection as a worker's warm-up prepares it (gateway/wsgi.py, on each pooled connection)
    connection.ensure_connection()
    books = assert_books(alice.account_id)
    statements_prepare(connection.connection)
    # Then the hold and the settlement are prepared, and nothing changed: no generation, no ledger entry, same books
    assert sum("SET reserved = reserved +" in text for text in prepared()) == 1
    assert sum("INSERT INTO billing_ledgerentry" in text for text in prepared()) == 1
    assert not Generation.objects.exists() and not LedgerEntry.objects.filter(kind=EntryKind.CHARGE).exists()
    after = assert_books(alice.account_id)
    assert (after.balance, after.reserved) == (books.balance, books.reserved)
    # And a JSON request on that connection runs them as they are: same text, same parameter types
    assert ask(alice.client()).status_code == 200
    assert len(prepared()) == 2  # (psycopg would prepare another variant for other parameter types)
    assert LedgerEntry.objects.filter(kind=EntryKind.CHARGE).count() == 1


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the WAL is PostgreSQL's")
@pytest.mark.parametrize("limited", [False, True], ids=["plain", "key-limit"])
def test_a_hold_does_not_wait_for_the_disk_and_a_settlement_does(transactional_db, alice, limited):
    from gateway.accounts.models import ApiKey

    key = alice.provisioned.inference_key.key
    if limited:
        ApiKey.objects.filter(pk=key.pk).update(limit=Decimal(5))

    def wal_syncs() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_stat_force_next_flush()")
            cursor.execute("SELECT wal_sync FROM pg_stat_wal")
            return cursor.fetchone()[0]

    before = wal_syncs()
    holds = [
        credits_reserve(account_id=alice.account_id, api_key_id=key.pk, key_has_limit=limited, amount=Decimal("0.01"))
        for _ in range(10)
    ]
    held = wal_syncs() - before
    for hold in holds:
        record = GenerationRecord(
            id=hold.id,
            account_id=alice.account_id,
            api_key_id=key.pk,
            workspace_id=None,
            requested_model="m",
            cost=Decimal("0.001"),
        )
        generation_settle(reservation=hold, record=record, charge=True)
    settled = wal_syncs() - before - held
    assert held < 3 and settled >= 10  # (the WAL writer also flushes now and then on its own)
    assert_books(alice.account_id)


def _prepared() -> bool:
    # From the settings: the cursor binds on the server only where psycopg is told to prepare
    options = settings.DATABASES["default"].get("OPTIONS", {})
    return connection.vendor == "postgresql" and options.get("prepare_threshold") is not None


@pytest.mark.skipif(not _prepared(), reason="prepared statements are PostgreSQL's")
@pytest.mark.django_db(transaction=True)
def test_the_hold_and_the_settlement_bind_on_the_server_on_djangos_connection_in_its_wrapper(alice, standin_catalog):
    from psycopg import ClientCursor, Cursor

    client = alice.client()
    assert ask(client).status_code == 200  # the key and the catalog are cached now
    ran: list[tuple[str, type]] = []

    def counting(execute, sql, params, many, context):
        ran.append((sql.split("(", 1)[0].split()[0], type(context["cursor"].cursor)))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(counting):
        response = ask(client)
    assert response.status_code == 200
    # Then two statements (the hold's WITH, the settlement's WITH), seen by Django's execute wrappers as any cursor's,
    # each on psycopg's server-binding cursor (the ORM's cursors bind on the client: never prepared)
    billing = [(verb, kind) for verb, kind in ran if verb == "WITH"]
    assert billing == [("WITH", Cursor), ("WITH", Cursor)]
    assert all(kind is ClientCursor or issubclass(kind, ClientCursor) for verb, kind in ran if verb != "WITH")
    record = Generation.objects.get(pk=response["X-Generation-Id"])
    assert record.status == "completed" and settlements(record.id) == [EntryKind.CHARGE]


@pytest.mark.skipif(not _prepared(), reason="prepared statements are PostgreSQL's")
@pytest.mark.django_db(transaction=True)
def test_a_failing_prepared_statement_is_djangos_error_and_the_connection_serves_the_next():
    from gateway.dbpool import prepared_cursor

    with pytest.raises(DatabaseError, match="division by zero"), prepared_cursor() as cursor:
        cursor.execute("SELECT 1 / %(zero)s", {"zero": 0})
    with prepared_cursor() as cursor:
        cursor.execute("SELECT %(one)s + 1", {"one": 1})
        assert cursor.fetchone() == (2,)


@pytest.mark.skipif(not _prepared(), reason="prepared statements are PostgreSQL's")
@pytest.mark.django_db(transaction=True)
def test_inside_a_transaction_whose_connection_was_closed_a_statement_is_refused_not_run_apart():
    from django.db import ProgrammingError, transaction

    from gateway.dbpool import prepared_cursor

    with pytest.raises(ProgrammingError, match="atomic block"), transaction.atomic():
        connection.ensure_connection()
        connection.close()  # the pool takes the connection back; the transaction is gone with it
        with prepared_cursor() as cursor:  # a new connection here would run it on its own, outside the transaction
            cursor.execute("SELECT 1")
