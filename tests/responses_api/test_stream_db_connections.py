"""A stream holds no pooled database connection while it is relayed, even when something reads the database
after the upstream call began (a version check refreshing mid-request): a burst of streams exhausted the pool
(503s after DB_POOL_TIMEOUT) when each kept the connection its version refresh took."""

from decimal import Decimal

import pytest
from django.db import connection

from gateway.billing.provisioning import account_provision
from tests.support import Persona

pytestmark = [
    pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite's test connection is never given back"),
    pytest.mark.django_db(transaction=True),
]


def test_no_connection_is_held_while_a_stream_is_relayed(standin_catalog, settings):
    settings.CACHE_VERSION_CHECK_SECONDS = 0  # every version check reads the database
    dora = Persona(account_provision(name="dora", plan="payg", credits=Decimal("10")))
    response = dora.client().post(
        "/api/v1/responses",
        {"model": "standin/echo", "input": "Hello", "stream": True, "plugins": [{"id": "response-healing"}]},
        format="json",
    )
    assert response.status_code == 200
    held_while_relaying = []
    chunks = []
    for chunk in response.streaming_content:
        chunks.append(chunk)
        if b"response.output_text.delta" in chunk:
            held_while_relaying.append(connection.connection is not None)
    assert b"response.completed" in b"".join(chunks)
    assert held_while_relaying and not any(held_while_relaying)
