"""A client that hangs up mid-stream: the gateway closes the upstream promptly and bills what was generated."""

import time
from decimal import Decimal

import pytest
import requests

from gateway.billing.models import EntryKind, Generation, LedgerEntry
from gateway.billing.provisioning import account_provision
from tests.support import Persona

pytestmark = pytest.mark.live


def test_client_disconnect_closes_upstream_and_bills(live_gateway, transactional_db, standin_catalog):
    erin = Persona(account_provision(name="erin", plan="payg", credits=Decimal("5")))
    before = standin_catalog.aborted_streams
    # Given a long, slow upstream stream (60 chunks, 100 ms apart: 6 s)
    body = {
        "model": "standin/echo",
        "stream": True,
        "input": 'Go <<standin {"chunks": 60, "interval_ms": 100, "text": "' + "word " * 120 + '"}>>',
    }
    response = requests.post(
        f"{live_gateway.api}/responses",
        json=body,
        stream=True,
        timeout=10,
        headers={"Authorization": f"Bearer {erin.api_key}"},
    )
    generation_id = response.headers["X-Generation-Id"]
    # When the client reads the first deltas and hangs up
    seen = b""
    for chunk in response.iter_content(chunk_size=None):
        seen += chunk
        if seen.count(b"response.output_text.delta") >= 6:
            break
    response.close()
    hung_up_at = time.monotonic()
    # Then the upstream connection is closed well before its 6 s are over
    while standin_catalog.aborted_streams == before and time.monotonic() - hung_up_at < 3:
        time.sleep(0.05)
    assert standin_catalog.aborted_streams > before, "the gateway kept reading the upstream"
    assert time.monotonic() - hung_up_at < 3
    # And the generation is recorded as cancelled, billed for the tokens generated so far
    deadline = time.monotonic() + 5
    while not Generation.objects.filter(pk=generation_id).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    record = Generation.objects.get(pk=generation_id)
    assert record.cancelled and record.status == "cancelled"
    assert 0 < record.tokens_output < 150 and record.cost > 0
    charged = LedgerEntry.objects.get(generation_id=generation_id, kind=EntryKind.CHARGE)
    assert -charged.amount == record.cost
