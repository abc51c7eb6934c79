"""One billing service for both paths: a JSON request and a cut stream each end in exactly one settlement
(one reservation closed, its ledger entries) and one generation record, written in ONE transaction: a failure
raised by the record write at commit time (a deferred PostgreSQL trigger) rolls the settlement back."""

from decimal import Decimal

import pytest
from django.db import DatabaseError, connection

from gateway.accounts.models import Account
from gateway.billing.generations import GenerationRecord, generation_id_new
from gateway.billing.models import EntryKind, Generation, LedgerEntry, Reservation, ReservationStatus
from gateway.billing.services import credits_reserve, generation_settle
from tests.support import point_provider

PROVIDERS = ["standin-chat", "standin-responses", "standin-anthropic"]


def ask(client, *, stream=False):
    payload = {"model": "standin/echo", "input": "Hello", "provider": {"sort": "price"}, "stream": stream}
    return client.post("/api/v1/responses", payload, format="json")


def settlements(generation_id: str) -> list[str]:
    return sorted(LedgerEntry.objects.filter(generation_id=generation_id).values_list("kind", flat=True))


def test_a_json_request_settles_once_with_its_record(alice, standin_catalog):
    response = ask(alice.client())
    assert response.status_code == 200
    gen_id = response["X-Generation-Id"]
    record = Generation.objects.get(pk=gen_id)
    assert settlements(gen_id) == [EntryKind.CHARGE, EntryKind.RELEASE]
    charge = LedgerEntry.objects.get(generation_id=gen_id, kind=EntryKind.CHARGE)
    assert -charge.amount == record.cost > 0 and record.status == "completed"
    assert response.json()["usage"]["cost"] == float(record.cost)
    assert list(Reservation.objects.filter(account_id=alice.account_id).values_list("status", flat=True)) == [
        ReservationStatus.SETTLED
    ]


def test_a_cut_stream_settles_once_with_its_record(alice, standin_catalog):
    for slug in PROVIDERS:
        point_provider(slug, standin_catalog, "cut_after=3,chunks=6,text=abcdefghijklmnopqrstuvwxyz0123456789")
    response = ask(alice.client(), stream=True)
    raw = b"".join(response.streaming_content)
    assert b"response.failed" in raw
    gen_id = response["X-Generation-Id"]
    record = Generation.objects.get(pk=gen_id)
    assert record.status == "failed" and record.tokens_output > 0
    assert settlements(gen_id) == [EntryKind.CHARGE, EntryKind.RELEASE]
    assert -LedgerEntry.objects.get(generation_id=gen_id, kind=EntryKind.CHARGE).amount == record.cost > 0
    assert Generation.objects.filter(account_id=alice.account_id).count() == 1
    assert list(Reservation.objects.filter(account_id=alice.account_id).values_list("status", flat=True)) == [
        ReservationStatus.SETTLED
    ]


FAIL_AT_COMMIT = """
CREATE OR REPLACE FUNCTION pipeline_test_refuse() RETURNS trigger AS $$
BEGIN RAISE EXCEPTION 'record refused'; END $$ LANGUAGE plpgsql;
CREATE CONSTRAINT TRIGGER pipeline_test_refuse AFTER INSERT ON billing_generation
DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION pipeline_test_refuse();
"""


@pytest.mark.django_db(transaction=True)
def test_a_failed_record_write_rolls_the_settlement_back(alice):
    assert connection.vendor == "postgresql"
    reservation = credits_reserve(account_id=alice.account_id, amount=Decimal("1"))
    record = GenerationRecord(
        id=generation_id_new(),
        account_id=alice.account_id,
        api_key_id=None,
        workspace_id=None,
        requested_model="standin/echo",
        cost=Decimal("0.25"),
    )
    with connection.cursor() as cursor:
        cursor.execute(FAIL_AT_COMMIT)  # fails at commit: after the settlement's statements ran
    try:
        with pytest.raises(DatabaseError, match="record refused"):
            generation_settle(reservation=reservation, record=record, charge=True)
    finally:
        with connection.cursor() as cursor:
            cursor.execute(
                "DROP TRIGGER pipeline_test_refuse ON billing_generation; DROP FUNCTION pipeline_test_refuse();"
            )
    assert not Generation.objects.filter(pk=record.id).exists()
    assert settlements(record.id) == []
    assert Reservation.objects.get(pk=reservation.id).status == ReservationStatus.HELD
    assert Account.objects.get(pk=alice.account_id).balance == Decimal("9")  # still held, nothing charged

    charged = generation_settle(reservation=reservation, record=record, charge=True)
    assert charged == Decimal("0.25") and Generation.objects.get(pk=record.id).cost == charged
    assert settlements(record.id) == [EntryKind.CHARGE, EntryKind.RELEASE]
    assert Account.objects.get(pk=alice.account_id).balance == Decimal("9.75")
